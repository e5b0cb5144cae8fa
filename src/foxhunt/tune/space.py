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

Learners (`[agent] kind`) each read their own settings, so a space has a part per kind. The
tables above are shared: every kind the study trains must read each of their keys. A
`[kind.KIND]` table holds the keys searched only where a trial trains KIND, in the same shape
(TOML's dotted keys keep it short):

    [agent]
    kind   = { choices = ["dqn", "pqn", "ppo"] }   # search the learner itself
    hidden = { choices = [64, 128, 256] }          # shared: every kind reads it
    [kind.dqn]
    agent.lr      = { low = 1e-5, high = 3e-3, log = true }
    replay.n_step = { low = 1, high = 32, log = true }
    [kind.ppo]
    ppo.clip_coef = { low = 0.05, high = 0.3 }

A trial samples `agent.kind` first, then the shared keys, then its kind's own (Optuna's
define-by-run: a PPO trial has no DQN parameter). Without `agent.kind` in the space the study
trains the config's kind, with its `[kind.*]` table; the other kinds' tables are checked and
left unused. A key given where a kind the study trains does not read it (`[kind.ppo]
replay.n_step`, or a shared `[replay] n_step` while PPO is among the kinds) is one line naming
the key and the kind (`readers`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from foxhunt.agents.dqn.config import KINDS
from foxhunt.configbase import read_toml
from foxhunt.errors import ConfigError
from foxhunt.training.config import TrainingSpec

DEFAULT_SPACE = "tune_space.toml"
"""The space shipped in `foxhunt.resources`, used when `--space` is not given."""

RANGE_KEYS = {"low", "high", "log", "step"}
CHOICE_KEYS = {"choices"}
KIND_KEY = "agent.kind"
KIND_TABLE = "kind"
"""The space's table of per-kind sub-spaces: `[kind.ppo]` holds what only PPO trials search."""

NETWORK_FIELDS = {"pqn": ("hidden", "trunk_layers", "dueling", "branches"),
                  "ppo": ("hidden", "trunk_layers", "branches")}
"""The `[agent]` keys PQN and PPO read: their networks' layout fields (`agents.pqn.network` and
`agents.ppo.network` LAYOUT_FIELDS, held equal by tests/tune/test_kinds.py); the DQN reads all
of `[agent]`."""

DQN_ONLY_TRAIN = ("average_epochs", "performance")
"""`[train]` keys only the DQN reads: PQN and PPO deploy their online network (no weight
average) and run eagerly ([train.performance] is the DQN's; docs/training.md, "Learners")."""


def readers(key: str) -> tuple[str, ...]:
    """The kinds whose training reads setting `key` (dotted): `[replay]` and most of `[agent]`
    are the DQN's, `[pqn]` PQN's, `[ppo]` PPO's; `[env]`, `[walkforward]` and the budget keys of
    `[train]` every kind's."""
    section, name = key.split(".")[0], key.split(".")[1] if "." in key else ""
    if section in ("pqn", "ppo"):
        return (section,)
    if section == "replay":
        return ("dqn",)
    if section == "agent" and name != "kind":
        return tuple(k for k in KINDS if k not in NETWORK_FIELDS or name in NETWORK_FIELDS[k])
    if section == "train" and name in DQN_ONLY_TRAIN:
        return ("dqn",)
    return KINDS



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

    def suggest(self, trial) -> Any:
        """Sample this parameter in an Optuna trial (its distribution as `distribution`)."""
        if self.kind == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high),
                                     step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), step=self.step,
                                   log=self.log)

    def describe(self) -> str:
        if self.kind == "categorical":
            return f"{self.key} in {list(self.choices)}"
        scale = ", log" if self.log else ""
        step = f", step {self.step}" if self.step else ""
        return f"{self.key} {self.kind} [{self.low}, {self.high}{scale}{step}]"


@dataclass(frozen=True)
class SearchSpace:
    """What a study searches. `shared` holds the keys every trial samples (`agent.kind` first
    where the learner is searched); `own[k]` the keys only trials of kind k sample. `kinds` are
    the kinds trials may train: `agent.kind`'s choices, else the config's kind alone."""

    shared: tuple[Param, ...]
    source: str  # the file it was read from (for messages)
    text: str  # the file's text, kept with the study so that a resume can check it
    own: Mapping[str, tuple[Param, ...]] = field(default_factory=dict)
    kinds: tuple[str, ...] = ("dqn",)
    unused: tuple[str, ...] = ()  # kinds with a [kind.*] table that the study does not train

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    @property
    def searches_kind(self) -> bool:
        return any(p.key == KIND_KEY for p in self.shared)

    @property
    def params(self) -> tuple[Param, ...]:
        """Every parameter some trial samples: the shared ones, then each kind's own (a key two
        kinds search, with one range, once)."""
        seen = {p.key for p in self.shared}
        out = list(self.shared)
        for kind in self.kinds:
            for p in self.own.get(kind, ()):
                if p.key not in seen:
                    seen.add(p.key)
                    out.append(p)
        return tuple(out)

    def distributions(self) -> dict[str, Any]:
        """All parameters' distributions (a PSO particle has a coordinate for each; a trial
        reads those of its kind)."""
        return {p.key: p.distribution() for p in self.params}

    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def kind_of(self, params: Mapping[str, Any]) -> str:
        """The kind a trial with `params` trains."""
        return str(params.get(KIND_KEY, self.kinds[0]))

    def params_of(self, kind: str) -> tuple[Param, ...]:
        """What a trial of `kind` samples, in order."""
        return (*self.shared, *self.own.get(kind, ()))

    def suggest(self, trial) -> dict[str, Any]:
        """Sample a trial's parameters (Optuna define-by-run): the kind first, then the shared
        parameters, then that kind's own."""
        values = {p.key: p.suggest(trial) for p in self.shared}
        for p in self.own.get(self.kind_of(values), ()):
            values[p.key] = p.suggest(trial)
        return values

    def describe(self) -> list[str]:
        """One line per parameter; a kind's own say whose they are."""
        owner: dict[str, list[str]] = {}
        for kind in self.kinds:
            for p in self.own.get(kind, ()):
                owner.setdefault(p.key, []).append(kind)
        return [p.describe() + (f" ({', '.join(owner[p.key])} only)" if p.key in owner else "")
                for p in self.params]

    def summary(self) -> str:
        """The searched keys in a line: shared, then per kind."""
        shared = ", ".join(p.describe() if p.key == KIND_KEY else p.key for p in self.shared)
        parts = [shared] if shared else []
        for kind in self.kinds:
            if self.own.get(kind):
                parts.append(f"{kind}: {', '.join(p.key for p in self.own[kind])}")
        return "; ".join(parts)


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
    base = base or TrainingSpec()
    doc = dict(doc)
    tables = doc.pop(KIND_TABLE, {})
    shared: list[Param] = []
    _walk(doc, TrainingSpec, "", source, shared)
    own: dict[str, tuple[Param, ...]] = {}
    if not isinstance(tables, Mapping):
        raise ConfigError(f"{source}: '{KIND_TABLE}' holds a table per kind: write "
                          f"[{KIND_TABLE}.ppo] with bounds for PPO's own keys")
    for kind, table in tables.items():
        where = f"[{KIND_TABLE}.{kind}]"
        if kind not in KINDS:
            raise ConfigError(f"{source}: {where}: unknown kind '{kind}' (kinds: "
                              f"{', '.join(KINDS)})")
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: {where} is a table of {kind}'s own keys, e.g. "
                              f"{where} agent.lr = {{ low = 1e-5, high = 1e-3, log = true }}")
        params: list[Param] = []
        _walk(table, TrainingSpec, "", f"{source} {where}", params, kind)
        for p in params:
            if p.key == KIND_KEY:
                raise ConfigError(f"{source}: {where} {KIND_KEY}: the kind is searched in the "
                                  "shared [agent] table, not in a kind's own")
            if kind not in readers(p.key):
                raise ConfigError(f"{source}: {where} {p.key}: kind {kind} does not read this "
                                  f"setting ({_whose(p.key)}); search it under "
                                  f"[{KIND_TABLE}.{readers(p.key)[0]}]")
        own[kind] = tuple(params)
    kind_param = next((p for p in shared if p.key == KIND_KEY), None)
    if kind_param is not None:
        if kind_param.kind != "categorical":
            raise ConfigError(f"{source}: {KIND_KEY}: search the learner as "
                              f"{{ choices = [{', '.join(map(json.dumps, KINDS))}] }}")
        for choice in kind_param.choices:
            if choice not in KINDS:
                raise ConfigError(f"{source}: {KIND_KEY}: unknown kind {choice!r} (kinds: "
                                  f"{', '.join(KINDS)})")
        shared.remove(kind_param)
        shared.insert(0, kind_param)  # sampled first: what a trial samples next depends on it
        kinds = tuple(str(c) for c in kind_param.choices)
    else:
        kinds = (base.agent.kind,)
    for p in shared:
        missing = [k for k in kinds if k not in readers(p.key)]
        if missing:
            why = ("the config's [agent] kind" if kind_param is None else
                   f"among {KIND_KEY}'s choices")
            raise ConfigError(f"{source}: {p.key}: kind {missing[0]} ({why}) does not read this "
                              f"setting ({_whose(p.key)}); search it under "
                              f"[{KIND_TABLE}.{readers(p.key)[0]}]")
    _one_range_per_key(own, kinds, source)
    for p in [*shared, *(p for table in own.values() for p in table)]:
        values = p.choices if p.kind == "categorical" else (p.low, p.high)
        for value in values:
            try:
                apply(base, {p.key: value}, source)
            except ConfigError as exc:
                raise ConfigError(f"{source}: {p.key}: the value {value!r} is refused by the "
                                  f"setting ({_reason(str(exc))})") from None
    unused = tuple(k for k in own if k not in kinds)
    if not shared and not any(own.get(k) for k in kinds):
        idle = [k for k in unused if own[k]]
        hint = (f" for kind {kinds[0]} (the config's [agent] kind; [{KIND_TABLE}.{idle[0]}] is "
                f"searched where {idle[0]} trains: search {KIND_KEY} too)" if idle else "")
        raise ConfigError(f"{source}: no parameters to search{hint}; declare bounds such as "
                          "[agent] lr = { low = 1e-5, high = 1e-3, log = true }")
    return SearchSpace(tuple(shared), source, text,
                       {k: v for k, v in own.items() if k in kinds}, kinds, unused)


def _whose(key: str) -> str:
    kinds = readers(key)
    return f"{kinds[0]}'s" if len(kinds) == 1 else f"read by {' and '.join(kinds)}"


def _one_range_per_key(own: Mapping[str, tuple[Param, ...]], kinds: tuple[str, ...],
                       source: str) -> None:
    """A key two kinds search is one parameter of the study: it needs one range."""
    seen: dict[str, tuple[str, Param]] = {}
    for kind in kinds:
        for p in own.get(kind, ()):
            if p.key in seen and seen[p.key][1] != p:
                raise ConfigError(f"{source}: {p.key}: searched by {seen[p.key][0]} and {kind} "
                                  "with different ranges; give it one range (in both tables, "
                                  "or once in the shared tables)")
            seen.setdefault(p.key, (kind, p))


def _reason(message: str) -> str:
    return message.split(": ", 1)[-1]


def _walk(doc: Mapping[str, Any], model: type[BaseModel], prefix: str, source: str,
          out: list[Param], kind: str | None = None) -> None:
    """The bounds in `doc` (a table of `model`'s settings at `prefix`) as Params in `out`;
    `kind` is the kind whose [kind.*] table this is (for a hint)."""
    for name, value in doc.items():
        key = f"{prefix}{name}"
        info = model.model_fields.get(name)
        if info is None:
            where = f"[{prefix[:-1]}]" if prefix else "the training config"
            known = ", ".join(sorted(model.model_fields))
            homes = [] if prefix else [
                section for section, f in model.model_fields.items()
                if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)
                and name in f.annotation.model_fields]
            if homes:  # e.g. a bare `clip_coef` in [kind.ppo]: its section is missing
                home = kind if kind in homes else homes[0]
                raise ConfigError(f"{source}: unknown key '{key}' (a setting of "
                                  f"{', '.join(f'[{h}]' for h in homes)}: write {home}.{name})")
            raise ConfigError(f"{source}: unknown key '{key}' (not a setting of {where}; "
                              f"known: {known})")
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: '{key}' is a section: write [{key}] with bounds "
                                  "for its keys")
            _walk(value, sub, f"{key}.", source, out, kind)
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
