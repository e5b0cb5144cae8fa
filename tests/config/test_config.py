"""Settings resolve as shipped defaults < FOXHUNT_HOME/config.toml < --config FILE, strictly."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from foxhunt.config import Settings, load_settings
from foxhunt.errors import ConfigError


def test_defaults_load_and_are_frozen(isolated_home):
    resolved = load_settings()
    assert resolved.home == isolated_home
    assert resolved.store_path == isolated_home / "store.duckdb"
    assert resolved.sources == ["built-in defaults.toml"]
    with pytest.raises(ValidationError, match="frozen"):
        resolved.settings.data.store = "x"  # type: ignore[misc]


def test_shipped_defaults_equal_model_defaults():
    assert load_settings().settings == Settings()


def test_user_file_then_config_file_override(isolated_home, tmp_path):
    (isolated_home / "config.toml").write_text('[data]\nstore = "user.duckdb"\n[features]\nclip = 3.0\n')
    cli_file = tmp_path / "run.toml"
    cli_file.write_text("[features]\nclip = 4.0\n")
    resolved = load_settings(cli_file)
    assert resolved.settings.data.store == "user.duckdb"
    assert resolved.settings.features.clip == 4.0
    assert resolved.sources == ["built-in defaults.toml", str(isolated_home / "config.toml"), str(cli_file)]


def test_absolute_store_path_is_kept(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(f'[data]\nstore = "{tmp_path}/elsewhere.duckdb"\n')
    assert load_settings(f).store_path == tmp_path / "elsewhere.duckdb"


def test_unknown_key_names_the_key_and_the_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[features]\nclipp = 3.0\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: unknown key 'features\.clipp'"):
        load_settings(f)


def test_unknown_section_in_user_file_names_that_file(isolated_home):
    (isolated_home / "config.toml").write_text("[trainer]\nepochs = 3\n")
    with pytest.raises(ConfigError, match=r"config\.toml: unknown key 'trainer'"):
        load_settings()


def test_bad_value_names_key_and_value(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[features]\nclip = -1\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: key 'features\.clip'.*-1"):
        load_settings(f)


def test_invalid_toml_and_missing_file(tmp_path):
    f = tmp_path / "broken.toml"
    f.write_text("[features\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(f)
    with pytest.raises(ConfigError, match="file not found"):
        load_settings(tmp_path / "absent.toml")
