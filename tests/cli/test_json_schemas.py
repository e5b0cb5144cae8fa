"""Every `--json` document is an object led by `schema_version` and `kind`, and holds to the JSON
Schema of its kind (src/foxhunt/resources/schemas, docs/json.md): each command run here on tiny
synthetic data and on the bundled sample, its document checked with `jsonschema`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import jsonschema
import pytest

import foxhunt.cli.train as train_cli
from foxhunt import schemas
from foxhunt.schemas import SCHEMA_VERSIONS, envelope, load_schema

from .test_cli import run_json, write_bars_csv
from .test_cli_train_backtest import TINY

DOCS = Path(__file__).resolve().parents[2] / "docs" / "json.md"
SCHEMA_DIR = Path(schemas.__file__).parent / "resources" / "schemas"
SYN = ("SYN", "--bars", "1min")


def checked(capsys, kind: str, *argv: str) -> dict:
    """The command's `--json` document, checked against the schema of `kind`."""
    doc = run_json(capsys, *argv)
    assert doc["schema_version"] == SCHEMA_VERSIONS[kind] and doc["kind"] == kind
    assert list(doc)[:2] == ["schema_version", "kind"]
    schemas.validate(doc)
    return doc


@pytest.fixture
def tiny(tmp_path) -> Path:
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    return cfg


# -- the schemas themselves ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(SCHEMA_VERSIONS))
def test_each_kind_has_a_valid_schema_that_names_it(kind):
    schema = load_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["required"][:2] == ["schema_version", "kind"]
    assert schema["properties"]["kind"] == {"const": kind}
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSIONS[kind]}
    for key in schema["required"]:  # a required key is a typed one
        assert key in schema["properties"], f"{kind}: required {key!r} has no type"


def test_every_schema_file_is_a_kind_and_every_kind_is_documented():
    files = {p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.json")}
    assert files == set(SCHEMA_VERSIONS)
    documented = set(re.findall(r"^### `([a-z.]+)`", DOCS.read_text(), re.MULTILINE))
    assert documented == set(SCHEMA_VERSIONS)


def test_a_document_is_an_object_of_a_known_kind():
    assert envelope("version", {"foxhunt": "x"}) == {"schema_version": 1, "kind": "version",
                                                     "foxhunt": "x"}
    with pytest.raises(TypeError, match="object"):
        envelope("data.list", [{"symbol": "ES"}])
    with pytest.raises(ValueError, match="unknown"):
        envelope("nope", {})
    with pytest.raises(ValueError, match="kind"):
        envelope("data.import", {"kind": "bars"})
    with pytest.raises(ValueError, match="unknown"):
        load_schema("nope")
    bad = envelope("version", {"foxhunt": 1, "torch": "2", "numpy": "2", "cuda": False})
    with pytest.raises(jsonschema.ValidationError):
        schemas.validate(bad)


# -- the commands' documents ----------------------------------------------------------------------


def test_data_features_and_backtest_documents(capsys, tmp_path):
    checked(capsys, "version", "version")
    checked(capsys, "config", "config", "show")
    doc = checked(capsys, "data.import", "data", "import", str(write_bars_csv(tmp_path / "es.csv")),
                  "--symbol", "ES")
    assert doc["file_kind"] == "bars" and doc["bars"] == {"1min": 50}
    checked(capsys, "data.synth", "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4")
    listing = checked(capsys, "data.list", "data", "list")
    assert [r["symbol"] for r in listing["series"]] == ["ES", "SYN"]
    checked(capsys, "data.show", "data", "show", "ES", "--limit", "3")
    checked(capsys, "data.export", "data", "export", "ES", "--bars", "1min", "--out",
            str(tmp_path / "es.parquet"))
    checked(capsys, "features.show", "features", "show", "SYN")
    checked(capsys, "features.export", "features", "export", "SYN", "--out",
            str(tmp_path / "f.parquet"))
    checked(capsys, "backtest", "backtest", "SYN", "--strategy", "buy-and-hold",
            "--strategy", "sma:10,30")


def test_trading_documents(capsys):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "600", "--seed", "3")
    checked(capsys, "paper", "paper", *SYN, "--strategy", "sma:10,30", "--account", "a")
    checked(capsys, "orders", "orders", "--account", "a")
    checked(capsys, "positions", "positions", "--account", "a")
    checked(capsys, "risk", "risk", "status", "--account", "a")
    assert checked(capsys, "risk", "risk", "halt", "--account", "a")["trading_state"] == "HALTED"
    checked(capsys, "risk", "risk", "resume", "--account", "a")
    assert "flatten" in checked(capsys, "risk", "risk", "kill", "--account", "a")


def test_train_and_report_documents(capsys, tiny, tmp_path):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "1000", "--seed", "4")
    run_dir = tmp_path / "run"
    checked(capsys, "train.run", "--config", str(tiny), "train", *SYN, "--folds", "1", "--out",
            str(run_dir))
    checked(capsys, "report.run", "--config", str(tiny), "report", str(run_dir), "--out",
            str(tmp_path / "run.html"))


def test_tune_and_study_report_documents(capsys, tiny, tmp_path, isolated_home):
    pytest.importorskip("optuna")
    space = tmp_path / "space.toml"
    space.write_text("[agent]\nlr = { low = 1e-4, high = 3e-3, log = true }\n")
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "1000", "--seed", "4")
    doc = checked(capsys, "tune.study", "--config", str(tiny), "tune", *SYN, "--space", str(space),
                  "--trials", "2", "--particles", "2", "--backend", "thread", "--folds", "1")
    assert doc["final"] is not None
    checked(capsys, "report.study", "report", doc["study_dir"], "--out", str(tmp_path / "s.html"))


def test_sample_and_demo_documents(capsys, monkeypatch):
    checked(capsys, "data.sample", "data", "sample")
    small = tomllib.loads(TINY)  # the demo's path as it is, on budgets a test can afford
    small["walkforward"]["folds"] = 1
    for name in ("DEMO_OVERRIDES", "DEMO_SYNTH_OVERRIDES"):
        if hasattr(train_cli, name):
            monkeypatch.setattr(train_cli, name, small)
    if hasattr(train_cli, "DEMO_SYNTH"):
        monkeypatch.setattr(train_cli, "DEMO_SYNTH", {**train_cli.DEMO_SYNTH, "n_bars": 2000})
    doc = checked(capsys, "demo", "demo")
    assert doc["data"] and doc["backtests"]
    # Two markets, each run and report labelled for what it is.
    planted = doc["synthetic"]
    assert planted["market"]["symbol"] == "SYN" and planted["backtests"]
    assert "real ES" in Path(doc["report"]).read_text()
    assert "planted AR(1) edge" in Path(planted["report"]).read_text()
