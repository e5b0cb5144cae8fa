"""`SimulatedVenue.end_feed`: once a symbol's feed has ended, nothing is left waiting for a
price that will never come. Market orders fill at once at the last close with the market
slippage of an at-the-close fill, stops and limits are canceled, later market orders fill at
that close, anything else is rejected; journaled, idempotent, restored.

ES: tick 0.25, one tick of slippage; a close of 100.00 is 400 ticks."""

from __future__ import annotations

import json

import pytest

from foxhunt.execution.sim import FEED_ENDED, SimulatedVenue
from foxhunt.orders import OrderRequest, OrderStatus, OrderType, Side, TimeInForce

from .helpers import CONTRACTS, T0, engine

MINUTE = 60 * 10**9
END = T0 + 2 * MINUTE
BUY, SELL = Side.BUY, Side.SELL


class Desk:
    """A venue (with or without a journal) and its OMS, delivering reports after each call."""

    def __init__(self, journal=None, slippage=1.0):
        self.venue = SimulatedVenue(CONTRACTS, slippage, journal=journal)
        self.eng = engine(venue=self.venue)
        self.eng.mark("ES", 100.0, T0)
        self.t = T0

    def deliver(self) -> list[str]:
        reports = self.venue.reports()
        for r in reports:
            self.eng.on_report(r)
        return [type(r).__name__ for r in reports]

    def order(self, *args, ts=None, **kw):
        order = self.eng.submit(OrderRequest("ES", *args, **kw), ts or self.t)
        self.deliver()
        return order

    def bar(self, o, h, lo):
        self.t += MINUTE
        self.venue.on_bar("ES", self.t, o, h, lo)
        self.deliver()


def a_book(desk: Desk) -> dict:
    """A long position of 2, then a market sell, an at-the-close buy, a stop and a limit."""
    desk.order(BUY, 2)
    desk.bar(100.0, 100.5, 99.5)
    return {
        "market": desk.order(SELL, 1),
        "atc": desk.order(BUY, 1, time_in_force=TimeInForce.ATC),
        "stop": desk.order(SELL, 2, OrderType.STOP, stop_price=98.0),
        "limit": desk.order(BUY, 1, OrderType.LIMIT, limit_price=97.0),
    }


def test_working_market_orders_fill_at_the_close_and_the_rest_is_canceled():
    desk = Desk()
    orders = a_book(desk)
    desk.venue.end_feed("ES", END, 100.0)
    assert desk.deliver() == ["Filled", "Filled", "Canceled", "Canceled"]
    market, atc, stop, limit = orders.values()
    assert market.status is OrderStatus.FILLED and market.fill_cost_ticks == 399  # 100 - a tick
    assert atc.status is OrderStatus.FILLED and atc.fill_cost_ticks == 401  # 100 + a tick
    for order in (stop, limit):
        assert order.status is OrderStatus.CANCELED and order.reason == FEED_ENDED == \
            "the feed ended"
    assert desk.venue.working == [] and desk.eng.account.position("ES") == 2


@pytest.mark.parametrize("slippage", [0.0, 0.4, 2.0])
def test_the_price_is_the_at_the_close_fill_of_on_close(slippage):
    ended, closed = Desk(slippage=slippage), Desk(slippage=slippage)
    for desk in (ended, closed):
        desk.order(SELL, 3, time_in_force=TimeInForce.ATC)
    ended.venue.end_feed("ES", END, 100.25)
    closed.venue.on_close("ES", END, 100.25)
    ended.deliver()
    closed.deliver()
    (a,), (b,) = ended.eng.book, closed.eng.book
    assert a.fill_cost_ticks == b.fill_cost_ticks == 3 * (401 - {0.0: 0, 0.4: 1, 2.0: 2}[slippage])


def test_after_the_end_a_market_order_fills_at_once_and_anything_else_is_rejected():
    desk = Desk()
    desk.venue.end_feed("ES", END, 100.0)
    later = END + MINUTE
    market = desk.eng.submit(OrderRequest("ES", SELL, 2), later)  # no report inside the call
    assert market.status is OrderStatus.SUBMITTED
    assert desk.deliver() == ["Accepted", "Filled"]
    assert market.status is OrderStatus.FILLED and market.fill_cost_ticks == 2 * 399
    assert desk.eng.book.get(market.client_order_id).ts_last == later
    stop = desk.order(BUY, 2, OrderType.STOP, stop_price=101.0, ts=later)
    assert stop.status is OrderStatus.REJECTED and stop.reason == FEED_ENDED
    assert desk.venue.working == [] and desk.venue.positions == {"ES": -2}


def test_a_second_end_at_the_same_time_or_earlier_does_nothing():
    desk = Desk()
    a_book(desk)
    desk.venue.end_feed("ES", END, 100.0)
    desk.deliver()
    desk.order(BUY, 1, OrderType.LIMIT, limit_price=99.0, ts=END)  # rejected
    for ts, close in ((END, 100.0), (END, 90.0), (END - MINUTE, 100.0)):
        desk.venue.end_feed("ES", ts, close)
        assert desk.deliver() == []
    assert desk.venue.ended == {"ES": (END, 400)}


def test_a_bar_after_the_end_means_the_feed_goes_on():
    desk = Desk()
    desk.venue.end_feed("ES", END, 100.0)
    desk.venue.on_bar("ES", END, 100.0, 100.0, 100.0)  # at the end: ignored
    assert desk.venue.ended
    desk.t = END
    desk.bar(101.0, 101.5, 100.5)
    assert desk.venue.ended == {}
    order = desk.order(BUY, 1)
    assert order.status is OrderStatus.ACCEPTED  # waits for the next open again


def test_the_journal_rebuilds_the_end(tmp_path):
    path = tmp_path / "venue.jsonl"
    desk = Desk(journal=path)
    a_book(desk)
    desk.venue.end_feed("ES", END, 100.0)
    desk.deliver()
    desk.venue.close()
    assert json.loads(path.read_text().splitlines()[-1]) == \
        {"op": "end", "n": desk.venue._n, "symbol": "ES", "ts": END, "close": 400}

    again = SimulatedVenue(CONTRACTS, 1.0, journal=path)
    assert again.ended == {"ES": (END, 400)} and again.working == [] and again.reports() == []
    desk.venue, desk.eng.venue = again, again
    assert desk.order(BUY, 1, ts=END + MINUTE).fill_cost_ticks == 401
    again.end_feed("ES", END, 100.0)
    assert again.reports() == []


def test_an_end_cut_short_by_a_crash_is_finished_on_restore(tmp_path):
    """The end's line is written after its reports: a crash between leaves it to be called
    again; a market order taken after the end whose fill line was lost fills on restore."""
    path = tmp_path / "venue.jsonl"
    desk = Desk(journal=path)
    orders = a_book(desk)
    desk.venue.end_feed("ES", END, 100.0)
    desk.venue.close()
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-4]) + "\n")  # lost: the ATC's fill, both cancels, the end
    venue = SimulatedVenue(CONTRACTS, 1.0, journal=path)
    assert not venue.ended and sorted(venue.working) == sorted(
        o.client_order_id for o in list(orders.values())[1:])
    venue.end_feed("ES", END, 100.0)
    assert [type(r).__name__ for r in venue.reports()] == ["Filled", "Canceled", "Canceled"]
    market = desk.eng.submit(OrderRequest("ES", BUY, 1), END + MINUTE)
    venue.submit(market)
    venue.close()
    path.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")  # its fill: lost
    restored = SimulatedVenue(CONTRACTS, 1.0, journal=path)
    assert [type(r).__name__ for r in restored.reports()] == ["Filled"]
    assert restored.working == [] and restored.positions["ES"] == 2 - 1 + 1 + 1
