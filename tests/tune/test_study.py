"""A study end to end on a tiny market: trials scored on validation, a record on disk, the best
configuration as a TOML file `foxhunt train --config` reads, resume, and K trials at once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from foxhunt.config import load_settings
from foxhunt.errors import ConfigError
from foxhunt.tune.objective import TrialTask, run_trial, trial_dir
from foxhunt.tune.space import apply, parse_space
from foxhunt.tune.study import BEST_FILE, RETURNS_FILE, STUDY_FILE, run_final, run_study

from .builders import SOURCE, config, context, space


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    ctx = context(root)
    doc = run_study(config(root, trials=4, parallel=2), ctx, space(), SOURCE)
    return root, ctx, doc


def test_every_trial_is_scored_on_validation_and_recorded(finished):
    root, _, doc = finished
    assert json.loads((root / STUDY_FILE).read_text())["trials"] == doc["trials"]
    assert [t["number"] for t in doc["trials"]] == [0, 1, 2, 3]
    done = [t for t in doc["trials"] if t["state"] == "complete"]
    assert done, doc["trials"]
    for t in done:
        assert t["value"] == pytest.approx(np.mean([f["sharpe"] for f in t["folds"]]))
        assert t["pso"] is not None
        with np.load(trial_dir(root, t["number"]) / RETURNS_FILE) as f:
            assert f["bars"].size == f["returns"].size > 0
        assert not (trial_dir(root, t["number"]) / "checkpoints").exists()  # weights dropped
    assert doc["best"]["value"] == max(t["value"] for t in done)
    assert doc["throughput"]["trials"] == 4 and doc["throughput"]["trials_per_hour"] > 0


def test_the_choice_comes_with_its_dsr_and_pbo(finished):
    _, _, doc = finished
    dsr = doc["deflated_sharpe"]
    assert 0.0 <= dsr["dsr"] <= 1.0 and dsr["n_trials"] == 4
    done = [t for t in doc["trials"] if t["state"] == "complete"]
    if len(done) >= 2:
        assert 0.0 <= doc["pbo"]["pbo"] <= 1.0 and doc["pbo"]["n_trials"] == len(done)
    assert set(doc["importance"]) <= {"agent.lr", "replay.n_step"}


def test_best_toml_trains_what_the_best_trial_trained(finished, tmp_path):
    root, ctx, doc = finished
    resolved = load_settings(config_file=root / BEST_FILE, home=tmp_path)
    trained = apply(ctx.base, doc["best"]["params"], "best")
    assert resolved.settings.training_spec() == trained
    assert "foxhunt tune: best of study 't'" in (root / BEST_FILE).read_text()


def test_the_final_run_repeats_the_best_validation_and_adds_test(finished, tmp_path):
    """On the CPU a run is reproducible from its seed: the configuration trained again scores
    on validation what its trial scored, and only this run has test figures."""
    root, ctx, doc = finished
    result = run_final(ctx, doc["best"]["params"], tmp_path / "final")
    assert np.mean([f.val["sharpe"] for f in result.folds]) == pytest.approx(doc["best"]["value"])
    assert all(f.test is not None for f in result.folds)
    record = json.loads((root / STUDY_FILE).read_text())["final"]
    assert [r["fold"] for r in record["folds"]] == [0, 1]


def test_resume_runs_up_to_the_requested_trials_and_checks_the_settings(finished):
    root, ctx, _ = finished
    with pytest.raises(ConfigError, match="study 't' already exists.*--resume"):
        run_study(config(root, trials=6), ctx, space(), SOURCE)
    with pytest.raises(ConfigError, match="study 'u' not found"):
        run_study(config(root, name="u"), ctx, space(), SOURCE, resume=True)
    other = parse_space({"agent": {"lr": {"low": 1e-4, "high": 1e-3}}}, "other.toml", "other")
    with pytest.raises(ConfigError, match="started with another space"):
        run_study(config(root, trials=6), ctx, other, SOURCE, resume=True)
    doc = run_study(config(root, trials=6), ctx, space(), SOURCE, resume=True)
    assert [t["number"] for t in doc["trials"]] == [0, 1, 2, 3, 4, 5]
    assert doc["throughput"]["trials"] == 2


def test_a_configuration_that_breaks_fails_its_trial_not_the_study(tmp_path):
    ctx = context(tmp_path)
    bad = run_trial(ctx, TrialTask(0, 0, {"walkforward.folds": 2000}))
    assert bad.state == "failed" and "walk-forward" in bad.error and "\n" not in bad.error


def test_the_pruner_stops_trials_behind_the_median(tmp_path):
    """Median pruning from the second epoch on, once 2 trials finished: of 8 random trials on
    the same market some are stopped early and recorded as pruned with their running score."""
    ctx = context(tmp_path, startup_trials=2)
    doc = run_study(config(tmp_path, trials=8, sampler="random", parallel=1), ctx, space(), SOURCE)
    states = [t["state"] for t in doc["trials"]]
    assert "pruned" in states, states
    pruned = [t for t in doc["trials"] if t["state"] == "pruned"]
    assert all(t["value"] is not None and not t["folds"] for t in pruned)


@pytest.mark.parametrize("sampler", ["tpe", "cmaes"])
def test_the_other_samplers_run(tmp_path, sampler):
    doc = run_study(config(tmp_path, trials=2, sampler=sampler, pruner="none"), context(tmp_path),
                    space(), SOURCE)
    assert [t["state"] for t in doc["trials"]] == ["complete", "complete"]


def test_processes_run_trials_with_pruning_through_the_storage(tmp_path):
    doc = run_study(config(tmp_path, trials=2, parallel=2, backend="process"), context(tmp_path),
                    space(), SOURCE)
    assert [t["state"] for t in doc["trials"]] == ["complete", "complete"]
    assert doc["throughput"]["backend"] == "process"
