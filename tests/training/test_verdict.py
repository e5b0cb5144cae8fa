"""The deploy decision and the one-line verdict per fold, from validation and training-slice
numbers only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foxhunt.metrics import expected_max_sharpe, probabilistic_sharpe, psr, sharpe_estimate
from foxhunt.training.verdict import (
    COLLAPSED_FLAT,
    CONCENTRATED,
    DEAD_SIGMA_SHARE,
    DIVERGING_EDGE_MASS,
    DIVERGING_GROWTH,
    GROWTH_FLOOR,
    NO_EDGE,
    DeployTest,
    Opportunity,
    dead_exploration,
    deploy_decision,
    deploy_test,
    diverging,
    fold_verdict,
    health_notes,
)


def window(sharpe: float, psr: float | None, flat: float = 0.3) -> dict:
    return {"sharpe": sharpe, "psr": psr, "flat": flat, "trades": 12, "bars": 400}


@pytest.mark.parametrize("p, level, expected", [
    (0.99, 0.95, "agent"), (0.95, 0.95, "agent"), (0.9499, 0.95, "flat"), (0.31, 0.95, "flat"),
    (None, 0.95, "flat"), (None, 0.0, "agent"), (0.0, 0.0, "agent"),
])
@pytest.mark.parametrize("rule", ["deflated", "confirm", "psr"])
def test_deploy_decision_is_the_rules_probability_against_the_level(p, level, expected, rule):
    deployed, why = deploy_decision(DeployTest(rule, 20, 0.01, 0.004, p), level, 252.0)
    assert deployed == expected
    assert f"deploy_min_psr {level:g}" in why
    assert why.startswith(NO_EDGE) == (expected == "flat")
    name = {"deflated": "DSR", "confirm": "confirmation PSR", "psr": "validation PSR"}[rule]
    assert name in why
    assert ("expected best of 20 epochs" in why) == (rule == "deflated")
    assert ("the choice of 20 epochs never saw" in why) == (rule == "confirm")


def test_the_psr_rule_is_the_plain_psr_against_flat():
    r = np.random.default_rng(0).normal(0.01, 1.0, 500)
    test = deploy_test(r, [0.3, -0.2, 0.01], "psr")
    assert test.sr0 == 0.0 and test.candidates == 3
    assert test.p == pytest.approx(probabilistic_sharpe(r), abs=1e-12)


def test_the_deflated_rule_beats_the_expected_best_of_the_candidates():
    """sr0 is the expected maximum of N no-skill Sharpes with the candidates' spread
    (`metrics.expected_max_sharpe`); equal candidates (no spread) leave the plain PSR."""
    r = np.random.default_rng(1).normal(0.05, 1.0, 2_000)
    candidates = [0.01, 0.05, -0.02, 0.03, 0.0]
    test = deploy_test(r, candidates, "deflated")
    assert test.sr0 == pytest.approx(expected_max_sharpe(5, float(np.var(candidates, ddof=1))))
    e = sharpe_estimate(r)
    assert test.sharpe == pytest.approx(e.sr)
    assert test.p == pytest.approx(psr(e.sr, e.n, e.skew, e.kurtosis, test.sr0), abs=1e-12)
    assert test.p < probabilistic_sharpe(r)
    same = deploy_test(r, [0.04] * 5, "deflated")
    assert same.sr0 == 0.0 and same.p == pytest.approx(probabilistic_sharpe(r), abs=1e-12)
    assert deploy_test(np.zeros(50), candidates, "deflated").p is None  # never in the market


def best_of(rng, n: int, bars: int, sr: float) -> tuple[np.ndarray, list[float]]:
    """The best of `n` candidates' return series (true per-bar Sharpe `sr` each), and all `n`
    Sharpes: a fold's epochs judged on one validation window."""
    series = rng.normal(sr, 1.0, (n, bars))
    sharpes = series.mean(axis=1) / series.std(axis=1, ddof=1)
    return series[int(np.argmax(sharpes))], list(sharpes)


def test_the_best_of_twenty_no_skill_candidates_rarely_deploys():
    """Picking the best of 20 candidates with no edge passes the plain PSR >= 0.95 in most
    folds; the deflated rule passes it in about 5% of them, as its level says."""
    rng, trials = np.random.default_rng(7), 400
    passed = {"psr": 0, "deflated": 0}
    for _ in range(trials):
        returns, sharpes = best_of(rng, 20, 2_000, 0.0)
        for rule in passed:
            passed[rule] += deploy_decision(deploy_test(returns, sharpes, rule), 0.95, 252.0)[0] == "agent"
    assert passed["psr"] / trials > 0.5
    assert passed["deflated"] / trials <= 0.05  # measured 0.25% (PSR: 63%)


def test_a_real_edge_still_deploys_under_the_deflated_rule():
    """Candidates with a true per-bar Sharpe of 0.1 over 2,000 bars (t ~ 4.5) deploy in nearly
    every fold."""
    rng, trials = np.random.default_rng(8), 200
    deployed = sum(deploy_decision(deploy_test(*best_of(rng, 20, 2_000, 0.1), "deflated"),
                                   0.95, 252.0)[0] == "agent" for _ in range(trials))
    assert deployed / trials >= 0.95


def test_a_deployed_fold():
    line = fold_verdict(0, "agent", window(3.14, 0.991), window(2.5, 0.97), 0.6, 0.95)
    assert line == "fold 0: deployed agent (val Sharpe 3.1, PSR 0.99)"


def test_a_fold_without_edge():
    line = fold_verdict(1, "flat", window(-0.42, 0.31), window(-1.0, 0.2), 0.3, 0.95)
    assert line == "fold 1: no edge: flat (val Sharpe -0.4, PSR 0.31)"


def test_memorising_is_a_significant_training_edge_significantly_above_validation():
    line = fold_verdict(2, "flat", window(-2.2, 0.2), window(40.3, 0.999), 0.998, 0.95)
    assert line == ("fold 2: no edge: flat (val Sharpe -2.2, PSR 0.20); "
                    "memorising (train Sharpe 40 vs val -2.2)")
    # the gap alone, or the training edge alone, is not enough
    val = window(-2, 0.2)
    assert "memorising" not in fold_verdict(2, "flat", val, window(40, 0.9), 0.998, 0.95)
    assert "memorising" not in fold_verdict(2, "flat", val, window(40, 0.999), 0.9, 0.95)
    assert "memorising" not in fold_verdict(2, "flat", window(-2, 0.2), None, None, 0.95)


def test_memorising_needs_better_than_even_odds_when_the_deploy_rule_is_off():
    assert "memorising" not in fold_verdict(0, "agent", window(1, 0.5), window(2, 0.4), 0.3, 0.0)


def test_a_policy_that_never_leaves_flat_on_validation_has_collapsed():
    line = fold_verdict(3, "flat", window(0.0, None, flat=1.0), window(0.0, None, flat=1.0), None,
                        0.95)
    assert line == ("fold 3: no edge: flat (val Sharpe 0.0, PSR n/a); "
                    "collapsed to flat (flat 100% of validation bars)")
    assert "collapsed" not in fold_verdict(3, "flat", window(0.1, 0.5, flat=COLLAPSED_FLAT - 0.01),
                                           None, None, 0.95)


def test_a_collapse_names_the_validation_rule_it_missed_when_that_rule_had_an_edge():
    ppy = 98_280.0
    strong = Opportunity("sma:50,400", 12.3, 4_000, ppy)  # t = 12.3 / sqrt(98,280 / 4,000) = 2.5
    weak = Opportunity("zfade:200,1", 3.0, 4_000, ppy)  # t = 0.6
    assert strong.psr == pytest.approx(0.9935, abs=1e-3) and weak.psr < 0.95
    flat = window(0.0, None, flat=1.0)
    line = fold_verdict(0, "flat", flat, None, None, 0.95, opportunity=strong)
    assert line.endswith("collapsed to flat (flat 100% of validation bars) while sma:50,400 "
                         "earned 12 there (PSR 0.99)")
    assert fold_verdict(0, "flat", flat, None, None, 0.95, opportunity=weak).endswith(
        "collapsed to flat (flat 100% of validation bars)")
    trading = window(2.0, 0.6, flat=0.5)
    assert "sma" not in fold_verdict(0, "flat", trading, None, None, 0.95, opportunity=strong)


def test_large_sharpes_print_without_decimals():
    line = fold_verdict(0, "flat", window(-211.4, 0.0), None, None, 0.95)
    assert line == "fold 0: no edge: flat (val Sharpe -211, PSR 0.00)"


def epoch(k: int, **over) -> dict:
    """A run.jsonl line of a healthy C51 epoch, with `over` changed."""
    line = {"fold": 0, "epoch": k, "updates": 100.0, "loss": 2.0, "q_loss": 1.9, "mean_q": 0.4,
            "target_q": 0.5, "grad_norm": 0.3, "td_p99": 2.5, "edge_mass": 0.2,
            "target_edge_mass": 0.2, "v_min": -10.0, "v_max": 10.0, "noisy_sigma": 0.08,
            "action_mix": [[0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.6, 0.2, 0.2]]}
    return line | over


def test_a_healthy_run_has_no_health_notes():
    assert health_notes([epoch(k) for k in range(6)]) == []
    assert health_notes([]) == []


def test_non_finite_metrics_are_diverging():
    epochs = [epoch(0), epoch(1, loss=math.nan), epoch(2, mean_q=math.inf)]
    assert diverging(epochs) == "diverging (non-finite loss at epoch 1)"
    # epochs before learning starts report zeros, not estimates
    assert diverging([epoch(0, updates=0.0, mean_q=math.nan), epoch(1)]) is None


def test_c51_mass_piling_on_the_support_edges_is_diverging():
    line = diverging([epoch(0), epoch(1, target_edge_mass=DIVERGING_EDGE_MASS)])
    assert line == "diverging (50% of C51 mass on the support's edges: values beyond [-10, 10])"
    assert diverging([epoch(0), epoch(1, edge_mass=DIVERGING_EDGE_MASS - 0.01)]) is None


def test_q_growing_steadily_without_bound_is_diverging():
    q = [0.5, 1.0, 2.0, 4.0, 8.0, 12.0]
    epochs = [epoch(k, mean_q=-v) for k, v in enumerate(q)]
    assert diverging(epochs) == "diverging (|mean Q| 0.5 -> 12 over 6 epochs)"
    # grown as much, but not over the last DIVERGING_EPOCHS epochs in a row
    dip = [*q[:-2], 2.0, 12.0]
    assert diverging([epoch(k, mean_q=v) for k, v in enumerate(dip)]) is None
    # growth from values near 0 is judged from GROWTH_FLOOR
    small = [0.01, 0.02, 0.04, 0.08, 0.5, 9.0]
    assert diverging([epoch(k, mean_q=v) for k, v in enumerate(small)]) is None
    assert DIVERGING_GROWTH * GROWTH_FLOOR > 9.0


def test_a_growing_loss_is_diverging():
    epochs = [epoch(k, loss=v) for k, v in enumerate([2.0, 5.0, 9.0, 14.0, 25.0])]
    assert diverging(epochs) == "diverging (loss 2.0 -> 25 over 5 epochs)"


CONCENTRATED_MIX = [[CONCENTRATED, 0.01, 0.0], [0.0, 1.0, 0.0], [0.005, 0.005, 0.99]]


def test_collapsed_noise_with_one_action_per_branch_is_dead_exploration():
    epochs = [epoch(0), epoch(1, noisy_sigma=0.004, action_mix=CONCENTRATED_MIX)]
    assert dead_exploration(epochs) == ("dead exploration (noisy sigma 0.004, 5% of its start; "
                                        "one action >= 99% of collect steps in every branch)")
    # the noise alone, or the concentration alone, is not enough
    assert dead_exploration([epoch(0), epoch(1, noisy_sigma=0.004)]) is None
    sigma = epoch(0)["noisy_sigma"] * DEAD_SIGMA_SHARE * 1.01
    assert dead_exploration([epoch(0), epoch(1, noisy_sigma=sigma,
                                           action_mix=CONCENTRATED_MIX)]) is None
    spread = [CONCENTRATED_MIX[0], [0.5, 0.5, 0.0], CONCENTRATED_MIX[2]]
    assert dead_exploration([epoch(0), epoch(1, noisy_sigma=0.0, action_mix=spread)]) is None


def test_without_noisy_layers_one_action_per_branch_is_dead_exploration():
    epochs = [{k: v for k, v in epoch(k).items() if k != "noisy_sigma"} for k in range(2)]
    epochs[-1]["action_mix"] = CONCENTRATED_MIX
    assert dead_exploration(epochs) == ("dead exploration (no noisy layers; one action >= 99% "
                                        "of collect steps in every branch)")


def test_the_verdict_ends_with_the_health_notes():
    health = health_notes([epoch(0), epoch(1, loss=math.nan)])
    line = fold_verdict(0, "flat", window(0.0, 0.4), None, None, 0.95, health)
    assert line == ("fold 0: no edge: flat (val Sharpe 0.0, PSR 0.40); "
                    "diverging (non-finite loss at epoch 1)")
