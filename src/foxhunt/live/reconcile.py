"""Reconciliation with a live venue, on every start and every reconnect.

What a restart must never do (the peers' bugs turned into rules): resubmit an order that may be
at the venue, flatten a position by itself, or lose a working order. So:
1. every report in the venue's journal is offered to the OMS (the log recognises those it
   holds by event id; the rest, a crash's lost reports, are applied);
2. every order the log has as not ended is asked about (`request_status`), never sent again: an
   order the venue never took is rejected in the log ("never reached the venue"; a kill
   switch's flatten logged while no trader ran is sent: it is an operator's order, not a stale
   decision), an order the
   venue ended is ended in the log, a cancel the venue never saw is asked again;
3. then the venue's working orders and position must equal the log's. If they do not, the
   account goes REDUCING (or HALTED) with one line saying what differs, and stays so until an
   operator adopts one view (`foxhunt live adopt`, an event in the log) and resumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from foxhunt.execution import venue as v
from foxhunt.execution.engine import TradingEngine
from foxhunt.orders.errors import TradingError
from foxhunt.orders.events import OrderFilled
from foxhunt.orders.state import OrderStatus
from foxhunt.risk.engine import KILL_SWITCH_TAG
from foxhunt.risk.events import TradingState

NEVER_REACHED = "never reached the venue (reconciliation: the venue does not know it)"


@dataclass
class Reconciliation:
    why: str  # start, reconnect, operator command
    reports_applied: int = 0
    reports_refused: int = 0
    asked: int = 0
    resolved: dict[str, str] = field(default_factory=dict)  # client order id -> what was done
    differences: list[str] = field(default_factory=list)
    state: str = ""  # the trading state it left ("" when unchanged)

    @property
    def ok(self) -> bool:
        return not self.differences

    def line(self) -> str:
        if self.ok:
            return (f"reconciled ({self.why}): {self.reports_applied} reports applied, "
                    f"{self.asked} orders asked about, venue and log agree")
        return f"reconciliation ({self.why}) found differences: {'; '.join(self.differences)}"

    def to_json(self) -> dict[str, Any]:
        return {"why": self.why, "reports_applied": self.reports_applied,
                "reports_refused": self.reports_refused, "asked": self.asked,
                "resolved": self.resolved, "differences": self.differences, "state": self.state,
                "line": self.line()}  # fmt: skip


def _apply(engine: TradingEngine, report: v.VenueReport, rec: Reconciliation,
           on_fill: Callable[[OrderFilled], None] | None) -> bool:  # fmt: skip
    try:
        event = engine.on_report(report)
    except (TradingError, KeyError):
        rec.reports_refused += 1
        return False
    if event is None:
        return False
    rec.reports_applied += 1
    if isinstance(event, OrderFilled) and on_fill is not None:
        on_fill(event)
    return True


def reconcile_live(
    engine: TradingEngine,
    venue: v.LiveVenue,
    symbol: str,
    *,
    on_mismatch: Literal["reduce", "halt"] = "reduce",
    on_fill: Callable[[OrderFilled], None] | None = None,
    why: str = "start",
    ts_ns: int = 0,
    timeout_s: float = 5.0,
) -> Reconciliation:
    rec = Reconciliation(why)
    for report in list(venue.history):
        _apply(engine, report, rec, on_fill)
    for report in venue.reports():
        _apply(engine, report, rec, on_fill)
    _resolve_in_flight(engine, venue, symbol, rec, on_fill, timeout_s)
    _compare(engine, venue, symbol, rec, timeout_s)
    if rec.differences:
        target = TradingState.HALTED if on_mismatch == "halt" else TradingState.REDUCING
        if engine.trading_state is TradingState.ACTIVE or (
                target is TradingState.HALTED and engine.trading_state is not target):  # fmt: skip
            reason = "reconciliation: " + "; ".join(rec.differences)
            engine.set_trading_state(target, max(ts_ns, 0), reason[:500])
            rec.state = str(target)
    return rec


def _resolve_in_flight(engine: TradingEngine, venue: v.LiveVenue, symbol: str,
                       rec: Reconciliation, on_fill, timeout_s: float) -> None:  # fmt: skip
    """Ask the venue about every order the log has as not ended; apply what it says."""
    open_ids = [o.client_order_id for o in engine.book.working(symbol)]
    if not open_ids:
        return
    rec.asked = len(open_ids)
    venue.request_status(open_ids)
    waiting = set(open_ids)
    deadline = time.monotonic() + timeout_s
    while waiting and time.monotonic() < deadline:
        got = venue.reports()
        if not got:
            time.sleep(0.005)
            continue
        for report in got:
            cid = report.client_order_id
            if isinstance(report, v.OrderStatusReport | v.UnknownOrder) and cid in waiting:
                waiting.discard(cid)
                _answer(engine, report, rec, on_fill)
            else:
                _apply(engine, report, rec, on_fill)
    for cid in sorted(waiting):
        rec.differences.append(f"order {cid}: the venue did not answer a status request "
                               f"within {timeout_s:g}s")


def _answer(engine: TradingEngine, report: v.OrderStatusReport | v.UnknownOrder,
            rec: Reconciliation, on_fill) -> None:  # fmt: skip
    cid, ts = report.client_order_id, report.ts_ns
    order = engine.book.get(cid)
    if order.is_terminal:
        return
    if isinstance(report, v.UnknownOrder):
        if order.status is OrderStatus.SUBMITTED and order.tag == KILL_SWITCH_TAG:
            engine._call_venue("submit", order)  # an operator's flatten logged while no
            rec.resolved[cid] = "sent: the kill switch's flatten"  # trader ran: not a decision
        elif order.status is OrderStatus.SUBMITTED:
            _apply(engine, v.Rejected(client_order_id=cid, ts_ns=ts, reason=NEVER_REACHED),
                   rec, on_fill)  # fmt: skip
            rec.resolved[cid] = "rejected: never reached the venue"
        else:
            rec.differences.append(f"order {cid} is {order.status} in the log; the venue "
                                   "does not know it")
        return
    if report.filled != order.filled_qty:
        rec.differences.append(f"order {cid} has {order.filled_qty} filled in the log, "
                               f"{report.filled} at the venue")
        return
    if report.state == "working":
        if order.status is OrderStatus.SUBMITTED:
            _apply(engine, v.Accepted(client_order_id=cid, ts_ns=ts,
                                      venue_order_id=report.venue_order_id), rec, on_fill)
            rec.resolved[cid] = "accepted"
        order = engine.book.get(cid)
        if order.status is OrderStatus.PENDING_CANCEL:
            engine._call_venue("cancel", order)  # a cancel it never saw: ask again
            rec.resolved[cid] = "cancel asked again"
        return
    ended = {"canceled": v.Canceled(client_order_id=cid, ts_ns=ts, reason="reconciliation"),
             "expired": v.Expired(client_order_id=cid, ts_ns=ts),
             "rejected": v.Rejected(client_order_id=cid, ts_ns=ts, reason="reconciliation: "
                                    "rejected at the venue")}.get(report.state)  # fmt: skip
    if ended is None:  # "filled" with the log's fill count: the log already has every fill
        rec.differences.append(f"order {cid} is filled at the venue, {order.status} in the log")
        return
    if order.status is OrderStatus.SUBMITTED and not isinstance(ended, v.Rejected):
        _apply(engine, v.Accepted(client_order_id=cid, ts_ns=ts,
                                  venue_order_id=report.venue_order_id), rec, on_fill)
    _apply(engine, ended, rec, on_fill)
    rec.resolved[cid] = report.state


def _compare(engine: TradingEngine, venue: v.LiveVenue, symbol: str, rec: Reconciliation,
             timeout_s: float) -> None:  # fmt: skip
    try:
        theirs = {o.client_order_id: o for o in venue.open_orders(timeout_s)
                  if o.symbol == symbol}
        positions = venue.positions(timeout_s)
    except v.VenueError as exc:
        rec.differences.append(f"the venue could not be asked: {exc}")
        return
    ours = {o.client_order_id: o for o in engine.book.working(symbol)}
    for cid in sorted(set(theirs) - set(ours)):
        o = theirs[cid]
        rec.differences.append(f"the venue has working order {cid} ({o.side} {o.leaves} "
                               f"{symbol}) that the log does not")
    for cid in sorted(set(ours) - set(theirs)):
        rec.differences.append(f"the log has working order {cid} ({ours[cid].status}) that "
                               "the venue does not")
    for cid in sorted(set(ours) & set(theirs)):
        if ours[cid].leaves_qty != theirs[cid].leaves:
            rec.differences.append(f"order {cid}: {ours[cid].leaves_qty} left in the log, "
                                   f"{theirs[cid].leaves} at the venue")
    pos, venue_pos = engine.account.position(symbol), int(positions.get(symbol, 0))
    if pos != venue_pos:
        rec.differences.append(f"{symbol} position {pos:+d} in the log, {venue_pos:+d} at the "
                               "venue")


def adopt_venue(engine: TradingEngine, venue: v.LiveVenue, symbol: str, *, ts_ns: int,
                reason: str, timeout_s: float = 5.0) -> list[str]:  # fmt: skip
    """An operator's decision after a reconciliation found differences: the log takes the
    venue's view of `symbol` (its working orders and its position), each change an event with
    `reason`. What the venue reported is applied first, as at a start. Returns one line per
    change; the trading state is left as it is (the operator resumes it)."""
    rec = Reconciliation("adopt")
    for report in [*venue.history, *venue.reports()]:
        _apply(engine, report, rec, None)
    _resolve_in_flight(engine, venue, symbol, rec, None, timeout_s)
    theirs = {o.client_order_id: o for o in venue.open_orders(timeout_s) if o.symbol == symbol}
    position = int(venue.positions(timeout_s).get(symbol, 0))
    lines = []
    for order in list(engine.book.working(symbol)):
        if order.client_order_id not in theirs:
            engine.drop_order(order.client_order_id, ts_ns, f"adopted the venue's view: {reason}")
            lines.append(f"order {order.client_order_id} ended in the log: the venue does not "
                         "have it")
    for cid, order in sorted(theirs.items()):
        if cid not in engine.book:
            engine.adopt_order(order, ts_ns, reason)
            lines.append(f"order {cid} ({order.side} {order.leaves} {symbol}) adopted from the "
                         "venue")
    ours = engine.account.position(symbol)
    if ours != position:
        engine.adopt_position(symbol, position, ts_ns, reason)
        lines.append(f"{symbol} position {ours:+d} -> {position:+d} (the venue's), booked at the "
                     "last price")
    return lines
