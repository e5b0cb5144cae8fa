"""A simulated venue: working orders fill against bars through the one fill model.

Prices follow `env/fills.py`, the model the training env and the backtester fill with:
- a MARKET order fills at the open of the first bar after it was sent, `slippage_ticks` against
  the trader (fractional slippage rounds up to whole ticks);
- a STOP order triggers when the bar trades through its price (a sell stop on the low, a buy stop
  on the high) and fills at the stop price, or at the open when the bar gapped through it,
  slippage against the trader (`fills.stop_trigger`, `fills.fill_price`);
- a LIMIT order (not in the env's action set) fills at the open when the bar opens at or better
  than the limit, else at the limit when the bar trades through it by at least one tick (a touch
  is not a fill: the queue ahead is unknown); no slippage, never worse than the limit;
- an IOC order that does not fill on its first bar is canceled; `end_session` expires DAY orders;
- an ATC (at the close) market order waits for `on_close` and fills at that close, slippage
  against the trader: the env's session-end flatten and the backtest's final flatten;
- within a bar, market orders fill first (at the open), then stops and limits in the order they
  arrived: the env's step order (the order at the open, then the stop inside the bar);
- commission is the contract's, per contract per side (the OMS fills it in).
Orders fill whole (no liquidity model). Reports are queued and handed out by `reports()`, never
delivered from inside a call, as the `Venue` protocol requires.

A venue outlives the trader's process: with a `journal` file the venue appends every order it
took, every report it sent and every bar it processed, one JSON line each, and a new
`SimulatedVenue` on the same file rebuilds itself from it: its working orders, its positions
and every report it ever sent (`history`), which is what a restarted OMS reconciles against. A
bar or close already processed is ignored, and an order id it already knows is not taken twice.
Each line is flushed to the OS at once (a killed trader loses none) and the file is fsync'd
before any report leaves the venue (`reports()`, `history`, and before submit, cancel and modify
return), so the event log, which only ever holds reports, never holds a venue fact the journal
could lose to a power cut; a bar's line with no report rides on the next sync. With
`owner_syncs` the venue never syncs by itself: its owner calls `sync()` before anything the
journal holds leaves it (the local exchange's group commit: one sync for every order that
arrived while the last one ran, each acknowledged only after it).

`end_feed` says no more prices will come for a symbol: market orders fill at once at its last
close, stops and limits are canceled. `rebuild_journal` writes a journal afresh from the
account's event log, for when the journal is damaged or lost its tail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from foxhunt.env.fills import SCALAR, CostModel, fill_price, stop_trigger
from foxhunt.execution import venue as v
from foxhunt.execution.engine import TradingEngine
from foxhunt.execution.store import EventStore
from foxhunt.fileio import read_json_lines
from foxhunt.orders import events as oe
from foxhunt.orders.contract import Contract, Price
from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.errors import TradingError
from foxhunt.orders.order import Order
from foxhunt.portfolio.events import PriceMarked


@dataclass(slots=True)
class _Resting:
    client_order_id: str
    venue_order_id: str
    symbol: str
    side: Side
    leaves: int
    order_type: OrderType
    time_in_force: TimeInForce
    limit_ticks: int | None
    stop_ticks: int | None
    triggered: bool = False
    bars_seen: int = 0




REBUILD = ("the event log is the truth: rebuild the journal from it "
           "(`foxhunt paper ... --resume --rebuild-venue`)")
"""What to do about a journal that cannot be read back (see `rebuild_journal`)."""
FEED_ENDED = "the feed ended"


class VenueJournalError(TradingError):
    """The venue's journal cannot be read back, or rebuilt."""


def _resting_json(rest: _Resting) -> dict[str, Any]:
    return {**asdict(rest), "side": rest.side.value, "order_type": rest.order_type.value,
            "time_in_force": rest.time_in_force.value}


def _ticks_map(data: Any, name: str) -> dict[str, int]:
    if not isinstance(data, dict) or not all(type(x) is int for x in data.values()):
        raise ValueError(f"{name} is not a map of symbols to integers")
    return dict(data)


_datasync = getattr(os, "fdatasync", os.fsync)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SimulatedVenue:
    def __init__(self, contracts: Mapping[str, Contract], slippage_ticks: float = 1.0,
                 journal: Path | str | None = None, *, owner_syncs: bool = False):
        self.contracts = dict(contracts)
        self.owner_syncs = owner_syncs
        self.costs = {
            s: CostModel(float(c.tick_size), float(c.point_value), float(c.commission),
                         slippage_ticks)
            for s, c in contracts.items()
        }  # fmt: skip
        self._resting: dict[str, _Resting] = {}
        self._queue: list[v.VenueReport] = []
        self._n = 0
        self._history: list[v.VenueReport] = []  # every report sent, in order
        self.known: set[str] = set()  # every client order id taken
        self.taken: dict[str, _Resting] = {}
        """A journaled venue's orders as each was taken (its terms; unchanged after), from its
        journal: the local exchange rebuilds its view of an order from them."""
        self.positions: dict[str, int] = {}  # net contracts filled per symbol
        self.last_bar: dict[str, int] = {}  # ts of the last bar processed per symbol
        self.last_close: dict[str, int] = {}
        self.auction: dict[str, tuple[int, int]] = {}  # symbol -> (ts, close ticks) of its close
        self.ended: dict[str, tuple[int, int]] = {}  # symbol -> (ts, close in ticks) of its end
        self._journal = None
        self._unsynced = False
        self.path = None if journal is None else Path(journal)
        if self.path is not None:
            if self.path.exists():
                self._restore(self.path)
            try:
                new = not self.path.exists()
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._journal = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
                if new:
                    _fsync_dir(self.path.parent)
            except OSError as exc:
                raise VenueJournalError(f"venue journal {self.path}: cannot open it "
                                        f"({exc.strerror or exc})") from None
            for symbol in [s for s in self.ended if s in self.contracts]:
                self._settle(symbol)  # an end whose reports a crash cut short

    def close(self) -> None:
        if self._journal is not None:
            self.sync()
            self._journal.close()
            self._journal = None

    @property
    def history(self) -> list[v.VenueReport]:
        """Every report the venue sent, in order (synced to disk before it is read)."""
        self._sync()
        return self._history

    def _write(self, op: str, **fields) -> None:
        if self._journal is not None:
            self._journal.write(json.dumps({"op": op, "n": self._n, **fields}, default=str)
                                + "\n")
            self._journal.flush()
            self._unsynced = True

    def _sync(self) -> None:
        if not self.owner_syncs:
            self.sync()

    def sync(self) -> None:
        """Sync the journal: what it holds survives a power cut from now on (fdatasync: the
        data and the file's size, not its times; a quarter of fsync's mean here). Safe beside
        a thread that writes: it covers at least every line flushed before the call."""
        journal = self._journal
        if self._unsynced and journal is not None:
            self._unsynced = False
            try:
                _datasync(journal.fileno())
            except BaseException:
                self._unsynced = True
                raise

    def _restore(self, path: Path) -> None:
        """Apply the journal's lines in order; a torn last line (the process died writing it)
        never happened (`fileio.read_json_lines`)."""
        read_json_lines(path, self._apply_line,
                        lambda m: VenueJournalError(f"venue journal {m}; {REBUILD}"))

    def _apply_line(self, rec: Any) -> None:
        """One journal line applied to the venue's record (KeyError, TypeError or ValueError
        when it does not fit)."""
        if not isinstance(rec, dict):
            raise TypeError("not an object")
        n, op = rec["n"], rec["op"]
        if type(n) is not int:
            raise ValueError(f"n is {n!r}")
        if op == "order":
            r = v.decode_dataclass(_Resting, rec["order"])
            accepted = v.decode_dataclass(v.Accepted, rec["report"])
            self._resting[r.client_order_id] = r
            self.taken[r.client_order_id] = replace(r)
            self.known.add(r.client_order_id)
            self._history.append(accepted)
        elif op == "report":
            report = v.report_from_json(rec)
            if isinstance(report, v.Rejected):
                self.known.add(report.client_order_id)
            self._effect(report)
            self._history.append(report)
        elif op in ("bar", "close", "end"):
            symbol, ts = rec["symbol"], rec["ts"]
            if type(symbol) is not str or type(ts) is not int:
                raise ValueError(f"symbol {symbol!r} or ts {ts!r}")
            if op == "bar":
                self.last_bar[symbol] = ts
                self.auction.pop(symbol, None)
                if symbol in self.ended and ts > self.ended[symbol][0]:
                    del self.ended[symbol]
                for r in self._resting.values():
                    if r.symbol == symbol and r.time_in_force is not TimeInForce.ATC:
                        r.bars_seen += 1
            elif op == "close":
                self.last_close[symbol] = ts
                if type(rec.get("close")) is int:
                    self.auction[symbol] = (ts, rec["close"])
            else:
                close = rec["close"]
                if type(close) is not int:
                    raise ValueError(f"close is {close!r}")
                self.ended[symbol] = (ts, close)
        elif op == "state":
            self._resting = {r.client_order_id: r
                             for r in (v.decode_dataclass(_Resting, x) for x in rec["resting"])}
            self.taken = {cid: replace(r) for cid, r in self._resting.items()}
            self._history = [v.report_from_json(x) for x in rec["history"]]
            known = rec["known"]
            if not isinstance(known, list) or not all(type(c) is str for c in known):
                raise ValueError("known is not a list of order ids")
            self.known = set(known)
            self.positions = _ticks_map(rec["positions"], "positions")
            self.last_bar = _ticks_map(rec["last_bar"], "last_bar")
            self.last_close = _ticks_map(rec["last_close"], "last_close")
            self.ended = {}
        else:
            raise ValueError(f"unknown op {op!r}")
        self._n = n

    def _effect(self, report: v.VenueReport) -> None:
        """What a report says happened, applied to the venue's own record."""
        rest = self._resting.get(report.client_order_id)
        if isinstance(report, v.Filled) and rest is not None:
            self.positions[rest.symbol] = (self.positions.get(rest.symbol, 0)
                                           + report.quantity * rest.side.sign)
            del self._resting[report.client_order_id]
        elif isinstance(report, v.Canceled | v.Expired | v.Rejected):
            self._resting.pop(report.client_order_id, None)
        elif isinstance(report, v.Triggered) and rest is not None:
            rest.triggered = True
        elif isinstance(report, v.Updated) and rest is not None:
            rest.leaves = report.quantity  # orders fill whole: nothing of a resting one filled
            if report.limit_ticks is not None:
                rest.limit_ticks = report.limit_ticks
            if report.stop_ticks is not None:
                rest.stop_ticks = report.stop_ticks

    def _report(self, report: v.VenueReport) -> None:
        """Journal a report, apply it to the venue's record, queue it for the OMS."""
        if self._journal is not None:  # built only when written: a replay's hot path
            self._write("report", **v.report_to_json(report))
        self._effect(report)
        self._history.append(report)
        self._queue.append(report)

    def _next(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def reports(self) -> list[v.VenueReport]:
        """The reports queued since the last call, in the order they happened; the journal is
        synced first, so no report leaves before what it says is on disk."""
        if self._queue:
            self._sync()
        out, self._queue = self._queue, []
        return out

    @property
    def working(self) -> list[str]:
        return list(self._resting)

    # --- what a client may ask (a status request, a mass status, positions) -----------------

    def _filled(self) -> dict[str, int]:
        done: dict[str, int] = {}
        for r in self._history:
            if isinstance(r, v.Filled):
                done[r.client_order_id] = done.get(r.client_order_id, 0) + r.quantity
        return done

    def open_orders(self) -> list[v.VenueOrder]:
        """The working orders, as a mass status request answers."""
        filled = self._filled()
        return [v.VenueOrder(client_order_id=cid, venue_order_id=r.venue_order_id,
                             symbol=r.symbol, side=r.side,
                             quantity=r.leaves + filled.get(cid, 0), filled=filled.get(cid, 0),
                             limit_ticks=r.limit_ticks, stop_ticks=r.stop_ticks)
                for cid, r in self._resting.items()]  # fmt: skip

    def status(self, client_order_id: str, ts_ns: int) -> v.OrderStatusReport | v.UnknownOrder:
        """One order's state now, as an order status request answers."""
        if client_order_id not in self.known:
            return v.UnknownOrder(client_order_id=client_order_id, ts_ns=ts_ns,
                                  reason="no order with this client order id")
        state, vid, leaves = "rejected", "", 0
        for r in self._history:
            if r.client_order_id != client_order_id:
                continue
            if isinstance(r, v.Accepted):
                state, vid = "working", r.venue_order_id
            elif isinstance(r, v.Canceled | v.Expired | v.Rejected):
                state = {v.Canceled: "canceled", v.Expired: "expired"}.get(type(r), "rejected")
        rest = self._resting.get(client_order_id)
        filled = self._filled().get(client_order_id, 0)
        if rest is not None:
            state, leaves = "working", rest.leaves
        elif state == "working":
            state = "filled"
        return v.OrderStatusReport(client_order_id=client_order_id, ts_ns=ts_ns,
                                   venue_order_id=vid, state=state, filled=filled, leaves=leaves)

    # --- the Venue protocol -----------------------------------------------------------------

    def submit(self, order: Order) -> None:
        """Take an order; an id taken before is ignored (a resend after a restart). After
        `end_feed` a market order fills at once at the feed's last close; any other order is
        rejected."""
        if order.client_order_id in self.known:
            return
        ended = self.ended.get(order.symbol)
        if ended is not None and order.order_type is not OrderType.MARKET:
            self.known.add(order.client_order_id)
            self._report(v.Rejected(client_order_id=order.client_order_id, ts_ns=order.ts_last,
                                    reason=FEED_ENDED))  # fmt: skip
            self._sync()
            return
        vid = self._next("SIM-")
        rest = _Resting(
            order.client_order_id, vid, order.symbol, order.side, order.leaves_qty,
            order.order_type, order.time_in_force, order.limit_ticks, order.stop_ticks,
        )  # fmt: skip
        accepted = v.Accepted(client_order_id=order.client_order_id, ts_ns=order.ts_last,
                              venue_order_id=vid)
        # the order and its acceptance in one line: a crash keeps both or neither
        if self._journal is not None:
            self._write("order", order=_resting_json(rest), report=asdict(accepted))
            self.taken[rest.client_order_id] = replace(rest)
        self._resting[order.client_order_id] = rest
        self.known.add(order.client_order_id)
        self._history.append(accepted)
        self._queue.append(accepted)
        auction = self.auction.get(order.symbol)
        if ended is not None:
            self._close_fill(rest, max(order.ts_last, ended[0]),
                             self.contracts[order.symbol].price_float(ended[1]))
        elif auction is not None and order.time_in_force is TimeInForce.ATC:
            self._close_fill(rest, auction[0], self.contracts[order.symbol].price_float(auction[1]))
        self._sync()

    def cancel(self, order: Order) -> None:
        cid = order.client_order_id
        if cid not in self._resting:
            self._report(v.CancelRejected(client_order_id=cid, ts_ns=order.ts_last,
                                          reason="not working at the venue",
                                          request=order.requests))  # fmt: skip
        else:
            self._report(v.Canceled(client_order_id=cid, ts_ns=order.ts_last,
                                    reason="canceled on request"))  # fmt: skip
        self._sync()

    def modify(
        self, order: Order, quantity: int | None, limit_ticks: int | None, stop_ticks: int | None
    ) -> None:
        cid = order.client_order_id
        rest = self._resting.get(cid)
        if rest is None:
            self._report(v.ModifyRejected(client_order_id=cid, ts_ns=order.ts_last,
                                          reason="not working at the venue",
                                          request=order.requests))  # fmt: skip
        else:
            leaves = rest.leaves if quantity is None else quantity - order.filled_qty
            self._report(v.Updated(
                client_order_id=cid, ts_ns=order.ts_last, update_id=self._next("U-"),
                quantity=order.filled_qty + leaves, limit_ticks=limit_ticks,
                stop_ticks=stop_ticks,
            ))  # fmt: skip
        self._sync()

    # --- market data --------------------------------------------------------------------------

    def on_bar(self, symbol: str, ts_ns: int, open_: Price, high: Price, low: Price) -> None:
        """One bar of `symbol` (stamped at its close): every order working before it meets it,
        market orders first. A bar at or before the last one processed is ignored."""
        if ts_ns <= self.last_bar.get(symbol, -1):
            return
        ended = self.ended.get(symbol)
        if ended is not None:
            if ts_ns <= ended[0]:
                return
            del self.ended[symbol]  # prices came again: the feed goes on
        meets = [r for r in self._resting.values()
                 if r.symbol == symbol and r.time_in_force is not TimeInForce.ATC]
        if meets:
            self._meet(meets, symbol, ts_ns, open_, high, low)
        self.last_bar[symbol] = ts_ns
        self.auction.pop(symbol, None)
        self._write("bar", symbol=symbol, ts=ts_ns)

    def _meet(self, meets: list[_Resting], symbol: str, ts_ns: int, open_: Price, high: Price,
              low: Price) -> None:
        """The working orders `meets` meet one bar, market orders first."""
        contract = self.contracts[symbol]
        o, h, lo = (contract.to_ticks(p) for p in (open_, high, low))
        meets.sort(key=lambda r: r.order_type is not OrderType.MARKET)  # stable: arrival order
        for rest in meets:
            if rest.client_order_id not in self._resting:
                continue
            rest.bars_seen += 1
            ref = self._reference(rest, o, h, lo, contract, ts_ns)
            if ref is not None:
                price, slipped = ref
                signed = rest.leaves * rest.side.sign
                if slipped:
                    cost = self.costs[symbol]
                    price = contract.to_ticks(
                        fill_price(contract.price_float(price), signed, cost, SCALAR))
                self._report(v.Filled(
                    client_order_id=rest.client_order_id, ts_ns=ts_ns,
                    fill_id=self._next(f"{rest.venue_order_id}-F"), quantity=rest.leaves,
                    price_ticks=price,
                ))  # fmt: skip
            elif rest.time_in_force is TimeInForce.IOC:
                self._report(v.Canceled(client_order_id=rest.client_order_id, ts_ns=ts_ns,
                                        reason="IOC: nothing filled at once"))  # fmt: skip

    def on_close(self, symbol: str, ts_ns: int, close: Price) -> None:
        """The close of the bar just processed: ATC orders fill at it, slippage against the
        trader. It opens the closing auction: an ATC order that comes before the symbol's
        next bar fills at this close too (a trader that flattens on seeing a session's last
        bar, as the backtest does). A close at or before the last one processed is ignored."""
        if ts_ns <= self.last_close.get(symbol, -1):
            return
        for rest in [r for r in self._resting.values()
                     if r.symbol == symbol and r.time_in_force is TimeInForce.ATC]:
            self._close_fill(rest, ts_ns, float(close))
        self.last_close[symbol] = ts_ns
        ticks = self.contracts[symbol].to_ticks(close)
        self.auction[symbol] = (ts_ns, ticks)
        self._write("close", symbol=symbol, ts=ts_ns, close=ticks)

    def _close_fill(self, rest: _Resting, ts_ns: int, close: float) -> None:
        """`rest` fills whole at `close`, slippage against the trader (an at-the-close fill)."""
        contract = self.contracts[rest.symbol]
        signed = rest.leaves * rest.side.sign
        price = contract.to_ticks(fill_price(close, signed, self.costs[rest.symbol], SCALAR))
        self._report(v.Filled(
            client_order_id=rest.client_order_id, ts_ns=ts_ns,
            fill_id=self._next(f"{rest.venue_order_id}-F"), quantity=rest.leaves,
            price_ticks=price,
        ))  # fmt: skip

    def end_feed(self, symbol: str, ts_ns: int, close: Price) -> None:
        """No more prices will come for `symbol` after `close` at `ts_ns`: its working market
        orders (ATC included) fill at once at that close, slippage against the trader, as at a
        close; its stops and limits are canceled ("the feed ended"), since nothing can reach
        them any more. Later, a market order fills at once at that close and any other order
        is rejected. A call at or before the end already recorded is ignored; a bar after the
        end means the feed goes on after all."""
        ended = self.ended.get(symbol)
        if ended is not None and ts_ns <= ended[0]:
            return
        self.ended[symbol] = (ts_ns, self.contracts[symbol].to_ticks(close))
        self._settle(symbol)
        # after its reports: a crash before this line leaves the end to be called again
        self._write("end", symbol=symbol, ts=ts_ns, close=self.ended[symbol][1])

    def _settle(self, symbol: str) -> None:
        """What the end of `symbol`'s feed does to its working orders."""
        ts_ns, close = self.ended[symbol]
        price = self.contracts[symbol].price_float(close)
        mine = [r for r in self._resting.values() if r.symbol == symbol]
        for rest in sorted(mine, key=lambda r: r.order_type is not OrderType.MARKET):
            if rest.order_type is OrderType.MARKET:
                self._close_fill(rest, ts_ns, price)
            else:
                self._report(v.Canceled(client_order_id=rest.client_order_id, ts_ns=ts_ns,
                                        reason=FEED_ENDED))  # fmt: skip

    def _reference(
        self, rest: _Resting, o: int, h: int, lo: int, contract: Contract, ts_ns: int
    ) -> tuple[int, bool] | None:
        """(reference price in ticks, whether slippage applies), or None when it does not fill."""
        if rest.order_type is OrderType.MARKET:
            return o, True
        if rest.order_type is OrderType.STOP:
            price = contract.price_float
            hit, ref = stop_trigger(  # a sell stop protects a long, a buy stop a short
                -rest.side.sign, price(rest.stop_ticks), price(o), price(h), price(lo),
                self.costs[rest.symbol], SCALAR)
            if not hit:
                return None
            if not rest.triggered:
                rest.triggered = True
                self._report(v.Triggered(client_order_id=rest.client_order_id, ts_ns=ts_ns))
            return contract.to_ticks(ref), True
        limit, sign = rest.limit_ticks, rest.side.sign
        if (o - limit) * sign <= 0:
            return o, False
        through = lo if sign > 0 else h
        if (limit - through) * sign >= 1:
            return limit, False
        return None

    def end_session(self, ts_ns: int) -> None:
        """The session closed: DAY orders expire."""
        for rest in [r for r in self._resting.values() if r.time_in_force is TimeInForce.DAY]:
            self._report(v.Expired(client_order_id=rest.client_order_id, ts_ns=ts_ns))


_LOG_REPORTS: dict[type, Any] = {
    oe.OrderAccepted: lambda e: v.Accepted(venue_order_id=e.venue_order_id, **_base(e)),
    oe.OrderRejected: lambda e: v.Rejected(reason=e.reason, **_base(e)),
    oe.OrderTriggered: lambda e: v.Triggered(**_base(e)),
    oe.OrderFilled: lambda e: v.Filled(fill_id=e.fill_id, quantity=e.quantity,
                                       price_ticks=e.price_ticks, **_base(e)),
    oe.OrderCanceled: lambda e: v.Canceled(reason=e.reason, **_base(e)),
    oe.OrderExpired: lambda e: v.Expired(**_base(e)),
    oe.OrderUpdated: lambda e: v.Updated(update_id=e.update_id, quantity=e.quantity,
                                         limit_ticks=e.limit_ticks, stop_ticks=e.stop_ticks,
                                         **_base(e)),
    oe.OrderCancelRejected: lambda e: v.CancelRejected(reason=e.reason, request=e.request,
                                                       **_base(e)),
    oe.OrderModifyRejected: lambda e: v.ModifyRejected(reason=e.reason, request=e.request,
                                                       **_base(e)),
}  # fmt: skip
"""The log's order events that a venue reported, back to the reports they came from (same
event ids, so a reconciling OMS recognises every one)."""


def _base(e: oe.OrderEvent) -> dict[str, Any]:
    return {"client_order_id": e.client_order_id, "ts_ns": e.ts_ns}


def _numbers(*texts: str) -> list[int]:
    return [int(x) for t in texts for x in re.findall(r"\d+", t)]


def _old_n(path: Path) -> int:
    """The largest id number a journal's readable lines used (0 when none or no file)."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    best = 0
    for raw in data.split(b"\n"):
        try:
            n = json.loads(raw).get("n")
        except (ValueError, AttributeError):
            continue
        if type(n) is int:
            best = max(best, n)
    return best


def rebuild_journal(journal: Path | str, store: EventStore,
                    contracts: Mapping[str, Contract]) -> Path | None:
    """Write the simulated venue's journal afresh from the account's event log, for when the
    journal is damaged or lost its tail (a resumed run then refuses: `ReconciliationError`).

    For the simulated venue the log is the truth. The new journal holds one line, the
    venue's state as the log has it: the working orders the venue had accepted (with their
    terms, leaves and trigger state; an order the log sent but the venue never acknowledged
    is left out, so that reconciliation sends it), the positions, every report the log holds
    (as the reports they came from, so reconciliation recognises them all), and as the last
    bar and close processed per symbol the log's last mark: a bar the log reached only part
    way (its fills logged, its mark not) is met again, and the orders still working meet it as
    they did. Ids go on from the highest number the log or the old journal used. The feed's
    end is not in the log: call `end_feed` again (it is idempotent).

    Atomic: written to a temporary file, fsync'd and read back, then moved into place; the
    old journal is kept beside it as `<name>.damaged-<n>`, which is returned (None when there
    was no journal)."""
    path = Path(journal)
    engine = TradingEngine(store, contracts)
    history: list[v.VenueReport] = []
    triggered: set[str] = set()
    marks: dict[str, int] = {}
    numbers = [_old_n(path)]
    for _, event in store.read():
        convert = _LOG_REPORTS.get(type(event))
        if convert is not None:
            report = convert(event)
            history.append(report)
            if isinstance(report, v.Triggered):
                triggered.add(report.client_order_id)
            numbers += _numbers(getattr(event, "venue_order_id", ""),
                                getattr(event, "fill_id", ""), getattr(event, "update_id", ""))
        elif isinstance(event, PriceMarked):
            marks[event.symbol] = max(event.ts_ns, marks.get(event.symbol, 0))
    resting = [
        _Resting(o.client_order_id, o.venue_order_id, o.symbol, o.side, o.leaves_qty,
                 o.order_type, o.time_in_force, o.limit_ticks, o.stop_ticks,
                 triggered=o.client_order_id in triggered)
        for o in engine.book.working() if o.venue_order_id is not None
    ]  # fmt: skip
    fills = {r.client_order_id for r in history if isinstance(r, v.Filled)}
    positions = {o.symbol: engine.account.position(o.symbol) for o in engine.book
                 if o.client_order_id in fills}  # fmt: skip
    state = {
        "op": "state", "n": max(numbers), "log": getattr(store, "name", ""),
        "resting": [_resting_json(r) for r in resting],
        "history": [v.report_to_json(r) for r in history],
        "known": sorted({r.client_order_id for r in history}),
        "positions": positions, "last_bar": marks, "last_close": marks,
    }  # fmt: skip
    tmp = path.with_name(f".{path.name}.rebuild-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(state, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        SimulatedVenue(contracts, journal=tmp).close()  # it reads back, or nothing moves
        kept = None
        if path.exists():
            k = 1
            while path.with_name(f"{path.name}.damaged-{k}").exists():
                k += 1
            kept = path.with_name(f"{path.name}.damaged-{k}")
            try:
                os.link(path, kept)  # the old journal stays in place until the new one lands
            except OSError:
                shutil.copy2(path, kept)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise VenueJournalError(f"venue journal {path}: cannot rebuild it "
                                f"({exc.strerror or exc}); nothing was replaced") from None
    finally:
        tmp.unlink(missing_ok=True)
    return kept
