"""No code path of a trial reads a test window: its score, its returns and everything it
records stay the same whatever the bars after its validation windows hold."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from foxhunt.training.trainer import WalkForwardTrainer
from foxhunt.tune.objective import TrialTask, run_trial, trial_dir
from tests.training.builders import pipeline, synth, tiny_spec

from .builders import context

PARAMS = {"agent.lr": 1e-3, "replay.n_step": 2}


def rewritten(bars, start: int):
    """`bars` with every bar from `start` on replaced by another market's (same length)."""
    other = synth(len(bars), 0.0, seed=99).bars
    cols = {f.name: np.concatenate([getattr(bars, f.name)[:start], getattr(other, f.name)[start:]])
            for f in dataclasses.fields(bars) if getattr(bars, f.name) is not None
            and f.name != "ts"}
    return dataclasses.replace(bars, **cols)


def folds_of(bars):
    return WalkForwardTrainer(tiny_spec(), bars, pipeline(), context(None).instrument, "/tmp/x",
                              scope="validation").folds


def test_a_trial_never_reads_a_test_window(tmp_path):
    bars = synth(3000, 0.5).bars
    folds = folds_of(bars)
    last_val = folds[-1].val.stop
    assert last_val < len(bars)  # the last fold's test window lies beyond every validation
    a = run_trial(context(tmp_path / "a", bars), TrialTask(0, 0, PARAMS))
    b = run_trial(context(tmp_path / "b", rewritten(bars, last_val)), TrialTask(0, 0, PARAMS))
    assert a.state == b.state == "complete"
    assert a.value == b.value and a.folds == b.folds
    assert np.array_equal(a.bars, b.bars) and np.array_equal(a.returns, b.returns)
    assert a.bars.max() < last_val
    for root in ("a", "b"):
        for line in json.loads((trial_dir(tmp_path / root, 0) / "folds.json").read_text()):
            assert line["test"] is None and line["baselines"] == {}


def test_each_fold_stops_at_its_own_validation_window(tmp_path):
    """Fold 0's figures do not move when fold 0's test window (fold 1's training data) is
    rewritten; fold 1's do, as they should."""
    bars = synth(3000, 0.5).bars
    first = folds_of(bars)[0]
    a = run_trial(context(tmp_path / "a", bars), TrialTask(0, 0, PARAMS))
    b = run_trial(context(tmp_path / "b", rewritten(bars, first.val.stop)), TrialTask(0, 0, PARAMS))
    assert a.folds[0] == b.folds[0]
    assert a.folds[1] != b.folds[1]
    inside = a.bars < first.val.stop
    assert np.array_equal(a.returns[inside], b.returns[b.bars < first.val.stop])
