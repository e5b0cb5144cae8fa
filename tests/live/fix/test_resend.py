"""Sequence gaps: reports the exchange sent while the gateway was down arrive as resends
(PossDupFlag=Y) after the next logon and are applied once; a resend of a report already in
the journal is dropped."""

from __future__ import annotations

import re
import time

from foxhunt.execution import venue as v
from foxhunt.live.fix.gateway import FixVenue
from foxhunt.live.fix.settings import CLIENT_COMP_ID
from foxhunt.orders import OrderRequest, OrderType, Side, TimeInForce
from foxhunt.orders.state import OrderStatus

from .helpers import CL, ES, T0, engine, es_market, exchange, free_port, gateway, pump, until


def _kinds(reports) -> list[str]:
    return [type(r).__name__ for r in reports]


def test_reports_sent_while_down_are_resent_after_logon_and_applied_once(tmp_path):
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    first = gateway(tmp_path, port)
    eng = engine(f"sqlite:///{tmp_path / 'log.sqlite'}", first)
    try:
        market = eng.submit(OrderRequest("ES", Side.BUY, 2), T0 + 1)
        resting = eng.submit(OrderRequest("ES", Side.BUY, 1, OrderType.LIMIT, limit_price=4990),
                             T0 + 1)  # fmt: skip
        pump(eng, first, lambda: resting.status is OrderStatus.ACCEPTED
             and market.status is OrderStatus.ACCEPTED)  # fmt: skip
        first.shutdown()  # the gateway goes down; its sequence numbers stay in its store
        ex.play()
        assert ex.wait(10)  # the fill and the cancel at the end of data go out while it is down
        assert ex.status()["positions"]["FOXHUNT"] == {"ES": 2}

        second = gateway(tmp_path, port)  # a restart: same session file, same store
        eng.venue = second
        pump(eng, second, lambda: market.status is OrderStatus.FILLED
             and resting.status is OrderStatus.CANCELED)  # fmt: skip
        assert eng.account.position("ES") == 2
        assert _kinds(second.history) == ["Accepted", "Accepted", "Filled", "Canceled"]
        assert second.positions(5) == {"ES": 2}
        second.shutdown()

        # the gateway's store forgets that it read them: the exchange resends them all
        store = second.config.store
        seqnums = next(store.glob("*.seqnums"))
        sender, _ = re.findall(r"\d+", seqnums.read_text())
        seqnums.write_text(f"{sender} : {2:010d}")
        third = gateway(tmp_path, port)
        eng.venue = third
        time.sleep(1.0)  # the resend comes at logon
        assert third.reports() == []  # every resend already journaled: dropped
        assert _kinds(third.history) == ["Accepted", "Accepted", "Filled", "Canceled"]
        third.shutdown()
    finally:
        ex.stop()
        eng.store.close()


def test_an_order_sent_while_down_goes_out_at_the_next_logon(tmp_path):
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    venue = gateway(tmp_path, port, heartbeat_s=1)
    eng = engine("sqlite://", venue)
    try:
        time.sleep(2.5)  # an idle session with a 1 s heartbeat stays up
        assert venue.connected and ex.status()["logged_on"] == ["FOXHUNT"]
        ex_port_down = ex
        ex_port_down.stop()  # the exchange goes away; the gateway keeps trying to reconnect
        deadline = time.monotonic() + 5
        while venue.connected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not venue.connected
        order = eng.submit(OrderRequest("ES", Side.SELL, 1), T0 + 1)  # stored, not sent
        ex = exchange(tmp_path, port, [es_market(10)])  # back, with its state
        pump(eng, venue, lambda: order.status is OrderStatus.ACCEPTED, 15)
        assert venue.take_reconnected() and not venue.take_reconnected()
        assert venue.logons == 2
    finally:
        venue.shutdown()
        ex.stop()


def test_a_resent_order_is_taken_once(tmp_path):
    """The exchange keys orders by ClOrdID: the same NewOrderSingle twice is one order."""
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    venue = gateway(tmp_path, port)
    eng = engine("sqlite://", venue)
    try:
        order = eng.submit(OrderRequest("ES", Side.BUY, 1), T0 + 1)
        venue.submit(order)  # sent again, as after a crash before the OMS logged the answer
        pump(eng, venue, lambda: order.status is OrderStatus.ACCEPTED)
        ex.play()
        assert ex.wait(10)
        pump(eng, venue, lambda: order.status is OrderStatus.FILLED)
        assert venue.positions(5) == {"ES": 1}
        assert sum(isinstance(r, v.Accepted) for r in venue.history) == 1
    finally:
        venue.shutdown()
        ex.stop()


def test_the_journal_survives_a_restart_without_a_session(tmp_path):
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    venue = gateway(tmp_path, port)
    eng = engine("sqlite://", venue)
    order = eng.submit(OrderRequest("ES", Side.BUY, 1), T0 + 1)
    pump(eng, venue, lambda: order.status is OrderStatus.ACCEPTED)
    venue.shutdown()
    ex.stop()
    # a torn last line (the process died writing it) is dropped; the rest reads back
    with open(venue.journal_path, "a") as fh:
        fh.write('{"kind": "Filled", "rep')
    again = FixVenue(venue.config.path, {"ES": ES, "CL": CL})
    assert _kinds(again.history) == ["Accepted"]
    again.shutdown()


def test_an_order_whose_terms_line_a_power_cut_lost_is_known_from_the_venue_journal(tmp_path):
    """The exchange syncs an order once, with the simulated venue's line (its terms and its
    acceptance); its own terms line is only flushed. Without that line (a power cut) the
    restarted exchange rebuilds the order from the venue's line: it answers for it, fills it,
    and takes a resend of it once."""
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    venue = gateway(tmp_path, port)
    eng = engine("sqlite://", venue)
    try:
        market = eng.submit(OrderRequest("ES", Side.BUY, 1), T0 + 1)
        limit = eng.submit(OrderRequest("ES", Side.SELL, 2, OrderType.LIMIT, limit_price=5003.25,
                                        time_in_force=TimeInForce.GTC), T0 + 1)  # fmt: skip
        pump(eng, venue, lambda: limit.status is OrderStatus.ACCEPTED
             and market.status is OrderStatus.ACCEPTED)  # fmt: skip
        views = ex.accounts[CLIENT_COMP_ID].orders
        before = {cid: vars(view).copy() for cid, view in views.items()}
        ex.stop()
        (tmp_path / "exchange" / CLIENT_COMP_ID / "orders.jsonl").write_text("")
        ex = exchange(tmp_path, port, [es_market(10)])
        after = {cid: vars(view) for cid, view in ex.accounts[CLIENT_COMP_ID].orders.items()}
        assert after == before
        until(lambda: venue.connected, what="the gateway's logon")
        venue.submit(market)  # sent again: taken once
        ex.play()
        assert ex.wait(10)
        pump(eng, venue, lambda: market.status is OrderStatus.FILLED
             and limit.status is OrderStatus.FILLED)  # fmt: skip
        assert sum(isinstance(r, v.Accepted) for r in venue.history) == 2
        assert venue.positions(5) == {"ES": -1}
    finally:
        venue.shutdown()
        ex.stop()
