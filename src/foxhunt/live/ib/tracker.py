"""IB's order messages -> our venue reports, one order at a time, in the order they happened.

TWS tells an order's story in three streams: `openOrder`/`orderStatus` (its state), `execDetails`
+ `commissionReport` (its executions) and `error` (refusals, cancels by IB). `OrderTracker`
keeps what it has reported per order and turns each message into at most one report:

| IB message                                   | report                                  |
|----------------------------------------------|-----------------------------------------|
| status PreSubmitted / Submitted (first)      | Accepted (venue order id = IB orderId)  |
| first execDetails before any status          | Accepted, then Filled                   |
| execDetails (new execId)                     | Filled (fill id = execId)               |
| commissionReport for that execId             | the Filled's commission                 |
| openOrder with the requested new terms       | Updated                                 |
| status Cancelled / ApiCancelled, error 202   | Canceled                                |
| status Inactive before it worked             | Rejected (with IB's last error)         |
| error, order not yet working                 | Rejected                                |
| error 161/10147/10148 after our cancel       | CancelRejected                          |
| error after our modify                       | ModifyRejected (the order still works)  |
| error 201/203 on a working order             | Canceled (IB removed it)                |
| error 399, 404, 2100-2199, 10167             | nothing: notices                        |

A Filled waits up to `commission_wait_s` for its commission report (TWS sends it right after
the execution); reports behind it wait too, so the order of reports is IB's. A cancel whose
`filled` is ahead of the executions seen waits up to `fill_wait_s` for them: an order's fills
are always reported before its end. IB does not report a stop's trigger (no Triggered: a stop's
first fill says it); it reports a DAY order's expiry as a cancel (Canceled, not Expired). An
execution correction (the same execId with its last part counted up) is not applied (the OMS
has no amended fill): it is logged and kept in `corrections` for reconciliation.

Not thread-safe: the venue calls it from its IB thread only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import ib_async

from foxhunt.execution import venue as v
from foxhunt.live.ib import mapping as m
from foxhunt.live.ib.journal import SentOrder
from foxhunt.orders.contract import Contract

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Modify:
    request: int
    quantity: int
    limit_ticks: int | None
    stop_ticks: int | None


@dataclass(slots=True)
class _Held:
    """An end report waiting for the executions IB said came before it."""

    report: v.VenueReport
    filled: int
    deadline: float


@dataclass(slots=True)
class Track:
    """What we told the OMS about one order so far."""

    sent: SentOrder
    filled: int = 0
    accepted: bool = False
    ended: bool = False
    cancel_request: int | None = None
    modify: _Modify | None = None
    updates: int = 0
    held: _Held | None = None
    error: str = ""  # IB's last error about it

    @property
    def cid(self) -> str:
        return self.sent.client_order_id


@dataclass(slots=True)
class _Staged:
    report: v.VenueReport
    exec_id: str | None  # a Filled waiting for its commission
    deadline: float


class OrderTracker:
    def __init__(
        self,
        contracts: Mapping[str, Contract],
        emit: Callable[[v.VenueReport], None],
        *,
        clock: Callable[[], int] = time.time_ns,
        commission_wait_s: float = 1.0,
        fill_wait_s: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.contracts = contracts
        self._emit = emit
        self.clock, self.monotonic = clock, monotonic
        self.commission_wait_s, self.fill_wait_s = commission_wait_s, fill_wait_s
        self.tracks: dict[str, Track] = {}
        self.by_order_id: dict[int, str] = {}
        self.fill_ids: set[str] = set()
        self._exec_bases: dict[str, str] = {}
        self.corrections: list[str] = []
        self._staged: deque[_Staged] = deque()

    # --- what we sent, and what the journal says we reported ---------------------------------

    def add(self, sent: SentOrder) -> Track:
        track = self.tracks[sent.client_order_id] = Track(sent)
        self.by_order_id[sent.order_id] = sent.client_order_id
        return track

    def restore(self, orders: list[SentOrder], reports: list[v.VenueReport]) -> None:
        """Rebuild from the journal: every order sent, every report already given."""
        for sent in orders:
            self.add(sent)
        for report in reports:
            self._fold(report)

    def _fold(self, r: v.VenueReport) -> None:
        """What a report means for its order's record (applied when it is staged)."""
        if isinstance(r, v.Filled):
            self.fill_ids.add(r.fill_id)
            self._exec_bases.setdefault(m.exec_base(r.fill_id), r.fill_id)
        track = self.tracks.get(r.client_order_id)
        if track is None:
            return
        if isinstance(r, v.Accepted):
            track.accepted = True
        elif isinstance(r, v.Filled):
            track.accepted = True
            track.filled += r.quantity
            track.ended = track.ended or track.filled >= track.sent.quantity
        elif isinstance(r, v.Updated):
            track.sent = dataclasses.replace(
                track.sent, quantity=r.quantity,
                limit_ticks=track.sent.limit_ticks if r.limit_ticks is None else r.limit_ticks,
                stop_ticks=track.sent.stop_ticks if r.stop_ticks is None else r.stop_ticks,
            )  # fmt: skip
            track.modify, track.updates = None, track.updates + 1
        elif isinstance(r, v.ModifyRejected):
            track.modify = None
        elif isinstance(r, v.CancelRejected):
            track.cancel_request = None
        elif isinstance(r, v.Rejected | v.Canceled | v.Expired):
            track.ended, track.held = True, None

    # --- staging: reports leave in IB's order ------------------------------------------------

    def _stage(self, report: v.VenueReport, exec_id: str | None = None) -> None:
        self._fold(report)
        self._staged.append(_Staged(report, exec_id, self.monotonic() + self.commission_wait_s))
        self._release()

    def _release(self, force: bool = False) -> None:
        now = self.monotonic()
        while self._staged:
            front = self._staged[0]
            if front.exec_id is not None and now < front.deadline and not force:
                return
            self._staged.popleft()
            self._emit(front.report)

    def tick(self) -> None:
        """Release what waited long enough (a missing commission report, missing fills)."""
        now = self.monotonic()
        for track in self.tracks.values():
            held = track.held
            if held is not None and now >= held.deadline:
                log.warning("IB order %s: ended with %d filled but only %d executions came in "
                            "%.1fs; reporting its end", track.cid, held.filled, track.filled,
                            self.fill_wait_s)  # fmt: skip
                track.held = None
                self._stage(held.report)
        self._release()

    def flush(self) -> None:
        """Release everything now (closing): a missing commission becomes the contract's."""
        for track in self.tracks.values():
            if track.held is not None:
                held, track.held = track.held, None
                self._stage(held.report)
        self._release(force=True)

    def _base(self, track: Track) -> dict[str, object]:
        return {"client_order_id": track.cid, "ts_ns": self.clock()}

    def _end(self, track: Track, report: v.VenueReport, filled: int | None) -> None:
        """Stage an end (cancel), after the executions IB counted in `filled`."""
        if track.ended or track.held is not None:
            return
        if filled is not None and filled > track.filled:
            track.held = _Held(report, filled, self.monotonic() + self.fill_wait_s)
        else:
            self._stage(report)

    # --- requests we sent --------------------------------------------------------------------

    def unsent(self, report: v.VenueReport) -> None:
        """A request that never reached IB (not connected, unknown order): its answer."""
        self._stage(report)

    def cancel_sent(self, cid: str, request: int) -> None:
        self.tracks[cid].cancel_request = request

    def modify_sent(self, cid: str, request: int, quantity: int, limit_ticks: int | None,
                    stop_ticks: int | None) -> None:  # fmt: skip
        self.tracks[cid].modify = _Modify(request, quantity, limit_ticks, stop_ticks)

    # --- IB's messages -----------------------------------------------------------------------

    def find(self, order_id: int, order_ref: str = "") -> Track | None:
        cid = self.by_order_id.get(order_id) or order_ref
        track = self.tracks.get(cid) if cid else None
        if track is not None and track.sent.order_id != order_id and order_id > 0:
            return None  # the same orderRef on another IB order: not ours
        return track

    def on_open_order(self, order_id: int, order: ib_async.Order, status: str) -> None:
        track = self.find(order_id, order.orderRef)
        if track is None:
            return
        want = track.modify
        if want is not None and not track.ended:
            quantity, limit, stop = m.order_terms(order, self.contracts[track.sent.symbol])
            if (quantity == want.quantity and want.limit_ticks in (None, limit)
                    and want.stop_ticks in (None, stop)):  # fmt: skip
                self._stage(v.Updated(**self._base(track), update_id=f"{order_id}.m{track.updates + 1}",
                                      quantity=quantity, limit_ticks=want.limit_ticks,
                                      stop_ticks=want.stop_ticks))  # fmt: skip
        self.on_status(order_id, status, None, order.orderRef)

    def on_status(self, order_id: int, status: str, filled: float | None, order_ref: str = "") -> None:
        track = self.find(order_id, order_ref)
        if track is None or track.ended:
            return
        if status in m.WORKING_STATUSES:
            if not track.accepted:
                self._stage(v.Accepted(**self._base(track), venue_order_id=str(order_id)))
        elif status in m.CANCELED_STATUSES:
            reason = "" if track.cancel_request is not None else (track.error or "canceled by IB")
            done = None if filled is None else m.whole(filled, "filled quantity")
            self._end(track, v.Canceled(**self._base(track), reason=reason), done)
        elif status == m.INACTIVE and not track.accepted:
            self._stage(v.Rejected(**self._base(track),
                                   reason=track.error or "IB made the order inactive"))  # fmt: skip

    def on_execution(self, order_id: int, order_ref: str, exec_id: str, side: str, shares: float,
                     price: float) -> None:  # fmt: skip
        if exec_id in self.fill_ids:
            return  # a resend (reqExecutions after a reconnect, a repeated message)
        first = self._exec_bases.get(m.exec_base(exec_id))
        if first is not None:
            log.error("IB corrected execution %s as %s (order %s); the OMS keeps the first: "
                      "reconcile positions", first, exec_id, order_ref or order_id)  # fmt: skip
            self.corrections.append(exec_id)
            return
        track = self.find(order_id, order_ref)
        if track is None:
            log.warning("IB execution %s of order %s (orderRef %r) that this venue never sent",
                        exec_id, order_id, order_ref)  # fmt: skip
            return
        if m.side_of(side) is not track.sent.side:
            log.error("IB execution %s is %s, order %s is %s: not applied", exec_id, side,
                      track.cid, track.sent.side)  # fmt: skip
            return
        contract = self.contracts[track.sent.symbol]
        quantity = m.whole(shares, "execution size")
        ticks = m.price_ticks(contract, price, "execution")
        if track.ended and track.filled >= track.sent.quantity:
            log.warning("IB execution %s of order %s after it was filled", exec_id, track.cid)
        if not track.accepted and not track.ended:
            self._stage(v.Accepted(**self._base(track), venue_order_id=str(track.sent.order_id)))
        self._stage(v.Filled(**self._base(track), fill_id=exec_id, quantity=quantity,
                             price_ticks=ticks), exec_id=exec_id)  # fmt: skip
        held = track.held
        if held is not None and track.filled >= held.filled:
            track.held = None
            self._stage(held.report)

    def on_commission(self, exec_id: str, amount: float, currency: str) -> None:
        for staged in self._staged:
            r = staged.report
            if staged.exec_id == exec_id and isinstance(r, v.Filled):
                symbol = self.tracks[r.client_order_id].sent.symbol
                staged.report = dataclasses.replace(
                    r, commission=m.commission(amount, currency, self.contracts[symbol]))
                staged.exec_id = None
                self._release()
                return

    def on_error(self, order_id: int, code: int, message: str) -> None:
        track = self.find(order_id)
        if track is None:
            return
        text = f"IB error {code}: {message}"
        if code in m.INFO_CODES:
            log.info("IB order %s: %s", track.cid, text)
            return
        track.error = text
        base = self._base(track)
        if code == m.CANCELED_CODE:
            self._end(track, v.Canceled(**base, reason="" if track.cancel_request is not None
                                        else text), None)  # fmt: skip
        elif track.cancel_request is not None and code in m.CANCEL_REJECT_CODES:
            self._stage(v.CancelRejected(**base, reason=text, request=track.cancel_request))
        elif track.modify is not None:
            self._stage(v.ModifyRejected(**base, reason=text, request=track.modify.request))
        elif track.ended:
            log.info("IB order %s (ended): %s", track.cid, text)
        elif not track.accepted:
            self._stage(v.Rejected(**base, reason=text))
        elif code in m.GONE_CODES:
            self._end(track, v.Canceled(**base, reason=text), None)
        else:
            log.warning("IB order %s: %s", track.cid, text)
