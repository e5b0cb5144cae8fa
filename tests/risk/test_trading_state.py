"""The trading state machine, the circuit breakers and the trading day."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from foxhunt.risk import TRADING_TRANSITIONS, Cause, IllegalTradingStateChange, TradingState
from foxhunt.risk.calendar import TradingDay

from .desk import ES_4500, Desk

A, R, H = TradingState.ACTIVE, TradingState.REDUCING, TradingState.HALTED

ALLOWED = {
    (A, R): {Cause.MANUAL, Cause.BREAKER},
    (A, H): {Cause.MANUAL, Cause.BREAKER, Cause.KILL_SWITCH},
    (R, A): {Cause.MANUAL},
    (R, H): {Cause.MANUAL, Cause.BREAKER, Cause.KILL_SWITCH},
    (H, R): {Cause.MANUAL},
    (H, A): {Cause.MANUAL},
}


def test_the_table_is_the_specification():
    assert {k: set(v) for k, v in TRADING_TRANSITIONS.items()} == ALLOWED


@pytest.mark.parametrize(
    ("start", "to", "cause"), list(itertools.product(TradingState, TradingState, Cause))
)
def test_every_change_is_allowed_exactly_when_the_table_says(start, to, cause):
    desk = Desk()
    if start is not A:
        desk.apply(desk.risk.state_change(start, Cause.MANUAL, 1))
    if cause in ALLOWED.get((start, to), set()):
        event = desk.risk.state_change(to, cause, 2, reason="why")
        desk.apply(event)
        assert desk.risk.trading_state is to and event.previous is start
    else:
        with pytest.raises(IllegalTradingStateChange, match=f"trading state {start} -> {to}"):
            desk.risk.state_change(to, cause, 2)
        assert desk.risk.trading_state is start


def test_changes_are_numbered_so_each_has_its_own_event_id():
    desk = Desk()
    first = desk.risk.state_change(R, Cause.MANUAL, 1)
    desk.apply(first)
    second = desk.risk.state_change(A, Cause.MANUAL, 2)
    assert (first.event_id, second.event_id) == ("trading_state:1", "trading_state:2")


def test_daily_loss_breaker_measures_from_the_days_starting_equity():
    desk = Desk(daily_loss_limit=Decimal(1000), max_drawdown=Decimal(0))
    desk.mark("ES", ES_4500)
    desk.apply(desk.risk.day_start(1))
    desk.hold(2)  # two ES: $25 a tick (2 x $12.50)
    desk.mark("ES", ES_4500 - 39)  # 39 ticks x 25 = 975 lost
    assert desk.risk.breach() is None
    desk.mark("ES", ES_4500 - 40)  # 1,000 lost: the limit is reached
    key, message = desk.risk.breach()
    assert key == "daily_loss_limit"
    assert message == (
        "daily loss limit 1,000.00 USD: the day's loss is 1,000.00 USD "
        "(equity 99,000.00 from 100,000.00)"
    )


def test_drawdown_breaker_measures_from_the_equity_peak_and_a_reset_moves_the_peak():
    desk = Desk(daily_loss_limit=Decimal(0), max_drawdown=Decimal(500))
    desk.mark("ES", ES_4500)
    desk.hold(1)
    desk.mark("ES", ES_4500 + 100)  # +1,250: the peak is 101,250
    desk.mark("ES", ES_4500 + 61)  # 39 ticks back: 487.50 below the peak
    assert desk.risk.breach() is None
    desk.mark("ES", ES_4500 + 60)
    key, message = desk.risk.breach()
    assert key == "max_drawdown"
    assert message == (
        "max drawdown 500.00 USD: equity 100,750.00 is 500.00 USD below its peak 101,250.00"
    )
    from foxhunt.risk import DrawdownReset

    desk.apply(DrawdownReset(ts_ns=5, reset=1, peak=desk.account.equity()))
    assert desk.risk.breach() is None


def test_breakers_are_silent_once_halted_and_when_set_to_zero():
    desk = Desk(daily_loss_limit=Decimal(0), max_drawdown=Decimal(0))
    desk.mark("ES", ES_4500)
    desk.hold(3)
    desk.mark("ES", 1000)
    assert desk.risk.breach() is None
    halted = Desk(daily_loss_limit=Decimal(10))
    halted.mark("ES", ES_4500)
    halted.hold(1)
    halted.apply(halted.risk.state_change(H, Cause.MANUAL, 2))
    halted.mark("ES", ES_4500 - 100)
    assert halted.risk.breach() is None


def ns(iso: str) -> int:
    return int(datetime.fromisoformat(iso).astimezone(UTC).timestamp()) * 1_000_000_000


def test_the_cme_trading_day_runs_from_one_16_00_chicago_close_to_the_next():
    cme = TradingDay("America/Chicago", "16:00")
    assert cme.of(ns("2024-03-05T15:59:59-06:00")) == ("2024-03-05", ns("2024-03-05T16:00:00-06:00"))
    assert cme.of(ns("2024-03-05T16:00:00-06:00"))[0] == "2024-03-06"
    assert cme.of(ns("2024-03-10T17:00:00-05:00"))[0] == "2024-03-11"  # Sunday evening, DST
    assert cme.of(ns("2024-03-11T12:00:00-05:00"))[1] == ns("2024-03-11T16:00:00-05:00")


def test_a_new_trading_day_restarts_the_daily_loss_and_the_order_count():
    desk = Desk()
    desk.mark("ES", ES_4500)
    start = desk.risk.day_start(ns("2024-03-05T09:00:00-06:00"))
    desk.apply(start)
    assert (start.day, start.equity) == ("2024-03-05", Decimal(100000))
    desk.send(1, ts=ns("2024-03-05T10:00:00-06:00"))
    assert desk.risk.state.orders_today == 1
    assert desk.risk.day_start(ns("2024-03-05T15:00:00-06:00")) is None  # same day
    desk.apply(desk.risk.day_start(ns("2024-03-05T16:00:00-06:00")))
    assert (desk.risk.state.day, desk.risk.state.orders_today) == ("2024-03-06", 0)
