"""A tiny study's pieces: a 3,000-bar synthetic market, the tiny training spec, a two-key space."""

from __future__ import annotations

from pathlib import Path

from foxhunt.features.config import FeatureConfig
from foxhunt.profiles import choose_profile
from foxhunt.tune.objective import TrialContext
from foxhunt.tune.space import parse_space
from foxhunt.tune.study import TuneConfig
from tests.training.builders import instrument, synth, tiny_spec

SPACE = {"agent": {"lr": {"low": 1e-4, "high": 3e-3, "log": True}},
         "replay": {"n_step": {"low": 1, "high": 4}}}


def space():
    return parse_space(SPACE, "space.toml", "two keys")


def context(root: Path, bars=None, **kw) -> TrialContext:
    """Seconds a trial on the CPU (tiny_spec: 2 folds of 2 epochs)."""
    bars = bars if bars is not None else synth(3000, 0.5).bars
    return TrialContext(bars, instrument(), FeatureConfig(), tiny_spec(),
                        choose_profile("default").profile, None, "sharpe", root, threads=1, **kw)


def config(root: Path, **kw) -> TuneConfig:
    base = {"name": "t", "storage": f"sqlite:///{root}/studies.db", "trials": 4, "particles": 2,
            "backend": "thread"}
    return TuneConfig(**{**base, **kw})


SOURCE = {"symbol": "SYN", "bars": "1min"}
