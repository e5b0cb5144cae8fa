"""The deploy rule: a fold deploys its agent only if the chosen epoch's validation returns beat
the expected best of its epochs without skill (deflated Sharpe ratio >= `[walkforward]
deploy_min_psr`); otherwise its test result is flat's, and it says so. The decision reads
validation only."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.data.series import Bars
from foxhunt.metrics import expected_max_sharpe
from foxhunt.training.checkpoint import read_checkpoint
from foxhunt.training.evaluate import rollout, rollouts
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, position_policy, synth, tiny_spec

CPU = torch.device("cpu")


class PolicyTrainer(WalkForwardTrainer):
    """The trainer's whole fold path (selection, decision, test, report) with a fixed policy in
    the network's place, so that the validation edge is known."""

    policy = None

    def evaluate_windows(self, ctx, market, windows, chunks=None):
        return rollouts(self.policy, market, self.spec.env, windows, self.spec.train.capital,
                        chunks or self.spec.train.eval_windows, self.device, self.periods_per_year)


@pytest.fixture(scope="module")
def market():
    return synth(3_000, 0.5, seed=11)


def spec(min_psr: float | None = None, epochs: int = 1, folds: int = 1):
    """`tiny_spec` validating in 32 short chunks (fewer lock-step steps on the CPU)."""
    s = tiny_spec(epochs=epochs, folds=folds)
    update = {"train": s.train.model_copy(update={"eval_windows": 32})}
    if min_psr is not None:
        update["walkforward"] = s.walkforward.model_copy(update={"deploy_min_psr": min_psr})
    return s.model_copy(update=update)


def run_policy(market, tmp_path, sign: float, min_psr: float | None = None):
    trainer = PolicyTrainer(spec(min_psr), market.bars, pipeline(), instrument(), tmp_path, CPU)
    trainer.policy = position_policy(sign * torch.as_tensor(market.signal))
    return trainer, trainer.run().folds[0]


def test_a_strong_validation_edge_deploys_the_agent(market, tmp_path):
    """The planted signal's oracle as the agent: validation PSR ~1, so the test result is the
    agent's own continuous rollout of the test window."""
    trainer, report = run_policy(market, tmp_path, +1.0)
    assert report.val["psr"] > 0.999 and report.deployed == "agent"
    assert report.row()["deployed"] == "agent"
    assert report.verdict.startswith("fold 0: deployed agent (val Sharpe ")
    ctx = trainer.start_fold(trainer.folds[0])
    expected = rollout(trainer.policy, ctx.test_market, trainer.spec.env, ctx.fold.test,
                       trainer.spec.train.capital, 1).summary()
    assert report.test == expected and report.test["trades"] > 0 and report.test["sharpe"] > 10
    assert report.undeployed_test is None  # `test` is the agent's own result


def test_no_validation_edge_deploys_flat_and_says_so(market, tmp_path):
    """The oracle reversed loses on validation: the fold deploys flat (0 trades, flat's Sharpe
    on test), the table and the verdict say "no edge: flat", and the checkpoint still holds
    the chosen model."""
    _, report = run_policy(market, tmp_path, -1.0)
    assert report.val["psr"] < 0.05 and report.val["trades"] > 0
    assert report.deployed == "flat" and report.reason.startswith("no edge: flat")
    assert report.test == report.baselines["flat"]
    assert report.test["trades"] == 0 and report.test["sharpe"] == 0.0
    assert report.row()["deployed"] == "no edge: flat"
    assert report.verdict.startswith("fold 0: no edge: flat (val Sharpe -")
    doc = json.loads((tmp_path / "folds.json").read_text())[0]
    assert doc["deployed"] == "flat" and doc["verdict"] == report.verdict
    assert read_checkpoint(tmp_path / "checkpoints" / "fold0.pt")["extra"]["deployed"] == "flat"


def test_an_undeployed_fold_still_reports_what_its_model_would_have_done(market, tmp_path):
    """For research: the reversed oracle, kept flat by the rule, loses on the test window, and
    the report says by how much, apart from the deployed (flat) result."""
    trainer, report = run_policy(market, tmp_path, -1.0)
    ctx = trainer.start_fold(trainer.folds[0])
    expected = rollout(trainer.policy, ctx.test_market, trainer.spec.env, ctx.fold.test,
                       trainer.spec.train.capital, 1).summary()
    assert report.undeployed_test == expected and expected["sharpe"] < -10
    assert report.test == report.baselines["flat"]
    doc = json.loads((tmp_path / "folds.json").read_text())[0]
    assert doc["undeployed_test"] == expected


def test_the_level_is_the_deploy_min_psr_key(market, tmp_path):
    """The same strong edge stays undeployed when the level asks for more than it shows, and
    a level of 0 deploys every fold's agent."""
    _, strict = run_policy(market, tmp_path / "strict", +1.0, min_psr=1.0)
    assert strict.val["psr"] < 1.0 and strict.deployed == "flat"
    _, always = run_policy(market, tmp_path / "always", -1.0, min_psr=0.0)
    assert always.deployed == "agent" and always.test["trades"] > 0


def test_a_trained_agent_is_judged_by_the_same_rule(market, tmp_path):
    """The deflated rule over the fold's candidate epochs (its last half): the chosen epoch's
    validation Sharpe against the expected best of them without skill, from their own
    validation Sharpes."""
    trainer = WalkForwardTrainer(spec(epochs=3, folds=2), market.bars, pipeline(), instrument(),
                                 tmp_path, CPU)
    folds = trainer.run().folds
    lines = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text().splitlines()]
    for report, doc in zip(folds, json.loads((tmp_path / "folds.json").read_text()), strict=True):
        # choose_from_last = 0.5 of 3 epochs: the last 2 are the candidates
        sharpes = [e["val"]["sr"] for e in lines if e["fold"] == report.fold and e["epoch"] >= 1]
        deploy, ppy = report.deploy, (report.val["sharpe"] / report.val["sr"]) ** 2
        assert doc["deploy"] == deploy and deploy["candidates"] == 2 == len(sharpes)
        assert report.best_epoch >= 1
        assert deploy["rule"] == "deflated" and deploy["sharpe"] == pytest.approx(report.val["sharpe"])
        sr0 = expected_max_sharpe(2, float(np.var(sharpes, ddof=1)))
        assert deploy["sr0"] == pytest.approx(sr0 * math.sqrt(ppy))
        edge = deploy["p"] is not None and deploy["p"] >= 0.95
        assert report.deployed == ("agent" if edge else "flat")
        assert report.row()["deploy_p"] == deploy["p"]
        if not edge:
            assert report.test == report.baselines["flat"]


def _with_test_window_changed(bars: Bars, start: int, scale: float, seed: int) -> Bars:
    """Bars from `start` on moved by a random walk of factors and a level `scale` (OHLC stays
    consistent: each bar's four prices move by one factor)."""
    rng = np.random.default_rng(seed)
    factor = np.ones(len(bars))
    factor[start:] = scale * np.exp(np.cumsum(rng.normal(0, 0.01, len(bars) - start)))
    cols = bars.columns()
    for k in ("open", "high", "low", "close"):
        cols[k] = cols[k] * factor
    cols["volume"] = cols["volume"].copy()
    cols["volume"][start:] = rng.permutation(cols["volume"][start:])
    return Bars(**cols)


@pytest.fixture(scope="module")
def reference(market, tmp_path_factory):
    s = spec(epochs=2)
    trainer = WalkForwardTrainer(s, market.bars, pipeline(), instrument(),
                                 tmp_path_factory.mktemp("reference"), CPU)
    return s, trainer.folds[0], trainer.run().folds[0]


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scale=st.floats(0.5, 2.0), seed=st.integers(0, 2**16))
def test_changing_the_test_window_never_changes_the_deploy_decision(
        market, reference, tmp_path_factory, scale, seed):
    s, fold, expected = reference
    bars = _with_test_window_changed(market.bars, fold.test.start, scale, seed)
    run_dir = tmp_path_factory.mktemp("changed")
    report = WalkForwardTrainer(s, bars, pipeline(), instrument(), run_dir, CPU).run().folds[0]
    for key in ("best_epoch", "val", "train_eval", "gap_p", "deployed", "reason", "verdict"):
        assert getattr(report, key) == getattr(expected, key), key
    assert report.baselines != expected.baselines  # the test window did change


def confirm_spec(epochs: int = 3):
    s = spec(epochs=epochs)
    return s.model_copy(update={"walkforward": s.walkforward.model_copy(
        update={"deploy_rule": "confirm"})})


def test_the_confirm_rule_judges_the_oracle_on_bars_the_choice_never_saw(market, tmp_path):
    """deploy_rule confirm: the planted signal's oracle deploys on the last half of validation
    alone, and its reversal stays flat; the report names the slice."""
    for sign, expected in ((+1.0, "agent"), (-1.0, "flat")):
        trainer = PolicyTrainer(confirm_spec(1), market.bars, pipeline(), instrument(),
                                tmp_path / str(sign), CPU)
        trainer.policy = position_policy(sign * torch.as_tensor(market.signal))
        report = trainer.run().folds[0]
        assert report.deployed == expected and report.deploy["rule"] == "confirm"
        assert "confirmation PSR" in report.reason and "never saw" in report.reason
        assert report.deploy["sr0"] == 0.0 and report.deploy["candidates"] == 1


def test_under_the_confirm_rule_the_confirmation_slice_never_changes_the_choice(market, tmp_path):
    """The epoch is chosen on validation's first half: bars changed from the confirmation
    slice on leave the choice, and every selection score, as they were, while the confirmation
    (and so the decision's figures) sees them."""
    s = confirm_spec()
    first = WalkForwardTrainer(s, market.bars, pipeline(), instrument(), tmp_path / "a", CPU)
    cut = first.confirm_from(first.folds[0])
    fold = first.folds[0]
    assert cut == fold.val.stop - round(len(fold.val) * 0.5)
    expected = first.run().folds[0]
    bars = _with_test_window_changed(market.bars, cut + 1, 1.3, 5)
    report = WalkForwardTrainer(s, bars, pipeline(), instrument(), tmp_path / "b", CPU).run().folds[0]
    lines = [[json.loads(x)["select_sharpe"] for x in (d / "run.jsonl").read_text().splitlines()]
             for d in (tmp_path / "a", tmp_path / "b")]
    assert report.best_epoch == expected.best_epoch and lines[0] == lines[1]
    assert report.deploy["sharpe"] != expected.deploy["sharpe"]
