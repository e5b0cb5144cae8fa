"""The simulated venue fills through env/fills.py: the prices the env and the backtester pay.

Scripted ES bars (tick 0.25, $50 a point, $2.25 a side, 1 tick of slippage): one tick of
slippage is $12.50, so a one-contract market fill costs $14.75 as in tests/env.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from foxhunt.execution import TradingEngine
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.orders import OrderRequest, OrderStatus, OrderType, Side, TimeInForce

from .helpers import CONTRACTS, SEC, T0, engine, rebuilt

MINUTE = 60 * SEC
BUY, SELL = Side.BUY, Side.SELL


class Loop:
    """Bars in, reports out: the smallest paper loop (decide at a bar's close, fill later)."""

    def __init__(self, **limits):
        self.venue = SimulatedVenue(CONTRACTS, slippage_ticks=1.0)
        self.eng: TradingEngine = engine(venue=self.venue, **limits)
        self.t = T0

    def bar(self, o, h, lo, c):
        self.t += MINUTE
        self.venue.on_bar("ES", self.t, o, h, lo)
        self.deliver()
        self.eng.mark("ES", c, self.t)

    def deliver(self):
        for report in self.venue.reports():
            self.eng.on_report(report)

    def order(self, *args, **kw):
        order = self.eng.submit(OrderRequest("ES", *args, **kw), self.t)
        self.deliver()
        return order


def test_a_market_order_fills_at_the_next_open_plus_slippage_and_pays_commission():
    loop = Loop()
    loop.bar(100.0, 101.0, 99.0, 100.0)
    order = loop.order(BUY, 1)
    assert order.status is OrderStatus.ACCEPTED  # nothing fills inside the decision's bar
    loop.bar(100.5, 101.5, 99.5, 101.0)
    assert order.status is OrderStatus.FILLED and order.fill_cost_ticks == 403  # 100.75
    assert order.commission == Decimal("2.25")
    # as the env: 25.00 of PnL from the open to the close, less 14.75 of costs
    assert loop.eng.account.equity() == Decimal(100_000) + Decimal("10.25")


def test_a_stop_triggers_through_its_price_and_a_gap_fills_at_the_open():
    loop = Loop()
    loop.bar(100.0, 101.0, 99.0, 100.0)
    loop.order(BUY, 2)
    loop.bar(100.0, 101.0, 99.5, 100.5)
    stop = loop.order(SELL, 1, OrderType.STOP, stop_price=99.0)
    loop.bar(100.0, 100.5, 99.25, 100.0)  # does not reach 99.00
    assert stop.status is OrderStatus.ACCEPTED
    loop.bar(100.0, 100.25, 98.75, 99.0)  # trades through 99.00: fills there, less a tick
    assert stop.status is OrderStatus.FILLED and stop.fill_cost_ticks == 395  # 98.75
    gap = loop.order(SELL, 1, OrderType.STOP, stop_price=98.5)
    loop.bar(97.5, 98.0, 97.0, 97.5)  # opens below the stop: fills at the open, less a tick
    assert gap.fill_cost_ticks == 389  # 97.25
    assert loop.eng.account.position("ES") == 0


def test_a_limit_fills_when_traded_through_or_at_a_better_open_never_on_a_touch():
    loop = Loop()
    loop.bar(100.0, 101.0, 99.0, 100.0)
    limit = loop.order(BUY, 1, OrderType.LIMIT, limit_price=99.5)
    loop.bar(100.0, 100.5, 99.5, 100.0)  # touches 99.50 only
    assert limit.status is OrderStatus.ACCEPTED
    loop.bar(100.0, 100.5, 99.25, 99.75)
    assert limit.status is OrderStatus.FILLED and limit.fill_cost_ticks == 398  # 99.50, no slip
    better = loop.order(BUY, 1, OrderType.LIMIT, limit_price=99.5)
    loop.bar(99.0, 99.5, 98.75, 99.25)
    assert better.fill_cost_ticks == 396  # the open, 99.00


def test_ioc_that_cannot_fill_is_canceled_and_day_orders_expire_at_the_close():
    loop = Loop()
    loop.bar(100.0, 101.0, 99.0, 100.0)
    ioc = loop.order(BUY, 1, OrderType.LIMIT, TimeInForce.IOC, limit_price=98.0)
    day = loop.order(BUY, 1, OrderType.LIMIT, TimeInForce.DAY, limit_price=98.0)
    loop.bar(100.0, 100.5, 99.5, 100.0)
    assert ioc.status is OrderStatus.CANCELED and day.status is OrderStatus.ACCEPTED
    loop.venue.end_session(loop.t)
    loop.deliver()
    assert day.status is OrderStatus.EXPIRED


def test_cancel_modify_and_a_cancel_that_comes_too_late():
    loop = Loop()
    loop.bar(100.0, 101.0, 99.0, 100.0)
    order = loop.order(BUY, 1, OrderType.LIMIT, limit_price=99.0)
    loop.eng.modify(order.client_order_id, loop.t, limit_price=99.25)
    loop.deliver()
    assert order.limit_ticks == 397 and order.status is OrderStatus.ACCEPTED
    loop.t += MINUTE
    loop.venue.on_bar("ES", loop.t, 99.0, 99.5, 98.5)  # fills, but the report is not in yet
    loop.eng.cancel(order.client_order_id, loop.t)  # the cancel crosses the fill
    loop.deliver()  # Filled, then CancelRejected: too late, nothing more happens
    assert order.status is OrderStatus.FILLED and loop.eng.account.position("ES") == 1
    other = loop.order(SELL, 1, OrderType.LIMIT, limit_price=101.0)
    loop.eng.cancel(other.client_order_id, loop.t)
    loop.deliver()
    assert other.status is OrderStatus.CANCELED and loop.venue.working == []


def test_a_session_on_the_simulated_venue_rebuilds_exactly():
    loop = Loop()
    prices = [100.0, 100.5, 101.0, 100.25, 99.5, 99.75, 100.5, 101.25, 100.75, 100.0]
    for i, p in enumerate(prices):
        loop.bar(p, p + 0.75, p - 0.75, p + 0.25)
        loop.eng.target_position("ES", [1, -2, 0, 3][i % 4], loop.t)
        loop.deliver()
        if i % 3 == 0:
            loop.order(SELL, 1, OrderType.STOP, stop_price=p - 0.5)
    assert sum(o.filled_qty for o in loop.eng.book) > 5
    assert rebuilt(loop.eng).snapshot() == loop.eng.snapshot()


@pytest.mark.parametrize("slippage", [0.0, 0.4, 1.0, 2.0])
def test_slippage_is_whole_ticks_against_the_trader(slippage):
    venue = SimulatedVenue(CONTRACTS, slippage_ticks=slippage)
    eng = engine(venue=venue)
    eng.mark("ES", 100.0, T0)
    buy = eng.submit(OrderRequest("ES", BUY, 1), T0 + 1)
    sell = eng.submit(OrderRequest("ES", SELL, 1), T0 + 1)
    venue.on_bar("ES", T0 + MINUTE, 100.0, 100.0, 100.0)
    for r in venue.reports():
        eng.on_report(r)
    ticks = {0.0: 0, 0.4: 1, 1.0: 1, 2.0: 2}[slippage]  # 0.4 rounds up to a whole tick
    assert buy.fill_cost_ticks == 400 + ticks and sell.fill_cost_ticks == 400 - ticks
