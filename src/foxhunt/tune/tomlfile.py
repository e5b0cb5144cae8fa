"""The study's best configuration as a TOML file for `foxhunt train --config`.

The file holds the settings the study's trials started from (the sections' keys that were set:
shipped defaults, FOXHUNT_HOME/config.toml, --config, command-line options) with the best
trial's parameters over them. Sizes left to the GPU profile stay unset, so that
`foxhunt train --config best.toml --profile P` trains what the trial trained on profile P.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from foxhunt.configbase import read_toml
from foxhunt.features.config import FeatureConfig
from foxhunt.fileio import write_text_atomic
from foxhunt.training.config import TrainingSpec, _merged
from foxhunt.tune.space import apply, overrides


def best_config(base: TrainingSpec, features: FeatureConfig | None,
                params: Mapping[str, Any]) -> dict[str, Any]:
    """The config document: `base`'s set keys per section, `params` over them (validated)."""
    apply(base, params, "best trial")  # the values validate, as the trial's did
    doc: dict[str, Any] = {}
    if features is not None:
        doc["features"] = features.model_dump(mode="json", exclude_unset=True)
    tuned = overrides(params)
    for name in TrainingSpec.model_fields:
        section = getattr(base, name).model_dump(mode="json", exclude_unset=True)
        section = _merged(section, tuned.get(name, {}))
        if section:
            doc[name] = section
    return doc


def toml_text(doc: Mapping[str, Any], header: list[str] | None = None) -> str:
    """TOML for a document of tables of scalars, lists and nested tables (None values are
    left out: unset in foxhunt's configs means "the default")."""
    lines = [f"# {h}" for h in header or []]
    if lines:
        lines.append("")
    _table(lines, [], doc)
    return "\n".join(lines).rstrip() + "\n"


def _table(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    scalars = [(k, v) for k, v in table.items() if v is not None and not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if path and scalars:
        lines.append(f"[{'.'.join(_key(p) for p in path)}]")
    for key, value in scalars:
        lines.append(f"{_key(key)} = {_value(value)}")
    if path and scalars:
        lines.append("")
    for key, value in tables:
        _table(lines, [*path, key], value)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return ("inf" if value > 0 else "-inf") if math.isinf(value) else "nan"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def write_toml(path: Path, doc: Mapping[str, Any], header: list[str] | None = None) -> Path:
    """Write atomically and read back: what is written parses to `doc`."""
    path = write_text_atomic(toml_text(doc, header), path)
    read_toml(path)
    return path
