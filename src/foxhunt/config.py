"""Resolved settings: shipped defaults < $FOXHUNT_HOME/config.toml < --config FILE.

Each layer owns its section's model; this module only composes them (it sits at the top, beside
the CLI), so lower layers receive their section as an argument and never read global state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pydantic

from foxhunt.configbase import StrictConfig, describe_validation_error, read_toml
from foxhunt.errors import ConfigError
from foxhunt.features.config import FeatureConfig
from foxhunt.training.config import TrainingSpec

HOME_ENV = "FOXHUNT_HOME"


class DataConfig(StrictConfig):
    store: str = "store.duckdb"


class Settings(TrainingSpec):
    """Every section: the training ones (shared with `TrainingSpec`) plus data and features."""

    data: DataConfig = DataConfig()
    features: FeatureConfig = FeatureConfig()

    def training_spec(self) -> TrainingSpec:
        return TrainingSpec(**{name: getattr(self, name) for name in TrainingSpec.model_fields})


def foxhunt_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".foxhunt").expanduser()


@dataclass(frozen=True)
class ResolvedSettings:
    settings: Settings
    home: Path
    sources: list[str] = field(default_factory=list)

    @property
    def store_path(self) -> Path:
        p = Path(self.settings.data.store).expanduser()
        return p if p.is_absolute() else self.home / p

    @property
    def instruments_file(self) -> Path:
        return self.home / "instruments.toml"


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _origin(layers: list[tuple[str, dict[str, Any]]], loc: tuple) -> str:
    """The last file whose data holds the key path `loc` (or its deepest existing prefix)."""
    for name, data in reversed(layers):
        node: Any = data
        for part in loc:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return name
    return layers[-1][0]


def load_settings(config_file: Path | None = None, home: Path | None = None) -> ResolvedSettings:
    home = home or foxhunt_home()
    shipped = resources.files("foxhunt.resources").joinpath("defaults.toml")
    with resources.as_file(shipped) as path:
        layers = [("built-in defaults.toml", read_toml(path))]
    user_file = home / "config.toml"
    if user_file.exists():
        layers.append((str(user_file), read_toml(user_file)))
    if config_file is not None:
        layers.append((str(config_file), read_toml(Path(config_file))))
    merged: dict[str, Any] = {}
    for _, data in layers:
        merged = _merge(merged, data)
    try:
        settings = Settings.model_validate(merged)
    except pydantic.ValidationError as exc:
        loc = tuple(exc.errors()[0]["loc"])
        raise ConfigError(describe_validation_error(exc, _origin(layers, loc))) from None
    return ResolvedSettings(settings, home, [name for name, _ in layers])
