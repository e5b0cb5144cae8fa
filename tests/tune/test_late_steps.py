"""A finished study's result is never lost to a step after its trials (issue 34, point 8):
importance without scikit-learn (the `tune` extra does not bring it), and any late step that
fails (DSR/PBO, importance, best.toml, the final test rollout) is one line while the study's
result is still printed and written."""

from __future__ import annotations

import json
import sys

import pytest

from foxhunt.tune import study as study_mod
from tests.cli.test_cli import run
from tests.tune.test_cli_tune import files  # noqa: F401  (fixture)


def _study(n: int = 12):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    s = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    s.optimize(lambda t: t.suggest_float("a", 1e-4, 1, log=True) + 0.1 * t.suggest_int("b", 1, 4),
               n_trials=n)
    return s


def test_importance_without_scikit_learn_is_ped_anova(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn -> ImportError
    got = study_mod.importance_of(_study())
    assert got["importance_method"] == "ped-anova" and "pip install scikit-learn" in \
        got["importance_note"]
    assert set(got["importance"]) == {"a", "b"}
    assert sum(got["importance"].values()) == pytest.approx(1.0)


def test_importance_needs_two_different_scores():
    got = study_mod.importance_of(_study(1))
    assert got == {"importance": {}, "importance_method": None,
                   "importance_note": "needs 2 finished trials with different scores"}


def _boom(*a, **k):
    raise RuntimeError("boom\nsecond line")


def test_late_failures_are_one_line_each_and_the_result_stays(capsys, files, isolated_home,  # noqa: F811
                                                              monkeypatch):
    monkeypatch.setattr(study_mod, "importance_of", _boom)
    monkeypatch.setattr(study_mod, "run_final", _boom)
    code, out, err = run(capsys, "--config", str(files / "tiny.toml"), "tune", "SYN", "--space",
                         str(files / "space.toml"), "--trials", "2", "--particles", "2",
                         "--backend", "thread", "--out", "mine")
    root = isolated_home / "studies" / "mine"  # --out NAME: under FOXHUNT_HOME/studies
    assert code == 1 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [
        "error: parameter importance: RuntimeError: boom",
        "error: the final test rollout: RuntimeError: boom"]
    flat = out.replace("\n", "")
    assert "deflated Sharpe ratio" in out and "probability of backtest overfitting" in out
    assert "parameter importance: n/a (failed (parameter importance: RuntimeError: boom))" in flat
    assert f"study: {root}" in flat and f"best configuration: {root / 'best.toml'}" in flat
    doc = json.loads((root / "study.json").read_text())
    assert doc["best"] is not None and doc["late_errors"] == [
        "parameter importance: RuntimeError: boom"]
    assert (root / "best.toml").is_file()
