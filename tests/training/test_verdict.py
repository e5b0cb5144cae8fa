"""The deploy decision and the one-line verdict per fold, from validation and training-slice
numbers only."""

from __future__ import annotations

import pytest

from foxhunt.training.verdict import COLLAPSED_FLAT, NO_EDGE, deploy_decision, fold_verdict


def window(sharpe: float, psr: float | None, flat: float = 0.3) -> dict:
    return {"sharpe": sharpe, "psr": psr, "flat": flat, "trades": 12, "bars": 400}


@pytest.mark.parametrize("psr, level, expected", [
    (0.99, 0.95, "agent"), (0.95, 0.95, "agent"), (0.9499, 0.95, "flat"), (0.31, 0.95, "flat"),
    (None, 0.95, "flat"), (None, 0.0, "agent"), (0.0, 0.0, "agent"),
])
def test_deploy_decision_is_the_validation_psr_against_the_level(psr, level, expected):
    deployed, why = deploy_decision(psr, level)
    assert deployed == expected
    assert f"deploy_min_psr {level:g}" in why
    assert why.startswith(NO_EDGE) == (expected == "flat")


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


def test_large_sharpes_print_without_decimals():
    line = fold_verdict(0, "flat", window(-211.4, 0.0), None, None, 0.95)
    assert line == "fold 0: no edge: flat (val Sharpe -211, PSR 0.00)"
