"""Issue 34, point 1: one number per figure. A fold's test figures as `foxhunt train` reports
them (the trainer's test rollout, folds.json) are the backtest's of its checkpoint over the same
window (`foxhunt backtest --run`, the report): the same observations (time in trade counted
over the training episode length), fills, costs and end-of-window close-out."""

from __future__ import annotations

import json

import pytest
import torch

from foxhunt.cli.train import write_source
from foxhunt.features import FeatureConfig
from foxhunt.report.run import backtest_run
from foxhunt.training.trainer import WalkForwardTrainer

from ..training.builders import instrument, pipeline, synth, tiny_spec


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Every fold deployed, on a market long enough that test windows outlast an episode (the
    time-in-trade feature then counts past what one episode shows)."""
    market = synth(4_000, 0.5, seed=3)
    spec = tiny_spec(epochs=2, folds=2, updates_per_fold=40)
    spec = spec.model_copy(update={"walkforward": spec.walkforward.model_copy(
        update={"deploy_min_psr": 0.0})})
    run_dir = tmp_path_factory.mktemp("run")
    ppy = 252 * 1440.0
    WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), run_dir,
                       torch.device("cpu"), periods_per_year=ppy).run()
    write_source(run_dir, "SYN", "1min", FeatureConfig(), market.bars)
    return run_dir, market, spec, ppy


def test_train_and_backtest_give_each_fold_the_same_test_figures(trained):
    run_dir, market, spec, ppy = trained
    folds = json.loads((run_dir / "folds.json").read_text())
    per_fold = backtest_run(run_dir, market.bars, instrument(), device="cpu", periods_per_year=ppy)
    for fold, results in zip(folds, per_fold, strict=True):
        assert fold["deployed"] == "agent"
        window = fold["windows"]["test"]
        assert window[1] - window[0] > 2 * spec.env.episode_len
        trained_test = fold["test"]
        m = results[0].metrics
        assert m["trades"] == trained_test["trades"] and trained_test["trades"] > 0
        assert m["total_return"] == pytest.approx(trained_test["return"], rel=1e-9, abs=1e-12)
        assert m["sharpe_per_bar"] == pytest.approx(trained_test["sharpe"], rel=1e-9)


def test_the_reports_figures_are_the_same_numbers(trained):
    """The run report's metrics table and its out-of-sample rows read the same figures."""
    from foxhunt.report.run import run_report_data

    run_dir, market, _, ppy = trained
    folds = json.loads((run_dir / "folds.json").read_text())
    per_fold = backtest_run(run_dir, market.bars, instrument(), device="cpu", periods_per_year=ppy)
    data = run_report_data(run_dir, per_fold, bars=market.bars)
    agent_rows = [m for m in data["metrics"] if m["policy"] == "agent"]
    assert len(agent_rows) == len(folds)
    for fold, row in zip(folds, agent_rows, strict=True):
        assert row["trades"] == fold["test"]["trades"]
        assert row["total_return"] == pytest.approx(fold["test"]["return"], rel=1e-9, abs=1e-12)
        assert row["sharpe_per_bar"] == pytest.approx(fold["test"]["sharpe"], rel=1e-9)
