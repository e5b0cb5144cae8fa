"""IbVenue against the fake TWS on loopback, with a real OMS (TradingEngine on SQLite): orders
of every kind out, IB's answers back as events; positions agree with TWS's; the journal and
the reconnect replay report each fill once."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from foxhunt.errors import ConfigError
from foxhunt.execution import venue as v
from foxhunt.orders import OrderRequest, OrderStatus, OrderType, Side, TimeInForce

from .conftest import ACCOUNT, CONTRACTS, FUTURES, T0, make_engine, make_venue, until, wait_reports


def engine_with_marks(venue):
    eng = make_engine(venue)
    eng.mark("ES", 4500.0, T0)
    eng.mark("CL", 78.5, T0)
    return eng


def limit(symbol, side, qty, price, tif=TimeInForce.GTC, cid=None):
    return OrderRequest(symbol, side, qty, OrderType.LIMIT, tif, limit_price=price,
                        client_order_id=cid)


def test_market_order_round_trip_positions_equal_the_venues(tws, venue):
    tws.market.update(ES=4500.25, CL=78.43)
    eng = engine_with_marks(venue)
    buy = eng.submit(OrderRequest("ES", Side.BUY, 2, client_order_id="P1"), T0)
    sell = eng.submit(OrderRequest("CL", Side.SELL, 3, time_in_force=TimeInForce.DAY), T0)
    wait_reports(venue, 4, engine=eng)
    assert (buy.status, sell.status) == (OrderStatus.FILLED, OrderStatus.FILLED)
    assert buy.venue_order_id == str(tws.order("P1").order_id)
    assert (buy.avg_fill_ticks, buy.commission) == (18001, Decimal("4.1"))  # IB's, not 2.25 each
    assert sell.avg_fill_ticks == 7843
    assert {s: eng.account.position(s) for s in CONTRACTS} == venue.positions(2) == {
        "ES": 2, "CL": -3}
    fields = tws.order("P1")
    assert (fields.order_type, fields.tif, fields.account, fields.quantity) == ("MKT", "GTC",
                                                                                 ACCOUNT, 2)
    assert tws.order(sell.client_order_id).tif == "DAY"


def test_limit_stop_and_at_the_close_orders_go_out_as_ib_orders(tws, venue):
    eng = engine_with_marks(venue)
    eng.submit(limit("ES", Side.BUY, 1, "4499.75", TimeInForce.IOC, "L1"), T0)
    eng.submit(OrderRequest("ES", Side.SELL, 1, OrderType.STOP, stop_price="4490.5",
                            client_order_id="S1"), T0)
    eng.submit(OrderRequest("CL", Side.BUY, 1, time_in_force=TimeInForce.ATC,
                            client_order_id="C1"), T0)
    wait_reports(venue, 3, engine=eng)
    sent = {o.order_ref: (o.order_type, o.tif, o.lmt, o.aux) for o in map(tws.order, ["L1", "S1", "C1"])}
    assert sent == {"L1": ("LMT", "IOC", "4499.75", ""), "S1": ("STP", "GTC", "", "4490.5"),
                    "C1": ("MOC", "DAY", "", "")}
    assert [eng.book.get(c).status for c in ("L1", "S1", "C1")] == [OrderStatus.ACCEPTED] * 3


def test_partial_fills_then_the_rest(tws, venue):
    eng = engine_with_marks(venue)
    order = eng.submit(limit("ES", Side.BUY, 5, 4500.0, cid="P2"), T0)
    wait_reports(venue, 1, engine=eng)
    tws.fill("P2", 2, 4500.0)
    wait_reports(venue, 1, engine=eng)
    assert (order.status, order.filled_qty) == (OrderStatus.PARTIALLY_FILLED, 2)
    tws.fill("P2", 3, 4499.75)
    wait_reports(venue, 1, engine=eng)
    assert (order.status, order.filled_qty, order.fill_cost_ticks) == (
        OrderStatus.FILLED, 5, 2 * 18000 + 3 * 17999)
    assert eng.account.position("ES") == venue.positions(2)["ES"] == 5


def test_reject_by_error_code(tws, venue):
    eng = engine_with_marks(venue)
    tws.reject_next(201, "Order rejected - reason: YOUR ORDER IS NOT ACCEPTED")
    order = eng.submit(OrderRequest("ES", Side.BUY, 1), T0)
    wait_reports(venue, 1, engine=eng)
    assert order.status is OrderStatus.REJECTED
    assert order.reason == "IB error 201: Order rejected - reason: YOUR ORDER IS NOT ACCEPTED"
    assert venue.reports() == []  # the Inactive status after it adds nothing


def test_cancel_and_modify(tws, venue):
    eng = engine_with_marks(venue)
    order = eng.submit(limit("ES", Side.BUY, 2, 4490.0, cid="P3"), T0)
    wait_reports(venue, 1, engine=eng)
    assert eng.modify("P3", T0, quantity=4, limit_price="4491.25") is None
    wait_reports(venue, 1, engine=eng)
    assert (order.status, order.quantity, order.limit_ticks) == (OrderStatus.ACCEPTED, 4, 17965)
    assert (tws.order("P3").quantity, tws.order("P3").lmt) == (4, "4491.25")
    assert len({f[1] for f in tws.sent_orders()}) == 1  # the same IB orderId both times
    tws.reject_modifies(201, "Order rejected - reason: no")
    assert eng.modify("P3", T0, quantity=5) is None
    (rej,) = wait_reports(venue, 1, engine=eng)
    assert (rej.request, rej.reason) == (2, "IB error 201: Order rejected - reason: no")
    assert (order.status, order.quantity) == (OrderStatus.ACCEPTED, 4)
    eng.cancel("P3", T0)
    wait_reports(venue, 1, engine=eng)
    assert order.status is OrderStatus.CANCELED and order.reason == ""


def test_cancel_too_late_and_cancel_by_ib(tws, venue):
    eng = engine_with_marks(venue)
    a = eng.submit(limit("ES", Side.BUY, 1, 4490.0, cid="A"), T0)
    b = eng.submit(limit("ES", Side.SELL, 1, 4510.0, cid="B"), T0)
    wait_reports(venue, 2, engine=eng)
    tws.fill("A", 1, 4490.0)
    eng.cancel("A", T0)  # crosses the fill: IB answers error 161, the OMS ignores it
    fill, rej = wait_reports(venue, 2, engine=eng)
    assert isinstance(fill, v.Filled) and isinstance(rej, v.CancelRejected)
    assert rej.reason.startswith("IB error 161: Cancel attempted when order is not in a cancel")
    assert a.status is OrderStatus.FILLED
    tws.cancel_by_ib("B")
    wait_reports(venue, 1, engine=eng)
    assert b.status is OrderStatus.CANCELED and "expired" in b.reason


def test_requests_while_disconnected_are_answered_not_sent(tws, tmp_path):
    venue = make_venue(tws, tmp_path / "j.jsonl")  # never connected
    try:
        eng = engine_with_marks(venue)
        order = eng.submit(OrderRequest("ES", Side.BUY, 1), T0)
        wait_reports(venue, 1, engine=eng)
        assert order.status is OrderStatus.REJECTED and "not connected" in order.reason
        assert tws.sent_orders() == []
        with pytest.raises(v.VenueError, match="IB: not connected .*cannot ask for positions"):
            venue.positions(1)
        with pytest.raises(v.VenueError, match="cannot ask for order status"):
            venue.request_status(["O-1"])
    finally:
        venue.close()


def test_reconnect_replays_executions_once(tws, venue):
    tws.market["ES"] = 4500.25
    eng = engine_with_marks(venue)
    eng.submit(OrderRequest("ES", Side.BUY, 2, client_order_id="R1"), T0)
    rest = eng.submit(limit("ES", Side.BUY, 3, 4490.0, cid="R2"), T0)
    wait_reports(venue, 3, engine=eng)
    (first,) = [e.exec_id for e in tws.executions]
    tws.resend_execution(first)  # TWS sends it again: nothing new
    tws.drop()
    until(lambda: not venue.connected)
    tws.fill("R2", 3, 4490.0)  # while we are away
    until(lambda: venue.connected)
    until(lambda: venue.take_reconnected())
    got = wait_reports(venue, 1, engine=eng)
    assert [type(r).__name__ for r in got] == ["Filled"]
    assert rest.status is OrderStatus.FILLED
    fills = [r for r in venue.history if isinstance(r, v.Filled)]
    assert len(fills) == len({f.fill_id for f in fills}) == 2
    assert eng.account.position("ES") == venue.positions(2)["ES"] == 5
    assert not venue.take_reconnected()


def test_link_to_ib_lost_and_back(tws, venue):
    calls = []
    venue.on_reconnect = lambda: calls.append(1)
    tws.link(up=False)
    until(lambda: not venue.connected)
    tws.link(up=True)
    until(lambda: venue.connected)
    assert venue.take_reconnected() and calls == [1]


def test_status_open_orders_and_positions(tws, venue):
    tws.market["ES"] = 4500.25
    eng = engine_with_marks(venue)
    eng.submit(OrderRequest("ES", Side.BUY, 2, client_order_id="Q1"), T0)
    eng.submit(limit("ES", Side.SELL, 2, 4510.0, cid="Q2"), T0)
    eng.submit(limit("CL", Side.BUY, 4, 78.25, cid="Q3"), T0)
    wait_reports(venue, 4, engine=eng)
    tws.reject_next()
    eng.submit(limit("CL", Side.BUY, 1, 78.0, cid="Q4"), T0)
    wait_reports(venue, 1, engine=eng)
    tws.fill("Q3", 1, 78.25)
    eng.cancel("Q2", T0)
    wait_reports(venue, 2, engine=eng)
    opened = venue.open_orders(2)
    assert opened == [v.VenueOrder(client_order_id="Q3", venue_order_id=str(tws.order("Q3").order_id),
                                   symbol="CL", side=Side.BUY, quantity=4, filled=1, limit_ticks=7825)]
    venue.request_status(["Q1", "Q2", "Q3", "Q4", "nope"])
    got = {r.client_order_id: r for r in wait_reports(venue, 5)}
    assert [(got[c].state, got[c].filled, got[c].leaves) for c in ("Q1", "Q2", "Q3", "Q4")] == [
        ("filled", 2, 0), ("canceled", 0, 0), ("working", 1, 3), ("rejected", 0, 0)]
    assert isinstance(got["nope"], v.UnknownOrder)
    assert venue.positions(2) == {"ES": 2, "CL": 1}


def test_journal_survives_a_restart(tws, tmp_path):
    path = tmp_path / "ib.jsonl"
    venue = make_venue(tws, path)
    venue.connect(5)
    tws.market["ES"] = 4500.25
    eng = engine_with_marks(venue)
    eng.submit(OrderRequest("ES", Side.BUY, 1, client_order_id="J1"), T0)
    eng.submit(limit("ES", Side.BUY, 2, 4490.0, cid="J2"), T0)
    wait_reports(venue, 3, engine=eng)
    before = venue.history
    venue.close()
    tws.fill("J2", 2, 4490.0)  # while the trader is down
    again = make_venue(tws, path)
    try:
        assert again.history == before
        again.connect(5)  # reqExecutions at log on: only J2's fill is new
        (new,) = wait_reports(again, 1)
        assert isinstance(new, v.Filled) and new.client_order_id == "J2"
        assert again.history == [*before, new]
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert [x["op"] for x in lines].count("order") == 2
        assert sum(x["op"] == "report" for x in lines) == len(again.history)
    finally:
        again.close()


def test_bad_config_and_endpoints_are_one_line(tws, tmp_path):
    with pytest.raises(ConfigError, match=r"^ib contracts: no IB contract for CL; add \[ib"):
        make_venue(tws, tmp_path / "a", futures={"ES": FUTURES["ES"]})
    refused = make_venue(tws, tmp_path / "b")
    refused.port = 1  # nothing listens there
    with pytest.raises(v.VenueError, match=r"^cannot connect to TWS/IB Gateway at 127.0.0.1:1 "
                       r"\(client id 7\): nothing listens there"):
        refused.connect(2)
    refused.close()
    unknown = make_venue(tws, tmp_path / "c", futures={**FUTURES, "ES": {"exchange": "CME",
                                                                          "expiry": "202409"}})
    with pytest.raises(ConfigError, match=r"^IB contract for ES \(exchange='CME', currency='USD', "
                       r"expiry='202409'\): no such contract$"):
        unknown.connect(2)
    assert not unknown.connected
    unknown.close()


def test_client_id_in_use_and_wrong_account(tws, venue, tmp_path):
    twin = make_venue(tws, tmp_path / "d")  # the same client id 7
    with pytest.raises(v.VenueError, match="TWS said 326: Unable to connect as the client id is "
                       "already in use"):
        twin.connect(1)
    twin.close()
    other = make_venue(tws, tmp_path / "e", client_id=8)
    other.account = "U999"
    with pytest.raises(v.VenueError, match=r"^IB account U999 is not one this login manages "
                       r"\(DU1234567\)$"):
        other.connect(2)
    other.close()


def test_an_execution_correction_is_not_a_second_fill(tws, venue):
    tws.market["ES"] = 4500.25
    eng = engine_with_marks(venue)
    eng.submit(OrderRequest("ES", Side.BUY, 1, client_order_id="X1"), T0)
    wait_reports(venue, 2, engine=eng)
    fixed = tws.correct_execution(tws.executions[0].exec_id, 4500.5)
    until(lambda: venue.tracker.corrections == [fixed])
    assert venue.reports() == [] and eng.account.position("ES") == 1


def test_a_damaged_journal_is_one_line_and_a_torn_tail_is_dropped(tws, tmp_path):
    path = tmp_path / "ib.jsonl"
    good = json.dumps({"op": "report", "report": v.report_to_json(
        v.Accepted(client_order_id="P1", ts_ns=1, venue_order_id="4"))})
    path.write_text(good + "\n" + '{"op": "report", "rep')  # the process died mid-line
    venue = make_venue(tws, path)
    assert venue.history == [v.Accepted(client_order_id="P1", ts_ns=1, venue_order_id="4")]
    venue.close()
    assert path.read_text() == good + "\n"
    path.write_text("nonsense\n" + good + "\n")
    with pytest.raises(v.VenueError, match=r"^IB venue journal .*ib.jsonl: line 1 is not JSON"):
        make_venue(tws, path)
