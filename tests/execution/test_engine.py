"""The OMS: decision -> order -> risk -> log -> venue -> report -> fill -> position -> events."""

from __future__ import annotations

from decimal import Decimal

import pytest

from foxhunt.errors import UnknownSymbolError
from foxhunt.execution import EventLogError, TradingEngine
from foxhunt.execution import venue as v
from foxhunt.orders import (
    DuplicateOrderError,
    IllegalTransition,
    OrderRequest,
    OrderRequestError,
    OrderStatus,
    OrderType,
    Side,
    TimeInForce,
    TradingError,
)
from foxhunt.risk import KILL_SWITCH_TAG, TradingState

from .helpers import SEC, T0, RecordingVenue, engine, rebuilt

BUY, SELL = Side.BUY, Side.SELL


def kinds(eng: TradingEngine, after: int = 0) -> list[str]:
    return [s.event.KIND for s in eng.store.read(after)]


@pytest.fixture
def venue():
    return RecordingVenue()


@pytest.fixture
def eng(venue):
    e = engine(venue=venue)
    venue.store = e.store
    e.mark("ES", "4500.00", T0)
    return e


def buy(qty: int = 1, **kw) -> OrderRequest:
    return OrderRequest("ES", BUY, qty, **kw)


def test_an_order_that_passes_risk_is_logged_then_sent(eng, venue):
    order = eng.submit(buy(2, client_order_id="s-1"), T0 + 1)
    assert order.status is OrderStatus.SUBMITTED
    assert venue.calls == [("submit", "s-1")]
    assert venue.logged_before_call == [True]  # written before it was acted on
    assert kinds(eng)[-2:] == ["order_initialized", "order_submitted"]


def test_the_venues_reports_fill_the_order_and_move_the_position(eng):
    eng.submit(buy(2, client_order_id="s-1"), T0 + 1)
    eng.on_report(v.Accepted(client_order_id="s-1", ts_ns=T0 + 2, venue_order_id="V7"))
    eng.on_report(v.Filled(client_order_id="s-1", ts_ns=T0 + 3, fill_id="x1", quantity=1,
                           price_ticks=18001))  # fmt: skip
    eng.on_report(v.Filled(client_order_id="s-1", ts_ns=T0 + 4, fill_id="x2", quantity=1,
                           price_ticks=18002))  # fmt: skip
    order = eng.book.get("s-1")
    assert (order.status, order.filled_qty, order.commission) == (
        OrderStatus.FILLED, 2, Decimal("4.50")
    )
    assert eng.account.position("ES") == 2
    assert eng.account.equity() == Decimal("100008.00")  # +1 tick on the first, less $4.50


def test_a_denied_order_is_logged_with_its_reason_and_never_reaches_the_venue(eng, venue):
    order = eng.submit(buy(9, client_order_id="big"), T0 + 1)
    assert order.status is OrderStatus.DENIED
    assert order.reason == "max order quantity 5 ES: order is 9"
    assert venue.calls == []
    assert kinds(eng)[-2:] == ["order_initialized", "order_denied"]


def test_prices_in_a_request_are_rounded_to_the_tick(eng):
    order = eng.submit(buy(1, order_type=OrderType.LIMIT, limit_price="4499.90"), T0 + 1)
    assert order.limit_ticks == 18000  # 4500.00, the nearest tick


def test_a_resent_order_is_not_doubled_even_after_a_restart(eng, venue):
    first = eng.submit(buy(1, client_order_id="bar-42"), T0 + 1)
    again = eng.submit(buy(1, client_order_id="bar-42"), T0 + 2)
    assert again is first and venue.calls == [("submit", "bar-42")]
    restarted = rebuilt(eng)
    restarted.venue = venue
    assert restarted.submit(buy(1, client_order_id="bar-42"), T0 + 3).status is first.status
    assert venue.calls == [("submit", "bar-42")] and len(restarted.book) == 1
    with pytest.raises(DuplicateOrderError, match="client order id 'bar-42' is already used"):
        restarted.submit(buy(2, client_order_id="bar-42"), T0 + 4)


def test_a_resent_fill_report_is_not_doubled(eng):
    eng.submit(buy(3, client_order_id="s-1"), T0 + 1)
    fill = v.Filled(client_order_id="s-1", ts_ns=T0 + 2, fill_id="x1", quantity=1,
                    price_ticks=18000)  # fmt: skip
    assert eng.on_report(fill) is not None
    seq = eng.seq
    assert eng.on_report(fill) is None
    assert eng.account.position("ES") == 1 and eng.seq == seq


def test_an_illegal_report_raises_and_neither_state_nor_log_change(eng):
    eng.submit(buy(1, client_order_id="s-1"), T0 + 1)
    eng.on_report(v.Canceled(client_order_id="s-1", ts_ns=T0 + 2))
    before, seq = eng.snapshot(), eng.seq
    with pytest.raises(IllegalTransition, match="order s-1: OrderFilled is illegal in state CANCELED"):
        eng.on_report(v.Filled(client_order_id="s-1", ts_ns=T0 + 3, fill_id="late", quantity=1,
                               price_ticks=18000))  # fmt: skip
    assert eng.snapshot() == before and eng.store.last_seq() == seq


def test_cancel_and_modify_go_through_the_log_first(eng, venue):
    eng.submit(buy(1, client_order_id="L", order_type=OrderType.LIMIT, limit_price=4490), T0 + 1)
    assert eng.modify("L", T0 + 2, limit_price="4495.00") is None
    with pytest.raises(OrderRequestError, match="order L is PENDING_UPDATE"):
        eng.modify("L", T0 + 3, quantity=2)
    eng.on_report(v.Updated(client_order_id="L", ts_ns=T0 + 4, update_id="u1", quantity=1,
                            limit_ticks=17980))  # fmt: skip
    assert eng.book.get("L").limit_ticks == 17980
    eng.cancel("L", T0 + 5)
    eng.cancel("L", T0 + 6)  # already canceling: nothing more is sent
    assert venue.calls == [("submit", "L"), ("modify", "L"), ("cancel", "L")]
    assert venue.logged_before_call == [True, True, True]


def test_a_denied_modification_is_logged_and_changes_nothing(eng):
    eng.submit(buy(1, client_order_id="L", order_type=OrderType.LIMIT, limit_price=4490), T0 + 1)
    denial = eng.modify("L", T0 + 2, limit_price=4000)
    assert denial.check == "price_collar_pct"
    assert kinds(eng)[-1] == "modify_denied" and eng.book.get("L").limit_ticks == 17960


def test_an_agents_target_position_becomes_the_order_for_the_difference(eng):
    assert eng.target_position("ES", 2, T0 + 1).quantity == 2
    assert eng.target_position("ES", 2, T0 + 2) is None  # the same target again: no order
    order = eng.target_position("ES", -1, T0 + 3)
    assert (order.side, order.quantity) == (SELL, 3)


def long_two(venue, **limits) -> TradingEngine:
    """Long 2 ES at 4500.00 (a fill at T0 + 2), under `limits`."""
    eng = engine(venue=venue, **limits)
    eng.mark("ES", 4500, T0)
    eng.submit(buy(2, client_order_id="s"), T0 + 1)
    eng.on_report(v.Filled(client_order_id="s", ts_ns=T0 + 2, fill_id="f", quantity=2,
                           price_ticks=18000))  # fmt: skip
    return eng


def test_a_breaker_halts_and_then_orders_are_denied(venue):
    eng = long_two(venue, daily_loss_limit=Decimal(1000))
    eng.mark("ES", "4490.00", T0 + 3)  # 40 ticks x $25 = $1,000 + $4.50 commission
    assert eng.trading_state is TradingState.HALTED
    assert eng.risk.state.reason.startswith("daily loss limit 1,000.00 USD: the day's loss is 1,004.50")
    assert eng.submit(buy(1), T0 + 4).reason.startswith("trading state HALTED")


def test_a_breaker_fires_the_kill_switch_by_default(venue):
    eng = engine(venue=venue, max_drawdown=Decimal(500))
    eng.mark("ES", 4500, T0)
    eng.submit(buy(1, client_order_id="s"), T0 + 1)
    eng.on_report(v.Filled(client_order_id="s", ts_ns=T0 + 2, fill_id="f", quantity=1,
                           price_ticks=18000))  # fmt: skip
    eng.mark("ES", 4490, T0 + 3)
    assert venue.calls[-1][0] == "submit" and venue.calls[-1][1].startswith("K-")
    flat = eng.book.get(venue.calls[-1][1])
    assert (flat.side, flat.quantity, flat.tag, flat.reduce_only) == (SELL, 1, KILL_SWITCH_TAG, True)


def test_the_kill_switch_cancels_flattens_and_keeps_flattening_what_raced_it(eng, venue):
    eng.submit(buy(2, client_order_id="s"), T0 + 1)
    eng.on_report(v.Filled(client_order_id="s", ts_ns=T0 + 2, fill_id="f", quantity=2,
                           price_ticks=18000))  # fmt: skip
    eng.submit(OrderRequest("ES", SELL, 1, OrderType.LIMIT, limit_price=4510,
                            client_order_id="tp"), T0 + 3)  # fmt: skip
    [flat] = eng.kill(T0 + 4, "operator")
    assert eng.trading_state is TradingState.HALTED
    assert venue.calls[-2:] == [("cancel", "tp"), ("submit", flat.client_order_id)]
    assert (flat.side, flat.quantity) == (SELL, 2)
    # the take-profit filled before the cancel reached the venue: the flatten now overshoots
    eng.on_report(v.Filled(client_order_id="tp", ts_ns=T0 + 5, fill_id="g", quantity=1,
                           price_ticks=18040))  # fmt: skip
    eng.on_report(v.Filled(client_order_id=flat.client_order_id, ts_ns=T0 + 6, fill_id="h",
                           quantity=2, price_ticks=18000))  # fmt: skip
    fix = eng.book.get(venue.calls[-1][1])
    assert (fix.side, fix.quantity, fix.tag) == (BUY, 1, KILL_SWITCH_TAG)
    eng.on_report(v.Filled(client_order_id=fix.client_order_id, ts_ns=T0 + 7, fill_id="i",
                           quantity=1, price_ticks=18000))  # fmt: skip
    assert eng.account.position("ES") == 0
    assert eng.submit(buy(1), T0 + 8).status is OrderStatus.DENIED
    eng.set_trading_state(TradingState.ACTIVE, T0 + 9, "reviewed")
    assert eng.submit(buy(1), T0 + 10).status is OrderStatus.SUBMITTED


def test_the_kill_switch_tag_is_reserved(eng):
    with pytest.raises(OrderRequestError, match="reserved for the kill switch"):
        eng.submit(buy(1, tag=KILL_SWITCH_TAG), T0 + 1)


def test_a_new_trading_day_is_logged_when_time_crosses_the_close(eng):
    assert eng.risk.state.day == "2024-03-05"
    eng.mark("ES", 4501, T0 + 9 * 3600 * SEC)  # 17:00 Chicago: the next trading day
    assert eng.risk.state.day == "2024-03-06"
    assert kinds(eng).count("trading_day_started") == 2


def test_unknown_symbols_and_bad_requests_are_refused_loudly(eng):
    with pytest.raises(UnknownSymbolError, match="unknown symbol 'NQ'; this account trades CL, ES"):
        eng.submit(OrderRequest("NQ", BUY, 1), T0 + 1)
    with pytest.raises(OrderRequestError, match="ES LIMIT order takes a limit price"):
        OrderRequest("ES", BUY, 1, OrderType.LIMIT)
    with pytest.raises(OrderRequestError, match="STOP order cannot be IOC"):
        OrderRequest("ES", BUY, 1, OrderType.STOP, TimeInForce.IOC, stop_price=4510)
    with pytest.raises(OrderRequestError, match="quantity must be a whole number"):
        OrderRequest("ES", BUY, 0)


def test_a_failed_append_leaves_memory_as_the_log_has_it(eng, monkeypatch):
    before = eng.snapshot()

    def broken(events):
        raise EventLogError("disk full")

    monkeypatch.setattr(eng.store, "append", broken)
    with pytest.raises(EventLogError, match="disk full"):
        eng.submit(buy(1, client_order_id="z"), T0 + 1)
    monkeypatch.undo()
    assert eng.snapshot() == before and "z" not in eng.book


def test_a_venue_that_reports_from_inside_a_call_is_refused():
    class Eager(RecordingVenue):
        def submit(self, order):
            self.engine.on_report(v.Accepted(client_order_id=order.client_order_id, ts_ns=T0 + 1,
                                             venue_order_id="x"))  # fmt: skip

    venue = Eager()
    eng = engine(venue=venue)
    venue.engine = eng
    eng.mark("ES", 4500, T0)
    with pytest.raises(TradingError, match="queue reports"):
        eng.submit(buy(1), T0 + 1)


def test_an_existing_log_keeps_its_account(eng):
    with pytest.raises(TradingError, match="the event log is account 'default' in USD"):
        TradingEngine.open(eng.store, eng.contracts, account="other")


def test_a_deferred_mark_counts_at_once_and_reaches_the_log_with_the_next_append(eng):
    before = eng.store.last_seq()
    eng.mark("ES", "4501.00", T0 + 1, defer=True)
    eng.mark("ES", "4502.00", T0 + 2, defer=True)
    assert eng.store.last_seq() == before and eng.deferred == 2
    assert eng.account.marks["ES"] == 18008  # in memory now: risk and equity see it
    assert rebuilt(eng).account.marks["ES"] == 18000  # not yet in the log
    eng.submit(buy(1, client_order_id="d"), T0 + 3)  # one transaction: the marks, then the order
    assert kinds(eng, before) == ["price_marked", "price_marked", "order_initialized",
                                  "order_submitted"]
    assert eng.deferred == 0 and rebuilt(eng).snapshot() == eng.snapshot()


def test_deferred_marks_are_flushed_on_demand_and_kept_across_a_failed_append(eng, monkeypatch):
    before = eng.store.last_seq()
    eng.mark("ES", "4503.00", T0 + 1, defer=True)
    monkeypatch.setattr(eng.store, "append", lambda events: (_ for _ in ()).throw(
        EventLogError("disk full")))
    with pytest.raises(EventLogError, match="disk full"):
        eng.submit(buy(1, client_order_id="z"), T0 + 2)
    monkeypatch.undo()
    assert "z" not in eng.book and eng.deferred == 1  # the order is gone, the mark still held
    eng.flush()
    assert kinds(eng, before) == ["price_marked"] and eng.deferred == 0
    assert rebuilt(eng).snapshot() == eng.snapshot()


def test_a_breaker_tripped_by_a_deferred_mark_is_logged_at_once_with_the_mark(venue):
    eng = long_two(venue, daily_loss_limit=Decimal(1000))
    seq = eng.store.last_seq()
    eng.mark("ES", "4490.00", T0 + 3, defer=True)
    assert eng.trading_state is TradingState.HALTED and eng.deferred == 0
    assert kinds(eng, seq)[:4] == ["price_marked", "trading_state_changed",
                                   "kill_switch_activated", "order_initialized"]


def test_several_orders_go_to_the_log_in_one_append_before_any_is_sent(eng, venue, monkeypatch):
    """Group commit: each order is checked seeing the ones before it (the second is denied
    by the position limit the first used up), one transaction holds them all and the deferred
    mark before them, then the orders that passed are sent in order."""
    appends: list[int] = []
    append = eng.store.append
    monkeypatch.setattr(eng.store, "append", lambda events: appends.append(len(events))
                        or append(events))  # fmt: skip
    eng.mark("ES", "4501.00", T0 + 1, defer=True)
    limit = eng.risk_config.max_position
    orders = eng.submit_many([buy(limit, client_order_id="g-1"), buy(1, client_order_id="g-2"),
                              OrderRequest("ES", SELL, 1, client_order_id="g-3")], T0 + 2)
    assert [o.status for o in orders] == [OrderStatus.SUBMITTED, OrderStatus.DENIED,
                                          OrderStatus.SUBMITTED]  # fmt: skip
    assert appends == [1 + 2 + 2 + 2] and eng.deferred == 0
    assert venue.calls == [("submit", "g-1"), ("submit", "g-3")]
    assert venue.logged_before_call == [True, True]
    assert rebuilt(eng).snapshot() == eng.snapshot()


def test_a_group_is_all_or_nothing(eng, venue, monkeypatch):
    before = eng.snapshot()
    with pytest.raises(OrderRequestError):
        eng.submit_many([buy(1, client_order_id="a-1"), buy(1, tag=KILL_SWITCH_TAG)], T0 + 1)
    assert eng.snapshot() == before and "a-1" not in eng.book and venue.calls == []

    def broken(events):
        raise EventLogError("disk full")

    monkeypatch.setattr(eng.store, "append", broken)
    with pytest.raises(EventLogError, match="disk full"):
        eng.submit_many([buy(1, client_order_id="b-1"), buy(1, client_order_id="b-2")], T0 + 1)
    monkeypatch.undo()
    assert eng.snapshot() == before and venue.calls == []


def test_a_group_resending_an_order_returns_it_and_sends_only_the_new_one(eng, venue):
    first = eng.submit(buy(1, client_order_id="r-1"), T0 + 1)
    again, new = eng.submit_many([buy(1, client_order_id="r-1"), buy(1, client_order_id="r-2")],
                                 T0 + 2)  # fmt: skip
    assert again is first and new.status is OrderStatus.SUBMITTED
    assert venue.calls == [("submit", "r-1"), ("submit", "r-2")]
