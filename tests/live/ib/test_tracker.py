"""IB's raw order messages -> our reports (OrderTracker), without a socket: one test per row
of the mapping table, and the waits that keep an order's fills before its end."""

from __future__ import annotations

from decimal import Decimal

import ib_async
import pytest

from foxhunt.execution import venue as v
from foxhunt.live.ib.journal import SentOrder
from foxhunt.live.ib.tracker import OrderTracker
from foxhunt.orders import OrderType, Side, TimeInForce

from .conftest import CONTRACTS


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def t():
    out: list[v.VenueReport] = []
    clock = Clock()
    tracker = OrderTracker(CONTRACTS, out.append, clock=lambda: 7, commission_wait_s=1.0,
                           fill_wait_s=5.0, monotonic=clock)
    tracker.out, tracker.time = out, clock
    tracker.add(SentOrder(client_order_id="P1", order_id=11, symbol="ES", side=Side.BUY,
                          quantity=3, order_type=OrderType.LIMIT, time_in_force=TimeInForce.GTC,
                          limit_ticks=18000))
    return tracker


def kinds(t) -> list[str]:
    return [type(r).__name__ for r in t.out]


def ib_order(qty=3.0, lmt=4500.0, ref="P1"):
    return ib_async.Order(orderId=11, action="BUY", totalQuantity=qty, orderType="LMT",
                          lmtPrice=lmt, orderRef=ref)


def test_accepted_once_from_open_order_or_status(t):
    t.on_open_order(11, ib_order(), "PreSubmitted")
    t.on_status(11, "Submitted", 0.0)
    t.on_status(11, "Submitted", 0.0)
    assert t.out == [v.Accepted(client_order_id="P1", ts_ns=7, venue_order_id="11")]


def test_execution_is_a_fill_with_its_commission(t):
    t.on_execution(11, "P1", "e.1.01.01", "BOT", 2.0, 4500.0)
    assert kinds(t) == ["Accepted"]  # the fill waits for its commission report
    t.on_commission("e.1.01.01", 4.1, "USD")
    assert t.out[1] == v.Filled(client_order_id="P1", ts_ns=7, fill_id="e.1.01.01", quantity=2,
                                price_ticks=18000, commission=Decimal("4.1"))
    t.on_execution(11, "P1", "e.1.01.01", "BOT", 2.0, 4500.0)  # a resend
    assert kinds(t) == ["Accepted", "Filled"]


def test_a_fill_without_commission_report_goes_after_the_wait(t):
    t.on_execution(11, "P1", "e.1.01.01", "BOT", 1.0, 4500.0)
    t.on_status(11, "Cancelled", 1.0)  # queued behind the fill
    t.tick()
    assert kinds(t) == ["Accepted"]
    t.time.now = 1.0
    t.tick()
    assert kinds(t) == ["Accepted", "Filled", "Canceled"]
    assert t.out[1].commission is None  # the contract's commission


def test_cancel_waits_for_the_executions_it_counts(t):
    t.on_status(11, "Submitted", 0.0)
    t.on_status(11, "Cancelled", 2.0)  # IB says 2 filled; no execution seen yet
    assert kinds(t) == ["Accepted"]
    t.on_execution(11, "P1", "e.1.01.01", "BOT", 2.0, 4500.0)
    t.on_commission("e.1.01.01", 4.1, "USD")
    assert kinds(t) == ["Accepted", "Filled", "Canceled"]
    assert t.out[2].reason == "canceled by IB"


def test_a_cancel_whose_executions_never_come_is_reported_after_the_wait(t):
    t.on_status(11, "Cancelled", 2.0)
    t.time.now = 5.0
    t.tick()
    assert kinds(t) == ["Canceled"]


def test_cancel_on_request_and_its_rejection(t):
    t.on_status(11, "Submitted", 0.0)
    t.cancel_sent("P1", 1)
    t.on_error(11, 10148, "OrderId 11 that needs to be cancelled cannot be cancelled")
    assert t.out[-1] == v.CancelRejected(client_order_id="P1", ts_ns=7, request=1,
                                         reason="IB error 10148: OrderId 11 that needs to be "
                                         "cancelled cannot be cancelled")  # fmt: skip
    t.cancel_sent("P1", 2)
    t.on_error(11, 202, "Order Canceled - reason:")
    t.on_status(11, "Cancelled", 0.0)
    assert kinds(t) == ["Accepted", "CancelRejected", "Canceled"]
    assert t.out[-1].reason == ""


def test_modify_acknowledged_or_rejected(t):
    t.on_status(11, "Submitted", 0.0)
    t.modify_sent("P1", 1, 5, 17990, None)
    t.on_open_order(11, ib_order(qty=3.0), "Submitted")  # not yet the new terms
    t.on_open_order(11, ib_order(qty=5.0, lmt=4497.5), "Submitted")
    assert t.out[-1] == v.Updated(client_order_id="P1", ts_ns=7, update_id="11.m1", quantity=5,
                                  limit_ticks=17990)
    t.modify_sent("P1", 2, 6, None, None)
    t.on_error(11, 201, "Order rejected - reason: too big")
    assert t.out[-1] == v.ModifyRejected(client_order_id="P1", ts_ns=7, request=2,
                                         reason="IB error 201: Order rejected - reason: too big")
    t.on_error(11, 399, "Order will be held until the market opens")  # a notice: no report
    assert kinds(t) == ["Accepted", "Updated", "ModifyRejected"]
    assert t.tracks["P1"].sent.quantity == 5


@pytest.mark.parametrize(("messages", "want"), [
    ([("error", 201, "Order rejected - reason: margin"), ("status", "Inactive")],
     [v.Rejected(client_order_id="P1", ts_ns=7, reason="IB error 201: Order rejected - reason: margin")]),
    ([("status", "Inactive")],
     [v.Rejected(client_order_id="P1", ts_ns=7, reason="IB made the order inactive")]),
    ([("status", "Submitted"), ("error", 201, "Order rejected - reason: margin")],
     [v.Accepted(client_order_id="P1", ts_ns=7, venue_order_id="11"),
      v.Canceled(client_order_id="P1", ts_ns=7, reason="IB error 201: Order rejected - reason: margin")]),
    ([("status", "Submitted"), ("error", 202, "Order Canceled - reason: expired")],
     [v.Accepted(client_order_id="P1", ts_ns=7, venue_order_id="11"),
      v.Canceled(client_order_id="P1", ts_ns=7, reason="IB error 202: Order Canceled - reason: expired")]),
    ([("status", "Submitted"), ("error", 2109, "Order Event Warning")],
     [v.Accepted(client_order_id="P1", ts_ns=7, venue_order_id="11")]),
])  # fmt: skip
def test_errors(t, messages, want):
    for msg in messages:
        if msg[0] == "error":
            t.on_error(11, msg[1], msg[2])
        else:
            t.on_status(11, msg[1], 0.0)
    assert t.out == want


def test_corrections_and_strangers_are_not_fills(t):
    t.on_execution(11, "P1", "e.1.01.01", "BOT", 1.0, 4500.0)
    t.on_execution(11, "P1", "e.1.01.02", "BOT", 1.0, 4500.25)  # IB's correction
    t.on_execution(12, "X9", "e.2.01.01", "BOT", 1.0, 4500.0)  # not ours
    t.on_execution(11, "P1", "e.3.01.01", "SLD", 1.0, 4500.0)  # the wrong side
    t.flush()
    assert kinds(t) == ["Accepted", "Filled"]
    assert t.corrections == ["e.1.01.02"]


def test_restore_from_the_journal_keeps_fills_once(t):
    again = OrderTracker(CONTRACTS, t.out.append, clock=lambda: 8)
    again.restore([t.tracks["P1"].sent], [
        v.Accepted(client_order_id="P1", ts_ns=1, venue_order_id="11"),
        v.Filled(client_order_id="P1", ts_ns=2, fill_id="e.1.01.01", quantity=3, price_ticks=1),
    ])
    again.on_execution(11, "", "e.1.01.01", "BOT", 3.0, 4500.0)  # replayed by reqExecutions
    again.on_status(11, "Filled", 3.0)
    again.flush()
    assert t.out == [] and again.tracks["P1"].ended
    assert again.find(11).cid == "P1" and again.find(0, "P1").cid == "P1"
    again.on_execution(11, "P1", "e.1.01.02", "BOT", 3.0, 4500.25)  # a correction of it
    assert again.corrections == ["e.1.01.02"] and t.out == []
