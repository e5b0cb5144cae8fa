"""The search space of `foxhunt tune`: bounds for training-config keys, read from TOML.

The file mirrors the training config's sections; each key holds the range of that setting:

    [agent]
    lr     = { low = 1e-5, high = 3e-3, log = true }   # float: a bound is a float
    hidden = { choices = [64, 128, 256] }               # categorical
    [replay]
    n_step = { low = 1, high = 5 }                      # int: both bounds are ints
    [train.performance]
    autocast = { choices = ["bf16", "tf32"] }

Keys are checked against the training spec (`TrainingSpec`) when the file is read: an unknown
key, an empty or inverted range, a log range reaching 0, or a bound the setting itself refuses
is one line naming the key and the file, before any trial runs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from foxhunt.configbase import read_toml
from foxhunt.errors import ConfigError
from foxhunt.training.config import TrainingSpec

DEFAULT_SPACE = "tune_space.toml"
"""The space shipped in `foxhunt.resources`, used when `--space` is not given."""

RANGE_KEYS = {"low", "high", "log", "step"}
CHOICE_KEYS = {"choices"}


@dataclass(frozen=True)
class Param:
    """One searched setting: `key` is dotted (`agent.lr`, `train.performance.autocast`).
    `kind` is "float", "int" or "categorical"; a categorical has `choices`, the others
    `low`..`high` (inclusive), on a log scale with `log`, on a grid of `step` if set."""

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] = ()

    def distribution(self):
        """This parameter as an Optuna distribution."""
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        if self.kind == "categorical":
            return CategoricalDistribution(list(self.choices))
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log,
                                   step=int(self.step or 1))
        return FloatDistribution(float(self.low), float(self.high), log=self.log, step=self.step)

    def describe(self) -> str:
        if self.kind == "categorical":
            return f"{self.key} in {list(self.choices)}"
        scale = ", log" if self.log else ""
        step = f", step {self.step}" if self.step else ""
        return f"{self.key} {self.kind} [{self.low}, {self.high}{scale}{step}]"


@dataclass(frozen=True)
class SearchSpace:
    params: tuple[Param, ...]
    source: str  # the file it was read from (for messages)
    text: str  # the file's text, kept with the study so that a resume can check it

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def distributions(self) -> dict[str, Any]:
        return {p.key: p.distribution() for p in self.params}

    def keys(self) -> list[str]:
        return [p.key for p in self.params]


def overrides(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Dotted keys and values as the nested section updates `TrainingSpec.with_overrides` takes."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in params.items():
        section, *path = key.split(".")
        node = out.setdefault(section, {})
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def apply(spec: TrainingSpec, params: Mapping[str, Any], source: str) -> TrainingSpec:
    """`spec` with a trial's parameter values set (validated: a value the setting refuses is a
    ConfigError naming `source`)."""
    return spec.with_overrides(overrides(params), source) if params else spec


def load_space(path: Path | None = None, base: TrainingSpec | None = None) -> SearchSpace:
    """Read and check a space file (the shipped default when `path` is None) against `base`
    (the spec trials start from: each bound is applied to it and must validate)."""
    if path is None:
        shipped = resources.files("foxhunt.resources").joinpath(DEFAULT_SPACE)
        with resources.as_file(shipped) as p:
            return parse_space(read_toml(p), f"built-in {DEFAULT_SPACE}", p.read_text(), base)
    path = Path(path)
    return parse_space(read_toml(path), str(path), path.read_text(), base)


def parse_space(doc: Mapping[str, Any], source: str, text: str = "",
                base: TrainingSpec | None = None) -> SearchSpace:
    params: list[Param] = []
    _walk(doc, TrainingSpec, "", source, params)
    if not params:
        raise ConfigError(f"{source}: no parameters to search; declare bounds such as "
                          "[agent] lr = {{ low = 1e-5, high = 1e-3, log = true }}")
    base = base or TrainingSpec()
    for p in params:
        values = p.choices if p.kind == "categorical" else (p.low, p.high)
        for value in values:
            try:
                apply(base, {p.key: value}, source)
            except ConfigError as exc:
                raise ConfigError(f"{source}: {p.key}: the value {value!r} is refused by the "
                                  f"setting ({_reason(str(exc))})") from None
    return SearchSpace(tuple(params), source, text)


def _reason(message: str) -> str:
    return message.split(": ", 1)[-1]


def _walk(doc: Mapping[str, Any], model: type[BaseModel], prefix: str, source: str,
          out: list[Param]) -> None:
    for name, value in doc.items():
        key = f"{prefix}{name}"
        field = model.model_fields.get(name)
        if field is None:
            where = f"[{prefix[:-1]}]" if prefix else "the training config"
            known = ", ".join(sorted(model.model_fields))
            raise ConfigError(f"{source}: unknown key '{key}' (not a setting of {where}; "
                              f"known: {known})")
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: '{key}' is a section: write [{key}] with bounds "
                                  "for its keys")
            _walk(value, sub, f"{key}.", source, out)
            continue
        out.append(_param(key, value, source))


def _param(key: str, spec: Any, source: str) -> Param:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{source}: {key}: expected a range {{ low = .., high = .. }} or "
                          f"{{ choices = [..] }}, got {spec!r}")
    keys = set(spec)
    if keys & CHOICE_KEYS:
        if keys - CHOICE_KEYS:
            raise ConfigError(f"{source}: {key}: 'choices' takes no other keys "
                              f"(got {', '.join(sorted(keys - CHOICE_KEYS))})")
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"{source}: {key}: empty choices; list at least one value")
        if any(isinstance(c, (list, dict)) for c in choices):
            raise ConfigError(f"{source}: {key}: choices must be numbers, strings or booleans")
        if len(set(map(repr, choices))) != len(choices):
            raise ConfigError(f"{source}: {key}: repeated value in choices {choices}")
        return Param(key, "categorical", choices=tuple(choices))
    unknown = keys - RANGE_KEYS
    if unknown or not {"low", "high"} <= keys:
        raise ConfigError(f"{source}: {key}: a range needs 'low' and 'high' (optional 'log', "
                          f"'step'); got {', '.join(sorted(keys)) or 'nothing'}")
    low, high, log, step = spec["low"], spec["high"], spec.get("log", False), spec.get("step")
    for name, v in (("low", low), ("high", high), ("step", step)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not math.isfinite(v)):
            raise ConfigError(f"{source}: {key}: '{name}' must be a finite number, got {v!r}")
    if not isinstance(log, bool):
        raise ConfigError(f"{source}: {key}: 'log' must be true or false, got {log!r}")
    kind = "int" if all(isinstance(v, int) for v in (low, high)) and \
        (step is None or isinstance(step, int)) else "float"
    if not low < high:
        raise ConfigError(f"{source}: {key}: empty range [{low}, {high}]: low must be below high")
    if log and low <= 0:
        raise ConfigError(f"{source}: {key}: a log range needs low > 0, got {low}")
    if step is not None:
        if step <= 0 or step > high - low:
            raise ConfigError(f"{source}: {key}: step {step} must be in (0, high - low]")
        if log:
            raise ConfigError(f"{source}: {key}: 'step' and 'log' cannot be combined")
    if kind == "float":
        low, high = float(low), float(high)
    return Param(key, kind, low, high, log, step)
