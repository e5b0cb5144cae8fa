"""Exits always pass: for every risk configuration and state, an order that only reduces the
absolute position is never denied, an order through zero is checked for its opening part only
and its closing part always goes out, and a breach never leaves the account stuck with its
position (it flattens, or REDUCING lets the exits out)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.execution import TradingEngine
from foxhunt.execution import venue as v
from foxhunt.orders import OrderRequest, OrderType, Side
from foxhunt.orders.state import OrderStatus
from foxhunt.risk import Cause, RiskConfig, TradingState

from ..execution.helpers import CONTRACTS, T0, RecordingVenue, engine
from .desk import CL_80, ES_4500, Desk

BUY, SELL = Side.BUY, Side.SELL

limits = st.fixed_dictionaries({
    "max_order_qty": st.integers(1, 4),
    "max_position": st.integers(0, 4),
    "max_gross_notional": st.sampled_from([Decimal(0), Decimal(1), Decimal(500_000)]),
    "max_order_rate": st.integers(1, 3),
    "max_orders_per_day": st.integers(1, 3),
    "price_collar_pct": st.sampled_from([Decimal("0.01"), Decimal(5)]),
    "max_var_historical": st.sampled_from([Decimal(0), Decimal(1)]),
    "daily_loss_limit": st.sampled_from([Decimal(0), Decimal(1)]),
})  # fmt: skip


@st.composite
def desks(draw):
    """A desk with a random position, random working orders on both sides, a used-up order
    rate and day count, a trading state, and a mark or none."""
    desk = Desk(**draw(limits))
    marked = draw(st.booleans())
    if marked:
        desk.mark("ES", ES_4500)
        desk.mark("CL", CL_80)
    pos = draw(st.integers(-8, 8))
    if pos:
        desk.hold(pos, ts=0)  # a fill marks the price too
        if not marked:
            desk.account.marks.pop("ES")
    for side in (BUY, SELL):
        for _ in range(draw(st.integers(0, 2))):
            desk.send(draw(st.integers(1, 3)), side, ts=1)
    state = draw(st.sampled_from(TradingState))
    if state is not TradingState.ACTIVE:
        desk.apply(desk.risk.state_change(state, Cause.MANUAL, 2))
    return desk


def closable(desk: Desk, side: Side) -> int:
    pos = desk.account.position("ES")
    if not (pos < 0 if side is BUY else pos > 0):
        return 0
    same = desk.book.working_buy_qty("ES") if side is BUY else desk.book.working_sell_qty("ES")
    return max(0, abs(pos) - same)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(desk=desks(), side=st.sampled_from([BUY, SELL]), qty=st.integers(1, 12),
       limit=st.booleans())  # fmt: skip
def test_the_closing_contracts_of_any_order_always_pass(desk, side, qty, limit):
    kw = {"order_type": OrderType.LIMIT, "limit": ES_4500 * 2} if limit else {}  # off any collar
    close = closable(desk, side)
    denial = desk.check(qty, side, ts=3, **kw)
    if qty <= close:
        assert denial is None, f"an exit of {qty} (closable {close}) was denied: {denial}"
    elif denial is not None:
        assert denial.closing == close  # the closing part may always go out alone


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=limits, pos=st.integers(-6, 6).filter(bool), target=st.integers(-9, 9),
       state=st.sampled_from(TradingState))  # fmt: skip
def test_the_oms_sends_what_closes_and_a_resend_is_the_same_order(cfg, pos, target, state):
    opened = engine(max_order_qty=10, max_position=10)
    opened.mark("ES", 4500, T0)
    opened.submit(OrderRequest("ES", Side.of(pos), abs(pos), client_order_id="open"), T0)
    opened.on_report(v.Filled(client_order_id="open", ts_ns=T0 + 1, fill_id="f",
                              quantity=abs(pos), price_ticks=ES_4500))  # fmt: skip
    venue = RecordingVenue()  # the drawn limits, over the log that holds the position
    eng = TradingEngine(opened.store, CONTRACTS, RiskConfig(**cfg), venue=venue)
    if state is not TradingState.ACTIVE:
        eng.set_trading_state(state, T0 + 2, "test")
    order = eng.target_position("ES", target, T0 + 3, client_order_id="t")
    if order is None:
        return
    closing = min(abs(target - pos), abs(pos)) if (target - pos) * pos < 0 else 0
    assert order.status is not OrderStatus.DENIED or closing == 0
    if order.status is not OrderStatus.DENIED:
        assert order.quantity >= closing and ("submit", "t") in venue.calls
    resend = OrderRequest("ES", Side.of(target - pos), abs(target - pos), client_order_id="t")
    assert eng.submit(resend, T0 + 4) is order


def long_three(venue, **limits):
    eng = engine(venue=venue, **limits)
    eng.mark("ES", 4500, T0)
    eng.submit(OrderRequest("ES", BUY, 3, client_order_id="s"), T0 + 1)
    eng.on_report(v.Filled(client_order_id="s", ts_ns=T0 + 2, fill_id="f", quantity=3,
                           price_ticks=ES_4500))  # fmt: skip
    return eng


def test_a_flip_over_the_order_size_limit_sends_the_whole_flip_when_its_opening_part_fits():
    venue = RecordingVenue()
    eng = long_three(venue, max_order_qty=5)
    order = eng.target_position("ES", -3, T0 + 3, client_order_id="flip")
    assert (order.status, order.quantity, order.side) == (OrderStatus.SUBMITTED, 6, SELL)


def test_a_flip_whose_opening_part_is_denied_sends_its_closing_part_and_says_why():
    venue = RecordingVenue()
    eng = long_three(venue, max_order_qty=5, max_position=3)
    order = eng.target_position("ES", -5, T0 + 3, client_order_id="flip")
    assert (order.status, order.quantity, order.init.requested_quantity) == (
        OrderStatus.SUBMITTED, 3, 8)
    assert order.reason.startswith("max position 3 ES: order would take the position to -5")
    assert order.reason.endswith("sent 3 of 8, the contracts that reduce the position")
    assert ("submit", "flip") in venue.calls
    again = eng.submit(OrderRequest("ES", SELL, 8, client_order_id="flip"), T0 + 4)
    assert again is order  # a resend of the request is the same order, not a duplicate


def test_halted_by_an_operator_still_lets_the_position_out():
    venue = RecordingVenue()
    eng = long_three(venue)
    eng.set_trading_state(TradingState.HALTED, T0 + 3, "operator")
    assert eng.submit(OrderRequest("ES", BUY, 1), T0 + 4).status is OrderStatus.DENIED
    out = eng.target_position("ES", 0, T0 + 5, client_order_id="exit")
    assert out.status is OrderStatus.SUBMITTED and out.quantity == 3


def test_max_orders_per_day_never_blocks_an_exit():
    venue = RecordingVenue()
    eng = long_three(venue, max_orders_per_day=1)
    assert eng.submit(OrderRequest("ES", BUY, 1), T0 + 3).reason.startswith("max orders per day")
    assert eng.target_position("ES", 0, T0 + 4).status is OrderStatus.SUBMITTED


def test_a_breach_flattens_by_default():
    venue = RecordingVenue()
    eng = long_three(venue, max_drawdown=Decimal(1000))
    eng.mark("ES", "4493.00", T0 + 3)  # 28 ticks x 3 x 12.50 = 1,050 below the peak
    assert eng.trading_state is TradingState.HALTED and eng.risk.state.kill_active
    flat = eng.book.get(venue.calls[-1][1])
    assert (flat.side, flat.quantity, flat.status) == (SELL, 3, OrderStatus.SUBMITTED)


def test_a_breach_with_on_breach_reduce_cancels_what_adds_risk_and_lets_exits_out():
    venue = RecordingVenue()
    eng = long_three(venue, max_drawdown=Decimal(1000), on_breach="reduce", max_position=5)
    eng.submit(OrderRequest("ES", BUY, 1, client_order_id="add"), T0 + 3)
    eng.mark("ES", "4493.00", T0 + 4)
    assert eng.trading_state is TradingState.REDUCING
    assert eng.risk.state.cause is Cause.BREAKER and ("cancel", "add") in venue.calls
    assert eng.submit(OrderRequest("ES", BUY, 1), T0 + 5).status is OrderStatus.DENIED
    assert eng.target_position("ES", 0, T0 + 6).status is OrderStatus.SUBMITTED
