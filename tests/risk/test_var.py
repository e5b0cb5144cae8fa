"""Pre-trade VaR limits on a supplied window of returns."""

from __future__ import annotations

import math
from decimal import Decimal
from statistics import NormalDist

import numpy as np
import pytest

from foxhunt.orders import Side
from foxhunt.risk import ReturnsWindow

from .desk import CL_80, ES_4500, Desk

# 100 daily ES returns: one -3%, one -2%, the rest +0.1%.
ES_RETURNS = [-0.03, -0.02] + [0.001] * 98
ONE_ES = 225_000.0  # 1 ES at 4500.00 x $50


def test_historical_var_is_the_loss_exceeded_in_one_percent_of_the_window():
    window = ReturnsWindow({"ES": ES_RETURNS}, 0.99)
    assert window.historical({"ES": ONE_ES}) == pytest.approx(0.02 * ONE_ES)
    assert window.historical({"ES": -ONE_ES}) == pytest.approx(0.001 * ONE_ES)  # the +0.1% days


def test_parametric_var_is_z_sigma_minus_the_mean():
    window = ReturnsWindow({"ES": ES_RETURNS}, 0.99)
    r = np.array(ES_RETURNS)
    expected = NormalDist().inv_cdf(0.99) * r.std(ddof=1) * ONE_ES - r.mean() * ONE_ES
    assert window.parametric({"ES": ONE_ES}) == pytest.approx(expected)


def test_portfolio_var_nets_instruments_that_move_together():
    both = ReturnsWindow({"ES": ES_RETURNS, "CL": ES_RETURNS}, 0.99)
    assert both.historical({"ES": ONE_ES, "CL": -ONE_ES}) == 0.0  # a perfect hedge
    assert both.parametric({"ES": ONE_ES, "CL": ONE_ES}) == pytest.approx(
        2 * both.parametric({"ES": ONE_ES})
    )


def test_a_window_of_unequal_lengths_or_with_nan_is_refused():
    with pytest.raises(Exception, match="same periods; lengths ES 100, CL 3"):
        ReturnsWindow({"ES": ES_RETURNS, "CL": [0.0] * 3}, 0.99)
    with pytest.raises(Exception, match="NaN"):
        ReturnsWindow({"ES": [math.nan] * 10}, 0.99)


def var_desk(**limits) -> Desk:
    desk = Desk(**limits)
    desk.mark("ES", ES_4500)
    desk.mark("CL", CL_80)
    return desk


def test_historical_var_limit_denies_an_order_that_would_raise_var_past_it():
    desk = var_desk(max_var_historical=Decimal(4000))
    desk.risk.set_returns({"ES": ES_RETURNS})
    denial = desk.check(1)
    assert (denial.check, denial.limit, denial.value) == ("max_var_historical", "4,000.00", "4,500.00")
    assert denial.message == (
        "historical VaR 99% limit 4,000.00 USD: order would take it to 4,500.00 USD"
    )


def test_parametric_var_limit_and_reducing_orders():
    desk = var_desk(max_var_parametric=Decimal(1000))
    desk.risk.set_returns({"ES": ES_RETURNS})
    assert desk.check(1).check == "max_var_parametric"
    desk.hold(2)
    assert desk.check(1, Side.SELL) is None  # reducing: VaR is not asked


def test_var_fails_closed_without_a_window_a_long_enough_window_or_an_instruments_returns():
    desk = var_desk(max_var_historical=Decimal(10**9))
    assert desk.check(1).check == "var"
    desk.risk.set_returns({"ES": ES_RETURNS[:50]})
    denial = desk.check(1)
    assert denial.message == "VaR needs at least 100 returns in the window, it has 50"
    desk.risk.set_returns({"ES": ES_RETURNS})
    assert desk.check(1) is None
    assert desk.check(1, symbol="CL").message == (
        "VaR: no returns in the window for CL (fails closed)"
    )

