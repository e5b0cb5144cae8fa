"""Pre-trade checks: each limit denies with its config key, its value and the order's figure.

Orders that only reduce a position pass the size, position, notional and VaR limits; every
check fails closed when it lacks a price.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from foxhunt.orders import OrderType, Side
from foxhunt.risk import Cause, TradingState

from .desk import CL_80, ES_4500, SEC, Desk

BUY, SELL = Side.BUY, Side.SELL


@pytest.fixture
def desk():
    d = Desk(max_order_qty=3, max_position=3, max_gross_notional=Decimal(1_000_000))
    d.mark("ES", ES_4500)
    d.mark("CL", CL_80)
    return d


def test_an_order_inside_every_limit_passes(desk):
    assert desk.check(3) is None


def test_max_order_quantity(desk):
    denial = desk.check(4)
    assert (denial.check, denial.limit, denial.value) == ("max_order_qty", "3", "4")
    assert denial.message == "max order quantity 3 ES: order is 4"


def test_max_position_counts_the_position_and_working_orders_on_the_same_side(desk):
    desk.hold(2)
    assert desk.check(2).message == "max position 3 ES: order would take the position to +4"
    desk.send(1)
    denial = desk.check(1)
    assert denial.message == (
        "max position 3 ES: order would take the position to +4 (position +2, working buys 1)"
    )
    assert (denial.check, denial.limit, denial.value) == ("max_position", "3", "4")
    assert desk.check(3, SELL) is None  # sells never add to a long


def test_max_position_on_the_short_side(desk):
    desk.hold(-3)
    assert desk.check(1, SELL).message == "max position 3 ES: order would take the position to -4"


def test_max_gross_notional_sums_every_instrument_at_its_last_price(desk):
    desk.hold(2, "CL", CL_80)  # 2 x 80.00 x 1000 = 160,000
    assert desk.check(3) is None  # + 3 x 4500 x 50 = 675,000 -> 835,000
    desk.mark("ES", 20000)  # 5000.00: 3 ES = 750,000 -> 910,000
    assert desk.check(3) is None
    desk.mark("CL", 9000)  # 2 CL at 90 = 180,000 -> 930,000
    desk.mark("ES", 21000)  # 3 ES at 5250 = 787,500 -> 967,500
    assert desk.check(3) is None
    desk.mark("ES", 22000)  # 3 ES at 5500 = 825,000 -> 1,005,000
    denial = desk.check(3)
    assert denial.check == "max_gross_notional"
    assert denial.message == (
        "max gross notional 1,000,000.00 USD: order would take it to 1,005,000.00 USD"
    )


def test_reducing_orders_pass_size_position_and_notional_limits():
    desk = Desk(max_order_qty=2, max_position=10, max_gross_notional=Decimal(10_000))
    desk.mark("ES", ES_4500)
    desk.hold(5)  # 225,000 of notional, far over the 10,000 limit
    assert desk.check(5, SELL) is None  # larger than max_order_qty, but it only closes
    flip = desk.check(6, SELL)  # through zero: only its opening contract is checked
    assert flip.check == "max_gross_notional" and flip.closing == 5
    desk.send(3, SELL)
    assert desk.check(2, SELL) is None  # with the working sell of 3: still only closes 5
    flip = desk.check(5, SELL)  # 3 + 5 > 5: two of its contracts close, three open
    assert (flip.check, flip.value, flip.closing) == ("max_order_qty", "3", 2)


def test_no_price_denies_fail_closed():
    desk = Desk()
    denial = desk.check(1)
    assert denial.check == "price"
    assert denial.message == "no price for ES: checks fail closed until a mark or a fill gives one"


def test_an_unknown_instrument_is_denied(desk):
    assert desk.check(1, symbol="ZZ").message == "unknown instrument ZZ: no contract spec"


def test_price_collar_around_the_last_price(desk):
    # 5% of 4500.00 is 225 points: limit and stop prices from 4275.00 to 4725.00 pass
    assert desk.check(1, order_type=OrderType.LIMIT, limit=18900) is None  # 4725.00: exactly 5%
    denial = desk.check(1, order_type=OrderType.LIMIT, limit=18901)
    assert (denial.check, denial.limit, denial.value) == ("price_collar_pct", "5%", "5.01%")
    assert denial.message == (
        "price collar 5% ES: limit price 4725.25 is 5.01% from the last price 4500.00"
    )
    assert desk.check(1, order_type=OrderType.STOP, stop=17000).check == "price_collar_pct"


def test_a_per_instrument_override_replaces_the_account_wide_limit():
    desk = Desk(max_order_qty=3, instruments={"CL": {"max_order_qty": 1, "price_collar_pct": 1}})
    desk.mark("CL", CL_80)
    desk.mark("ES", ES_4500)
    assert desk.check(2, symbol="CL").message == "max order quantity 1 CL: order is 2"
    assert desk.check(2, symbol="ES") is None
    denial = desk.check(1, symbol="CL", order_type=OrderType.LIMIT, limit=8081)
    assert denial.message == (
        "price collar 1% CL: limit price 80.81 is 1.01% from the last price 80.00"
    )


def test_order_rate_is_a_sliding_window(desk):
    desk_rate = Desk(max_order_rate=3, order_rate_window_s=1.0)
    desk_rate.mark("ES", ES_4500)
    for t in (0, SEC // 2, SEC - 1):
        desk_rate.send(1, ts=10 * SEC + t)
    denial = desk_rate.check(1, ts=11 * SEC - 1)
    assert (denial.check, denial.limit, denial.value) == ("max_order_rate", "3", "4")
    assert denial.message == (
        "order rate 3 per 1s: 3 orders and modifications already sent in the last 1s"
    )
    assert desk_rate.check(1, ts=11 * SEC) is None  # the first one left the window


def test_max_orders_per_day():
    desk = Desk(max_orders_per_day=2)
    desk.mark("ES", ES_4500)
    desk.send(1, ts=1)
    desk.send(1, SELL, ts=2 * SEC)
    denial = desk.check(1, ts=4 * SEC)
    assert denial.check == "max_orders_per_day" and denial.limit == "2"
    desk.apply(desk.risk.day_start(desk.risk.state.day_end_ns or 1))
    assert desk.check(1, ts=5 * SEC) is None


def test_reduce_only_orders_may_not_grow_or_flip_a_position(desk):
    desk.hold(2)
    assert desk.check(2, SELL, reduce_only=True) is None
    denial = desk.check(3, SELL, reduce_only=True)
    assert denial.check == "reduce_only"
    assert denial.message == "reduce-only SELL 3 ES would take the position from +2 to -1"
    assert desk.check(1, BUY, reduce_only=True).check == "reduce_only"


def test_reducing_state_lets_only_reducing_orders_through(desk):
    desk.hold(2)
    desk.apply(desk.risk.state_change(TradingState.REDUCING, Cause.MANUAL, 2))
    denial = desk.check(1)
    assert denial.check == "trading_state" and denial.limit == "REDUCING"
    assert denial.message == (
        "trading state REDUCING: only orders that reduce a position pass; BUY 1 ES would take "
        "the position from +2 to +3"
    )
    assert desk.check(2, SELL) is None
    assert desk.check(3, SELL).check == "trading_state"  # through zero is not reducing


def test_halted_state_denies_new_risk_but_never_an_exit(desk):
    desk.hold(2)
    desk.apply(desk.risk.state_change(TradingState.HALTED, Cause.MANUAL, 2))
    assert desk.check(1, SELL) is None and desk.check(2, SELL) is None
    denial = desk.check(1)
    assert denial.message == (
        "trading state HALTED: only orders that reduce a position pass; BUY 1 ES would take "
        "the position from +2 to +3"
    )
    flip = desk.check(5, SELL)
    assert flip.check == "trading_state" and flip.closing == 2


def test_a_modification_is_checked_as_the_order_it_would_become(desk):
    order = desk.send(2, order_type=OrderType.LIMIT, limit=17990)
    assert desk.risk.check_update(order, 3, None, None, 2) is None  # 3 in all, not 2 + 3
    assert desk.risk.check_update(order, 4, None, None, 2).check == "max_order_qty"
    assert desk.risk.check_update(order, None, 16000, None, 2).check == "price_collar_pct"
