"""A whole FIX session: a real OMS (TradingEngine on a SQLite log) trades through `FixVenue`
with the local exchange, which fills its orders against played bars."""

from __future__ import annotations

import pytest

from foxhunt.execution import TradingEngine
from foxhunt.execution import venue as v
from foxhunt.live.feed import FeedEnded
from foxhunt.orders import OrderRequest, OrderType, Side, TimeInForce
from foxhunt.orders.state import OrderStatus

from .helpers import ES, T0, deliver, engine, es_market, exchange, free_port, gateway, pump, until


@pytest.fixture
def session(tmp_path):
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(20, session_end=(9,))])
    venue = gateway(tmp_path, port)
    eng = engine(f"sqlite:///{tmp_path / 'log.sqlite'}", venue)
    yield ex, venue, eng
    venue.shutdown()
    ex.stop()
    eng.store.close()


def _req(side, qty, kind=OrderType.MARKET, tif=TimeInForce.GTC, limit=None, stop=None,
         symbol="ES"):  # fmt: skip
    return OrderRequest(symbol, side, qty, kind, tif, limit_price=limit, stop_price=stop)


def test_orders_of_every_type_fill_from_played_bars_and_the_log_agrees_with_the_exchange(
        session, tmp_path):  # fmt: skip
    ex, venue, eng = session
    ts = T0 + 1
    o = {
        "market": eng.submit(_req(Side.BUY, 2), ts),
        "cancel": eng.submit(_req(Side.BUY, 1, OrderType.LIMIT, limit=4990), ts),
        "replace": eng.submit(_req(Side.SELL, 1, OrderType.LIMIT, limit=5100), ts),
        "stop": eng.submit(_req(Side.BUY, 1, OrderType.STOP, stop="5005.5"), ts),
        "day": eng.submit(_req(Side.BUY, 1, OrderType.LIMIT, TimeInForce.DAY, limit=4900), ts),
        "atc": eng.submit(_req(Side.SELL, 1, tif=TimeInForce.ATC), ts),
        "unknown symbol": eng.submit(_req(Side.BUY, 1, symbol="CL"), ts),
        "ioc": eng.submit(_req(Side.BUY, 1, OrderType.LIMIT, TimeInForce.IOC, limit=4900), ts),
    }
    assert all(x.status is OrderStatus.SUBMITTED for x in o.values()), o
    pump(eng, venue, lambda: all(x.status is not OrderStatus.SUBMITTED for x in o.values()))
    assert o["unknown symbol"].status is OrderStatus.REJECTED
    assert "unknown symbol 'CL'" in o["unknown symbol"].reason
    working = {w.client_order_id: w for w in venue.open_orders(5)}
    assert set(working) == {x.client_order_id for k, x in o.items() if k != "unknown symbol"}
    assert working[o["replace"].client_order_id].limit_ticks == ES.to_ticks(5100)
    assert working[o["stop"].client_order_id].stop_ticks == ES.to_ticks("5005.5")

    eng.cancel(o["cancel"].client_order_id, ts + 1)
    assert eng.modify(o["replace"].client_order_id, ts + 1, limit_price=5003) is None
    pump(eng, venue, lambda: o["cancel"].status is OrderStatus.CANCELED
         and o["replace"].status is OrderStatus.ACCEPTED)  # fmt: skip
    assert o["replace"].limit_ticks == ES.to_ticks(5003)

    feed = venue.feed()
    feed.subscribe("ES")  # nothing played yet: an empty snapshot
    ex.play()  # the bars play, every order meets them
    bars = []
    with pytest.raises(FeedEnded):
        while len(bars) < 100:
            bar = feed.next_bar(5)
            assert bar is not None
            bars.append(bar)
            eng.mark("ES", bar.close, bar.ts_ns)
            deliver(eng, venue)
    assert [b.ts_ns for b in bars] == list(es_market(20).ts)
    assert (bars[0].open, bars[0].high, bars[0].low, bars[0].close, bars[0].volume) == (
        5000, 5002, 4998, 5000.5, 100)
    pump(eng, venue, lambda: all(x.is_terminal for x in o.values()))

    fills = {k: x.avg_fill_ticks for k, x in o.items() if x.status is OrderStatus.FILLED}
    assert fills == {
        "market": ES.to_ticks("5000.25"),  # bar 0's open, one tick against us
        "replace": ES.to_ticks(5003),  # the new limit, traded through on bar 2
        "stop": ES.to_ticks("5005.75"),  # bar 4 trades through the stop; one tick of slippage
        "atc": ES.to_ticks("5009.25"),  # the session's last close (bar 9), one tick against us
    }
    assert o["day"].status is OrderStatus.EXPIRED
    assert o["ioc"].status is OrderStatus.CANCELED
    history = venue.history
    assert sum(isinstance(r, v.Triggered) for r in history) == 1
    assert eng.account.position("ES") == 1
    assert venue.positions(5) == {"ES": 1} == ex.status()["positions"]["FOXHUNT"]
    assert venue.open_orders(5) == []
    # the log, folded afresh, is the engine the reports built
    assert TradingEngine(eng.store, eng.contracts).snapshot() == eng.snapshot()


def test_status_requests_and_a_cancel_too_late(session):
    ex, venue, eng = session
    filled = eng.submit(_req(Side.BUY, 1), T0 + 1)
    resting = eng.submit(_req(Side.BUY, 1, OrderType.LIMIT, limit=4900), T0 + 1)
    pump(eng, venue, lambda: resting.status is OrderStatus.ACCEPTED
         and filled.status is OrderStatus.ACCEPTED)  # fmt: skip
    ex.play()
    assert ex.wait(10)
    pump(eng, venue, lambda: filled.status is OrderStatus.FILLED
         and resting.status is OrderStatus.CANCELED)  # fmt: skip (the data ended)
    venue.request_status([filled.client_order_id, resting.client_order_id, "NEVER-SENT"])
    got: list = []
    until(lambda: got.extend(venue.reports()) or len(got) >= 3, what="status answers")
    by_id = {r.client_order_id: r for r in got}
    assert by_id[filled.client_order_id].state == "filled"
    assert (by_id[filled.client_order_id].filled, by_id[filled.client_order_id].leaves) == (1, 0)
    assert by_id[resting.client_order_id].state == "canceled"
    assert isinstance(by_id["NEVER-SENT"], v.UnknownOrder)
    # a cancel the exchange answers "too late" reaches the OMS as CancelRejected, which it
    # ignores for an order that has ended (no event logged)
    seq = eng.store.last_seq()
    venue.cancel(filled)
    until(lambda: got.extend(venue.reports()) or isinstance(got[-1], v.CancelRejected))
    assert eng.on_report(got[-1]) is None and eng.store.last_seq() == seq


def test_no_deadlock_under_load(tmp_path):
    """Orders from the main thread while the exchange plays bars and reports on its threads."""
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(300)], start="now")
    venue = gateway(tmp_path, port)
    eng = engine("sqlite://", venue, max_gross_notional=0, max_position=1000)
    try:
        orders = [eng.submit(_req(Side.BUY if i % 2 else Side.SELL, 1), T0 + 1)
                  for i in range(300)]  # fmt: skip
        pump(eng, venue, lambda: all(o.status is OrderStatus.FILLED for o in orders), 30)
        assert eng.account.position("ES") == 0
        assert venue.positions(5) == {}
        assert sum(isinstance(r, v.Filled) for r in venue.history) == 300
    finally:
        venue.shutdown()
        ex.stop()
