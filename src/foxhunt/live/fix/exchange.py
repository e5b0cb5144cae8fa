"""`LocalExchange`: a FIX 4.4 acceptor that fills orders against stored bars, for rehearsals.

The exchange is the paper venue (`SimulatedVenue`, the one fill model of backtest and paper)
behind a real FIX session, so a trader rehearses the whole live path (session, reconnects,
resends, reports, reconciliation) on known data. Each counterparty (a client CompID) is an
account; each account has one `SimulatedVenue` per symbol, journaled in the state directory
(`<state>/<client>/<symbol>.jsonl`), so an exchange killed and started again keeps its working
orders, positions and reports, and QuickFIX's `FileStore` (`<state>/fix-store`) keeps the
sequence numbers and the sent messages that a resend asks for. One venue per symbol, not one
per account, because a session end (DAY orders expire) and the end of data are per symbol.

QuickFIX C++ has no acceptor templates, so the client CompIDs are configured (`clients`), as
a real venue provisions each firm's CompID; an unknown CompID's logon is refused.

Bars play in close-time order across symbols at `speed` (None: as fast as it goes; gaps
longer than one bar, such as nights and weekends, are shortened to one bar). Per bar: every
account's venue meets it (`on_bar`: fills at the open, stops, limits), its reports go out;
at a session end ATC orders fill at the close (`on_close`) and DAY orders expire; at the
symbol's last bar market orders fill at that close and stops and limits are canceled
(`end_feed`); then the completed bar goes to the market data subscribers (X), and after the
last one a SecurityStatus (f, SecurityTradingStatus 18) says the data ended.

Threads: QuickFIX's acceptor thread calls `fromApp`; the playback thread plays bars. Both
change the venues under `_lock` and put what they send in one outbound queue; the sender
thread takes the queue as it stands, syncs the journals written to since its last batch
(outside `_lock`), then sends the batch in order: reports leave in the order the venues wrote
them, no thread waits for a QuickFIX session mutex while holding `_lock`, and nothing leaves
before what it says is on disk. That is group commit: while one sync runs, `fromApp` goes on
taking orders (each journal line written and flushed at once, so a killed exchange keeps it),
and the next sync covers all of them. An order is acknowledged only once its line (the
simulated venue's: its terms and its acceptance) is fdatasync'd; a power cut before that loses
an order nobody was told was taken, which the client's reconciliation finds unknown and closes
(`live/reconcile.py`). The exchange's own terms line beside it is only flushed (rebuilt from
the venue's journal when a power cut lost it).

`on_wire` (optional; benchmarks/bench_live.py's tick-to-order latency) is called with ("md",
"SYMBOL:TS", t) for each bar's market data message (X), t the `time.perf_counter_ns()` just
before it is handed to QuickFIX to send, and with ("order", ClOrdID, t) for each
NewOrderSingle, t taken as `fromApp` is entered; after the send or the handling, never inside
it. Unset, it costs one attribute test a message.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from foxhunt.execution import venue as v
from foxhunt.execution.sim import SimulatedVenue, VenueJournalError
from foxhunt.fileio import read_json_lines
from foxhunt.live.fix import codec
from foxhunt.live.fix.codec import Fields, FixFieldError
from foxhunt.live.fix.gateway import LOGOUT_WAIT_S, _logout
from foxhunt.live.fix.settings import (
    CLIENT_COMP_ID,
    DEFAULT_PORT,
    EXCHANGE_COMP_ID,
    acceptor_settings,
)
from foxhunt.orders.contract import Contract
from foxhunt.orders.enums import OrderType, Side, TimeInForce

log = logging.getLogger(__name__)

JOURNAL_FAILED_EXIT = 75
_NONE = "NONE"


@dataclass
class Market:
    """One symbol's bars to play: close times (ns), OHLCV, and which bars end a session."""

    symbol: str
    contract: Contract
    ts: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    session_end: np.ndarray

    @classmethod
    def of(cls, contract: Contract, bars: Any, session: Any = None) -> Market:
        """From `data.series.Bars` (already cut to the window) and the instrument's session."""
        from foxhunt.env.market import session_ends

        ends = (session_ends(bars.ts, session) if session is not None
                else np.zeros(len(bars), dtype=bool))  # fmt: skip
        return cls(contract.symbol, contract, np.asarray(bars.ts, dtype=np.int64), bars.open,
                   bars.high, bars.low, bars.close, bars.volume, ends)

    def __len__(self) -> int:
        return len(self.ts)

    def bar(self, i: int) -> dict[str, float]:
        return {"open": float(self.open[i]), "high": float(self.high[i]),
                "low": float(self.low[i]), "close": float(self.close[i]),
                "volume": float(self.volume[i])}  # fmt: skip


@dataclass
class _Ask:
    """What `SimulatedVenue` reads of an order (it takes any object with these fields)."""

    client_order_id: str
    symbol: str
    side: Side
    leaves_qty: int
    order_type: OrderType
    time_in_force: TimeInForce
    limit_ticks: int | None
    stop_ticks: int | None
    ts_last: int
    requests: int = 0
    filled_qty: int = 0


@dataclass
class _View:
    """The exchange's view of one order: its terms and what happened to it."""

    cid: str
    symbol: str
    side: Side
    quantity: int
    order_type: OrderType
    tif: TimeInForce
    limit_ticks: int | None
    stop_ticks: int | None
    venue_order_id: str = _NONE
    filled: int = 0
    cost_ticks: int = 0
    state: str = "working"
    reason: str = ""

    def apply(self, r: v.VenueReport) -> None:
        if isinstance(r, v.Accepted):
            self.venue_order_id = r.venue_order_id
        elif isinstance(r, v.Filled):
            self.filled += r.quantity
            self.cost_ticks += r.quantity * r.price_ticks
            if self.filled >= self.quantity:
                self.state = "filled"
        elif isinstance(r, v.Updated):
            self.quantity = r.quantity
            if r.limit_ticks is not None:
                self.limit_ticks = r.limit_ticks
            if r.stop_ticks is not None:
                self.stop_ticks = r.stop_ticks
        elif isinstance(r, v.Canceled):
            self.state, self.reason = "canceled", r.reason
        elif isinstance(r, v.Expired):
            self.state = "expired"
        elif isinstance(r, v.Rejected):
            self.state, self.reason = "rejected", r.reason

    def ord_status(self) -> str:
        if self.state == "working":
            return "1" if self.filled else "0"
        return codec.ORD_STATUS[self.state]

    def avg_px(self, contract: Contract) -> str:
        if not self.filled:
            return "0"
        return format((contract.price(self.cost_ticks) / self.filled).normalize(), "f")


@dataclass
class _Account:
    """One counterparty: its venues (one per symbol), its orders, its terms journal."""

    name: str
    folder: Path
    venues: dict[str, SimulatedVenue]
    orders: dict[str, _View] = field(default_factory=dict)
    terms: Any = None
    sid: Any = None

    def venue_of(self, cid: str) -> SimulatedVenue | None:
        view = self.orders.get(cid)
        if view is None:
            return None
        sim = self.venues.get(view.symbol)
        return sim if sim is not None and cid in sim.known else None


class LocalExchange:
    """A FIX 4.4 acceptor on `host:port` filling `markets` through `SimulatedVenue`s."""

    def __init__(
        self,
        markets: list[Market],
        state_dir: Path | str,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        comp_id: str = EXCHANGE_COMP_ID,
        clients: list[str] | tuple[str, ...] = (CLIENT_COMP_ID,),
        speed: float | None = 60.0,
        lockstep: bool = False,
        pause_when_away: bool = False,
        start: str = "subscribe",
        slippage_ticks: float = 1.0,
        heartbeat_s: int = 30,
        file_log: bool = False,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        on_wire: Callable[[str, str, int], None] | None = None,
    ):
        if start not in ("subscribe", "now", "told"):
            raise ValueError(f"start {start!r}: use subscribe, now or told")
        if not markets:
            raise ValueError("the exchange needs at least one market")
        self.markets = {m.symbol: m for m in markets}
        self.state_dir = Path(state_dir)
        self.host, self.port, self.comp_id = host, port, comp_id
        self.clients = list(dict.fromkeys(clients))
        self.speed = speed
        self.lockstep, self.pause_when_away = lockstep, pause_when_away or lockstep
        self.start_mode = start
        self.heartbeat_s = heartbeat_s
        self.file_log = file_log
        self.on_event = on_event
        self.on_wire = on_wire
        self._lock = threading.RLock()
        self._send_lock = threading.Lock()
        self._outbound: deque[tuple[Any, Any]] = deque()
        self._unsynced: set[SimulatedVenue] = set()  # journals the next batch must sync first
        self._pending = threading.Event()  # the outbound queue has gained something
        self._sending = False  # the sender holds a batch it has not sent yet
        self._sender: threading.Thread | None = None
        self._closing = threading.Event()
        self._go = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._ids = itertools.count(1)
        self._subs: dict[str, dict[str, tuple[str, str]]] = {}  # client -> req id -> (symbol)
        self._logged_on: set[str] = set()
        self._acked: dict[str, dict[str, int]] = {}  # client -> symbol -> last bar done
        self._acks = threading.Condition()
        self.bars_played = 0
        self.sessions_closed = 0
        self.orders = 0
        self._thread: threading.Thread | None = None
        self._acceptor: Any = None
        contracts = {s: m.contract for s, m in self.markets.items()}
        self.accounts = {c: self._open_account(c, contracts, slippage_ticks)
                         for c in self.clients}  # fmt: skip
        self._next = {s: self._resume_index(s) for s in self.markets}
        self.clock = self._start_clock()

    # --- state ----------------------------------------------------------------------------

    def _open_account(self, name: str, contracts: dict[str, Contract],
                      slippage_ticks: float) -> _Account:  # fmt: skip
        folder = self.state_dir / name
        venues = {s: SimulatedVenue({s: c}, slippage_ticks, journal=folder / f"{s}.jsonl",
                                    owner_syncs=True)
                  for s, c in contracts.items()}  # fmt: skip
        acct = _Account(name, folder, venues)
        terms = folder / "orders.jsonl"

        def take(rec: Any) -> None:
            view = _View(rec["cid"], rec["symbol"], Side(rec["side"]), rec["quantity"],
                         OrderType(rec["type"]), TimeInForce(rec["tif"]), rec["limit"],
                         rec["stop"])  # fmt: skip
            if rec.get("rejected"):
                view.state, view.reason = "rejected", rec["rejected"]
            acct.orders[view.cid] = view

        read_json_lines(terms, take, lambda m: VenueJournalError(f"exchange orders {m}"))
        for sim in venues.values():  # an order taken whose terms line a power cut lost
            for cid, r in sim.taken.items():
                if cid not in acct.orders:
                    acct.orders[cid] = _View(cid, r.symbol, r.side, r.leaves, r.order_type,
                                             r.time_in_force, r.limit_ticks, r.stop_ticks)
        for sim in venues.values():
            for report in sim.history:
                view = acct.orders.get(report.client_order_id)
                if view is not None:
                    view.apply(report)
        acct.terms = open(terms, "a", encoding="utf-8")  # noqa: SIM115 - kept open
        return acct

    def _resume_index(self, symbol: str) -> int:
        """The first bar of `symbol` no venue has met yet (all of them, after a restart)."""
        m = self.markets[symbol]
        last = max((a.venues[symbol].last_bar.get(symbol, -1) for a in self.accounts.values()),
                   default=-1)  # fmt: skip
        return int(np.searchsorted(m.ts, last, "right"))

    def _start_clock(self) -> int:
        played = [int(m.ts[self._next[s] - 1]) for s, m in self.markets.items() if self._next[s]]
        if played:
            return max(played)
        return min(int(m.ts[0]) for m in self.markets.values()) - 1

    def _last_bar(self, symbol: str) -> tuple[int, dict[str, float]] | None:
        i = self._next[symbol] - 1
        m = self.markets[symbol]
        return (int(m.ts[i]), m.bar(i)) if i >= 0 else None

    def _ended(self, symbol: str) -> bool:
        return self._next[symbol] >= len(self.markets[symbol])

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Listen, and start the playback thread (it plays when `play()` is called, at once
        with start="now", or on the first market data subscription with "subscribe")."""
        import quickfix as fix

        store = self.state_dir / "fix-store"
        store.mkdir(parents=True, exist_ok=True)
        settings = acceptor_settings(self.comp_id, self.clients, self.host, self.port, store,
                                     self.heartbeat_s,
                                     self.state_dir / "fix-log" if self.file_log else None)
        self._settings = settings
        self._store_factory = fix.FileStoreFactory(settings)
        self._app = _application(self)
        try:
            if self.file_log:
                self._log_factory = fix.FileLogFactory(settings)
                acceptor = fix.SocketAcceptor(self._app, self._store_factory, settings,
                                              self._log_factory)
            else:
                acceptor = fix.SocketAcceptor(self._app, self._store_factory, settings)
            acceptor.start()
        except (fix.ConfigError, fix.RuntimeError, RuntimeError) as exc:
            raise v.VenueError(f"local exchange: cannot listen on {self.host}:{self.port} "
                               f"({' '.join(str(exc).split())})") from None
        self._acceptor = acceptor
        self._sender = threading.Thread(target=self._send_loop, name="exchange-sender",
                                        daemon=True)
        self._sender.start()
        self._thread = threading.Thread(target=self._play_all, name="exchange-playback",
                                        daemon=True)
        self._thread.start()
        self._event("listening", address=f"{self.host}:{self.port}", comp_id=self.comp_id,
                    clients=self.clients)
        if self.start_mode == "now":
            self.play()

    def play(self) -> None:
        self._go.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until every bar is played; True when done."""
        return self._done.wait(timeout_s)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def stop(self) -> None:
        """Stop playing, log every session out, close the journals. Idempotent."""
        self._stop.set()
        self._go.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        acceptor, self._acceptor = self._acceptor, None
        if acceptor is not None:
            self._flush_outbound(LOGOUT_WAIT_S)
            for acct in self.accounts.values():
                _logout(acct.sid, lambda name=acct.name: name in self._logged_on,
                        LOGOUT_WAIT_S)  # fmt: skip
        # the sender ends before the acceptor: no send races QuickFIX tearing its sessions
        # down; what fromApp queues after this is sent from its own thread, as before start
        sender, self._sender = self._sender, None
        if sender is not None:
            self._closing.set()
            self._pending.set()
            sender.join()
            self._send_batch()
        if acceptor is not None:
            acceptor.stop(True)
        with self._lock:
            for acct in self.accounts.values():
                for sim in acct.venues.values():
                    sim.close()
                if acct.terms is not None and not acct.terms.closed:
                    acct.terms.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _event(self, kind: str, **data: Any) -> None:
        if self.on_event is not None:
            try:
                self.on_event(kind, data)
            except Exception:
                log.exception("exchange: on_event failed")

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"bars": self.bars_played, "sessions": self.sessions_closed,
                    "orders": self.orders, "clock": self.clock,
                    "logged_on": sorted(self._logged_on),
                    "positions": {c: self._positions(a) for c, a in self.accounts.items()},
                    "done": self.done}  # fmt: skip

    # --- playback -------------------------------------------------------------------------

    def _schedule(self) -> list[tuple[int, str, int]]:
        items = []
        for s, m in self.markets.items():
            items += [(int(m.ts[i]), s, i) for i in range(self._next[s], len(m))]
        items.sort()
        return items

    def _typical_gap(self) -> int:
        gaps = [int(np.median(np.diff(m.ts))) for m in self.markets.values() if len(m) > 1]
        return max(min(gaps), 1) if gaps else 60_000_000_000

    def _play_all(self) -> None:
        try:
            self._go.wait()
            if self._stop.is_set():
                return
            items = self._schedule()
            self._event("playing", bars=len(items), speed=self.speed)
            cap = self._typical_gap()
            prev_ts, due = None, time.monotonic()
            for ts, symbol, i in items:
                if self.speed is not None and prev_ts is not None:
                    due += min(ts - prev_ts, cap) / 1e9 / self.speed
                    wait = due - time.monotonic()
                    if wait > 0 and self._stop.wait(wait):
                        return
                if self._stop.is_set():
                    return
                if self.pause_when_away and not self._wait_for_clients(symbol, i):
                    return
                due = max(due, time.monotonic())
                prev_ts = ts
                self._play_bar(symbol, i)
            self._done.set()
            self._event("ended", bars=self.bars_played, orders=self.orders)
        except Exception:
            log.exception("exchange: playback failed")
            self._event("failed", bars=self.bars_played)

    def _wait_for_clients(self, symbol: str, i: int) -> bool:
        """Hold bar i of `symbol` until a client is logged on (`pause_when_away`) and, in
        lockstep, until every logged-on subscriber said it is done with bar i-1 (a TestRequest
        `bar-done:SYMBOL:TS`, which `FixMarketData` sends when it is asked for the next bar).
        False when the exchange stops."""
        prev = int(self.markets[symbol].ts[i - 1]) if i else None
        with self._acks:
            while not self._stop.is_set():
                try:
                    on = [c for c in list(self._logged_on)
                          if symbol in list(self._subs.get(c, {}).values())]  # fmt: skip
                except RuntimeError:  # a logon or logout changed them meanwhile: look again
                    continue
                if on and (not self.lockstep or prev is None or all(
                        self._acked.get(c, {}).get(symbol, -1) >= prev for c in on)):  # fmt: skip
                    return True
                self._acks.wait(0.05)
        return False

    def _from_admin(self, message: Any, sid: Any) -> None:
        """A client's TestRequest `bar-done:SYMBOL:TS`: it is done with that bar (lockstep)."""
        f = Fields.of(message)
        text = f.get(112) if f.msg_type == "1" else None
        if not text or not text.startswith(codec.BAR_DONE):
            return
        symbol, _, ts = text[len(codec.BAR_DONE):].rpartition(":")
        if not ts.isdigit():
            return
        with self._acks:
            done = self._acked.setdefault(sid.getTargetCompID().getValue(), {})
            done[symbol] = max(done.get(symbol, -1), int(ts))
            self._acks.notify_all()

    def _play_bar(self, symbol: str, i: int) -> None:
        """Bar i: the working orders meet its open, high and low; its fills go out, then the
        bar itself. At a session's last bar the closing auction opens after the bar is
        published: orders at the close fill at that close, those resting and those that come
        before the next bar (a trader decides to flatten on seeing the session's last bar, as
        the backtest does); DAY orders expire when the next bar comes."""
        m = self.markets[symbol]
        ts, bar = int(m.ts[i]), m.bar(i)
        last = i == len(m) - 1
        with self._lock:
            for acct in self.accounts.values():
                sim = acct.venues[symbol]
                sim.on_bar(symbol, ts, bar["open"], bar["high"], bar["low"])
                self._emit(acct, sim)
            self._next[symbol] = i + 1
            self.clock = max(self.clock, ts)
            self.bars_played += 1
            self.sessions_closed += bool(m.session_end[i])
            for client, subs in list(self._subs.items()):
                if client not in self._logged_on:
                    continue
                sid = self.accounts[client].sid
                for req_id, sym in list(subs.items()):
                    if sym == symbol:
                        self._outbound.append((sid, codec.md_incremental(req_id, m.contract,
                                                                         ts, bar)))
            for acct in self.accounts.values():
                sim = acct.venues[symbol]
                if m.session_end[i] or last:
                    sim.on_close(symbol, ts, bar["close"])  # opens the closing auction
                    self._emit(acct, sim)
                if m.session_end[i]:
                    sim.end_session(ts)
                    self._emit(acct, sim)
                if last:
                    sim.end_feed(symbol, ts, bar["close"])
                    self._emit(acct, sim)
            if last:
                for client, subs in list(self._subs.items()):
                    if client in self._logged_on:
                        for req_id, sym in list(subs.items()):
                            if sym == symbol:
                                self._outbound.append((self.accounts[client].sid,
                                                       self._end_status(symbol, req_id)))
        self._drain()
        if self.bars_played % 100 == 0 or last:
            self._event("progress", bars=self.bars_played, clock=self.clock,
                        sessions=self.sessions_closed, orders=self.orders)

    def _end_status(self, symbol: str, req_id: str | None) -> Any:
        return codec.security_status(symbol, req_id, self.clock,
                                     f"end of data: no more {symbol} bars will come")

    # --- reports out ----------------------------------------------------------------------

    def _emit(self, acct: _Account, sim: SimulatedVenue,
              answer: tuple[str, str] | None = None) -> None:  # fmt: skip
        """The venue's new reports as FIX messages into the outbound queue (`_lock` held).
        `answer`: (ClOrdID, OrigClOrdID) of the cancel or replace request being answered."""
        new = sim.reports()
        if not new:
            return
        history = sim.history
        first = len(history) - len(new)
        for k, report in enumerate(new):
            view = acct.orders.get(report.client_order_id)
            if view is None:
                log.error("exchange: %s report for an order it has no terms for: %s",
                          acct.name, report)  # fmt: skip
                continue
            view.apply(report)
            msg = self._message(acct, view, report, f"{view.symbol}-{first + k + 1}", answer)
            self._outbound.append((acct.sid, msg))
        self._unsynced.add(sim)

    def _message(self, acct: _Account, view: _View, r: v.VenueReport, exec_id: str,
                 answer: tuple[str, str] | None) -> Any:  # fmt: skip
        contract = self.markets[view.symbol].contract
        cl, orig = answer if answer is not None else (view.cid, None)
        if isinstance(r, v.CancelRejected | v.ModifyRejected):
            return codec.message("9", [
                (37, view.venue_order_id), (11, cl), (41, orig or view.cid),
                (39, view.ord_status()), (434, "1" if isinstance(r, v.CancelRejected) else "2"),
                (102, "0"), (58, r.reason), (60, codec.fix_time(r.ts_ns)),
            ])  # fmt: skip
        common = self._terms(view, contract)
        common.update(cl_ord_id=cl, orig_cl_ord_id=orig, exec_id=exec_id, ts_ns=r.ts_ns)
        if isinstance(r, v.Accepted):
            return codec.execution_report(**common, exec_type="0", ord_status="0")
        if isinstance(r, v.Filled):
            common["exec_id"] = f"{view.symbol}-{r.fill_id}"
            return codec.execution_report(**common, exec_type="F",
                                          ord_status=view.ord_status(), last_qty=r.quantity,
                                          last_px=codec.price_text(contract, r.price_ticks))
        if isinstance(r, v.Triggered):
            return codec.execution_report(**common, exec_type="L", ord_status=view.ord_status())
        if isinstance(r, v.Canceled):
            return codec.execution_report(**common, exec_type="4", ord_status="4", text=r.reason)
        if isinstance(r, v.Expired):
            return codec.execution_report(**common, exec_type="C", ord_status="C")
        if isinstance(r, v.Updated):
            return codec.execution_report(**common, exec_type="5", ord_status=view.ord_status())
        if isinstance(r, v.Rejected):
            return codec.execution_report(**common, exec_type="8", ord_status="8",
                                          text=r.reason, rej_reason="99")
        raise TypeError(f"no FIX message for {type(r).__name__}")

    def _terms(self, view: _View, contract: Contract) -> dict[str, Any]:
        return {"order_id": view.venue_order_id if view.venue_order_id == _NONE
                else f"{view.symbol}-{view.venue_order_id}",
                "symbol": view.symbol, "side": codec.SIDE[view.side],
                "order_qty": view.quantity, "cum_qty": view.filled,
                "avg_px": view.avg_px(contract), "ord_type": codec.ORD_TYPE[view.order_type],
                "tif": codec.TIF[view.tif],
                "price": None if view.limit_ticks is None
                else codec.price_text(contract, view.limit_ticks),
                "stop_px": None if view.stop_ticks is None
                else codec.price_text(contract, view.stop_ticks)}  # fmt: skip

    def _drain(self) -> None:
        """Hand the outbound queue to the sender (called after `_lock` is released); without a
        sender (the exchange not started) send it here."""
        if self._sender is None:
            self._send_batch()
        else:
            self._pending.set()

    def _send_loop(self) -> None:
        """The sender thread: one sync and one batch at a time, until the exchange stops."""
        while True:
            self._pending.wait()
            self._pending.clear()
            try:
                self._send_batch()
            except Exception:  # a failure sending one batch must not silence the exchange
                log.exception("exchange: sending a batch failed")
                with self._lock:
                    self._sending = False
            if self._closing.is_set():
                with self._lock:
                    if not self._outbound:
                        return
                self._pending.set()

    def _send_batch(self) -> None:
        """Sync the journals the queued reports came from, then send the queue in order. One
        fdatasync a journal for every order that arrived since the last batch."""
        import quickfix as fix

        with self._lock:
            batch = list(self._outbound)
            self._outbound.clear()
            unsynced, self._unsynced = self._unsynced, set()
            self._sending = bool(batch)
        try:
            for sim in unsynced:
                sim.sync()
        except (VenueJournalError, OSError) as exc:
            log.critical("exchange: cannot sync a journal (%s): stopping before the session "
                         "acknowledges what it could lose", exc)
            logging.shutdown()
            os._exit(JOURNAL_FAILED_EXIT)
        on_wire = self.on_wire
        with self._send_lock:
            for sid, msg in batch:
                bar = _md_bar(msg) if on_wire is not None else None
                sent_ns = time.perf_counter_ns()
                try:
                    self._send_message(msg, sid)
                except fix.SessionNotFound:
                    log.error("exchange: no session %s", sid)
                if bar is not None and on_wire is not None:
                    on_wire("md", bar, sent_ns)
        with self._lock:
            self._sending = False

    @staticmethod
    def _send_message(msg: Any, sid: Any) -> None:
        import quickfix as fix

        fix.Session.sendToTarget(msg, sid)

    def _flush_outbound(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until the sender has sent everything queued."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._outbound and not self._sending:
                    return
            self._pending.set()
            time.sleep(0.002)

    # --- requests in ----------------------------------------------------------------------

    def _from_app(self, message: Any, sid: Any) -> None:
        """QuickFIX's thread; never raises."""
        arrived_ns = time.perf_counter_ns() if self.on_wire is not None else 0
        client = sid.getTargetCompID().getValue()
        f = None
        try:
            f = Fields.of(message)
            acct = self.accounts[client]
            handler = self._handlers.get(f.msg_type)
            with self._lock:
                if handler is None:
                    self._outbound.append((sid, codec.business_reject(
                        f, "3", f"message type {f.msg_type} is not supported by the local "
                        "exchange")))  # fmt: skip
                else:
                    handler(self, acct, f)
        except (VenueJournalError, OSError) as exc:
            log.critical("exchange: cannot journal (%s): stopping before the session "
                         "acknowledges what it could lose", exc)
            logging.shutdown()
            os._exit(JOURNAL_FAILED_EXIT)
        except FixFieldError as exc:
            if f is not None:
                with self._lock:
                    self._outbound.append((sid, codec.business_reject(f, "0", str(exc))))
        except Exception as exc:
            log.exception("exchange: failed on a message from %s", client)
            if f is not None:
                with self._lock:
                    self._outbound.append((sid, codec.business_reject(f, "4", str(exc)[:200])))
        self._drain()
        if arrived_ns and f is not None and f.msg_type == "D" and self.on_wire is not None:
            self.on_wire("order", f.get(11) or "", arrived_ns)

    def _reject_new(self, acct: _Account, f: Fields, view: _View | None, code: str,
                    why: str) -> None:  # fmt: skip
        cid = f.req(11)
        if view is not None:
            view.state, view.reason = "rejected", why
            acct.orders[cid] = view
            self._write_terms(acct, view, rejected=why)
        self._outbound.append((acct.sid, codec.execution_report(
            cl_ord_id=cid, order_id=_NONE, exec_id=f"R-{cid}", exec_type="8", ord_status="8",
            symbol=f.get(55) or "[N/A]", side=f.get(54) or "1",
            order_qty=view.quantity if view is not None else 0, cum_qty=0, avg_px="0",
            ts_ns=self.clock, text=why, rej_reason=code)))  # fmt: skip

    def _write_terms(self, acct: _Account, view: _View, rejected: str | None = None) -> None:
        """The order's terms line, flushed (a killed exchange keeps it); synced only for an
        order refused here. An order the venue takes is synced with the venue's journal line,
        which holds the same terms (`SimulatedVenue.taken`: the view is rebuilt from them when
        a power cut lost this line), so an order costs one sync, not two."""
        rec = {"cid": view.cid, "symbol": view.symbol, "side": view.side.value,
               "quantity": view.quantity, "type": view.order_type.value,
               "tif": view.tif.value, "limit": view.limit_ticks, "stop": view.stop_ticks,
               "rejected": rejected}  # fmt: skip
        acct.terms.write(json.dumps(rec) + "\n")
        acct.terms.flush()
        if rejected is not None:
            os.fsync(acct.terms.fileno())

    def _known(self, acct: _Account, cid: str) -> bool:
        view = acct.orders.get(cid)
        return view is not None and (view.state == "rejected" or acct.venue_of(cid) is not None)

    def _on_new(self, acct: _Account, f: Fields) -> None:
        cid = f.req(11)
        if self._known(acct, cid):
            log.info("exchange: %s sent order %s again%s: ignored", acct.name, cid,
                     " (a resend)" if f.poss_dup else "")  # fmt: skip
            return
        self.orders += 1
        symbol = f.req(55)
        market = self.markets.get(symbol)
        if market is None:
            self._reject_new(acct, f, None, "1", f"unknown symbol {symbol!r}; this exchange "
                             f"plays {', '.join(sorted(self.markets))}")
            return
        try:
            view = self._parse_order(cid, market.contract, f)
        except FixFieldError as exc:
            self._reject_new(acct, f, None, "99", str(exc))
            return
        self._write_terms(acct, view)
        acct.orders[cid] = view
        sim = acct.venues[symbol]
        sim.submit(_Ask(cid, symbol, view.side, view.quantity, view.order_type, view.tif,
                        view.limit_ticks, view.stop_ticks, self.clock))  # fmt: skip
        if cid not in sim.taken:  # refused (its data ended): no venue line holds the terms
            os.fsync(acct.terms.fileno())
        self._emit(acct, sim)
        self._event("order", client=acct.name, id=cid, symbol=symbol, side=view.side.value,
                    quantity=view.quantity, type=view.order_type.value)

    def _parse_order(self, cid: str, contract: Contract, f: Fields) -> _View:
        side = codec.SIDE_OF.get(f.req(54))
        if side is None:
            raise FixFieldError(f"side {f.get(54)!r}: the exchange takes buy (1) and sell (2)")
        qty = codec.qty_of(f.req(38))
        if qty <= 0:
            raise FixFieldError(f"quantity {f.get(38)} must be > 0")
        order_type = codec.ORD_TYPE_OF.get(f.req(40))
        if order_type is None:
            raise FixFieldError(f"OrdType {f.get(40)!r}: the exchange takes market (1), limit "
                                "(2) and stop (3)")
        tif = codec.TIF_OF.get(f.get(59, "0"))
        if tif is None:
            raise FixFieldError(f"TimeInForce {f.get(59)!r}: the exchange takes day (0), GTC "
                                "(1), IOC (3) and at the close (7)")
        if tif is TimeInForce.ATC and order_type is not OrderType.MARKET:
            raise FixFieldError("only a market order can be at the close")
        if order_type is OrderType.STOP and tif is TimeInForce.IOC:
            raise FixFieldError("a stop order cannot be IOC")
        limit = codec.ticks_of(contract, f.req(44)) if order_type is OrderType.LIMIT else None
        stop = codec.ticks_of(contract, f.req(99)) if order_type is OrderType.STOP else None
        return _View(cid, contract.symbol, side, qty, order_type, tif, limit, stop)

    def _request_target(self, acct: _Account, f: Fields) -> tuple[str, str, _View | None]:
        alias, cid = f.req(11), codec.root_id(f.req(41))
        view = acct.orders.get(cid)
        return alias, cid, view if acct.venue_of(cid) is not None else None

    def _unknown_cxl(self, acct: _Account, alias: str, cid: str, to: str) -> None:
        self._outbound.append((acct.sid, codec.message("9", [
            (37, _NONE), (11, alias), (41, cid), (39, "8"), (434, to), (102, "1"),
            (58, f"unknown order {cid}"), (60, codec.fix_time(self.clock)),
        ])))  # fmt: skip

    def _on_cancel(self, acct: _Account, f: Fields) -> None:
        alias, cid, view = self._request_target(acct, f)
        if view is None:
            self._unknown_cxl(acct, alias, cid, "1")
            return
        sim = acct.venues[view.symbol]
        n = codec.request_number(alias) or 0
        sim.cancel(_Ask(cid, view.symbol, view.side, 0, view.order_type, view.tif, None, None,
                        self.clock, requests=n))  # fmt: skip
        self._emit(acct, sim, (alias, cid))

    def _on_replace(self, acct: _Account, f: Fields) -> None:
        alias, cid, view = self._request_target(acct, f)
        if view is None:
            self._unknown_cxl(acct, alias, cid, "2")
            return
        contract = self.markets[view.symbol].contract
        n = codec.request_number(alias) or 0
        try:
            if codec.ORD_TYPE_OF.get(f.req(40)) is not view.order_type:
                raise FixFieldError("a replace cannot change the order type")
            qty = codec.qty_of(f.req(38))
            if qty <= view.filled:
                raise FixFieldError(f"quantity {qty} must exceed the {view.filled} filled")
            limit = (codec.ticks_of(contract, f.req(44))
                     if view.order_type is OrderType.LIMIT else None)  # fmt: skip
            stop = (codec.ticks_of(contract, f.req(99))
                    if view.order_type is OrderType.STOP else None)  # fmt: skip
        except FixFieldError as exc:
            self._outbound.append((acct.sid, codec.message("9", [
                (37, view.venue_order_id), (11, alias), (41, cid), (39, view.ord_status()),
                (434, "2"), (102, "99"), (58, str(exc)), (60, codec.fix_time(self.clock)),
            ])))  # fmt: skip
            return
        sim = acct.venues[view.symbol]
        sim.modify(_Ask(cid, view.symbol, view.side, 0, view.order_type, view.tif, None, None,
                        self.clock, requests=n), qty, limit, stop)  # fmt: skip
        self._emit(acct, sim, (alias, cid))

    def _status_report(self, acct: _Account, view: _View, exec_id: str,
                       mass: tuple[str, int, bool] | None = None) -> Any:  # fmt: skip
        common = self._terms(view, self.markets[view.symbol].contract)
        return codec.execution_report(**common, cl_ord_id=view.cid, exec_id=exec_id,
                                      exec_type="I", ord_status=view.ord_status(),
                                      ts_ns=self.clock, text=view.reason or None,
                                      mass_req=mass)  # fmt: skip

    def _on_status(self, acct: _Account, f: Fields) -> None:
        cid = codec.root_id(f.req(11))
        view = acct.orders.get(cid)
        exec_id = f"S-{time.time_ns()}-{next(self._ids)}"
        if view is None or not self._known(acct, cid):
            self._outbound.append((acct.sid, codec.execution_report(
                cl_ord_id=cid, order_id=_NONE, exec_id=exec_id, exec_type="I", ord_status="8",
                symbol=f.get(55) or "[N/A]", side=f.get(54) or "1", order_qty=0, cum_qty=0,
                avg_px="0", ts_ns=self.clock, text=f"unknown order {cid}", rej_reason="5")))
            return
        self._outbound.append((acct.sid, self._status_report(acct, view, exec_id)))

    def _on_mass_status(self, acct: _Account, f: Fields) -> None:
        req_id = f.req(584)
        if f.req(585) not in ("7", "1"):
            self._outbound.append((acct.sid, codec.business_reject(
                f, "0", f"MassStatusReqType {f.get(585)}: the exchange answers 7 (all orders) "
                "and 1 (one symbol)", req_id)))  # fmt: skip
            return
        symbol = f.get(55) if f.get(585) == "1" else None
        working = [o for o in acct.orders.values() if o.state == "working"
                   and acct.venue_of(o.cid) is not None and symbol in (None, o.symbol)]
        if not working:
            self._outbound.append((acct.sid, codec.execution_report(
                cl_ord_id=_NONE, order_id=_NONE, exec_id=f"M-{req_id}-0", exec_type="I",
                ord_status="0", symbol=symbol or "[N/A]", side="1", order_qty=0, cum_qty=0,
                avg_px="0", ts_ns=self.clock, mass_req=(req_id, 0, True))))  # fmt: skip
            return
        for k, view in enumerate(working, 1):
            self._outbound.append((acct.sid, self._status_report(
                acct, view, f"M-{req_id}-{k}", (req_id, len(working), k == len(working)))))

    def _positions(self, acct: _Account) -> dict[str, int]:
        out: dict[str, int] = {}
        for sim in acct.venues.values():
            for s, q in sim.positions.items():
                if q:
                    out[s] = out.get(s, 0) + q
        return out

    def _on_positions(self, acct: _Account, f: Fields) -> None:
        req_id = f.req(710)
        held = self._positions(acct)
        date = codec.fix_time(self.clock)[:8]
        head = [(721, f"P-{req_id}"), (710, req_id), (727, str(len(held)))]
        if f.req(724) != "0":
            self._outbound.append((acct.sid, codec.message("AO", [
                *head, (728, "4"), (729, "2"), (1, acct.name), (581, "1"),
                (58, "the exchange answers positions requests (PosReqType 0) only")])))
            return
        self._outbound.append((acct.sid, codec.message("AO", [
            *head, (728, "0" if held else "2"), (729, "0"), (1, acct.name), (581, "1")])))
        for k, (symbol, qty) in enumerate(sorted(held.items()), 1):
            market = self.markets[symbol]
            last = self._last_bar(symbol)
            settle = codec.price_text(market.contract,
                                      market.contract.to_ticks(last[1]["close"] if last
                                                               else market.close[0]))
            msg = codec.message("AP", [
                (721, f"P-{req_id}-{k}"), (710, req_id), (727, str(len(held))), (728, "0"),
                (715, date), (1, acct.name), (581, "1"), (55, symbol), (730, settle),
                (731, "1"), (734, settle)])  # fmt: skip
            codec._group(msg, codec._groups().PositionReport.NoPositions,
                         [[(703, "TOT"), (704, str(max(qty, 0))), (705, str(max(-qty, 0)))]])
            self._outbound.append((acct.sid, msg))

    def _on_md(self, acct: _Account, f: Fields) -> None:
        req_id = f.req(262)
        kind = f.req(263)
        subs = self._subs.setdefault(acct.name, {})
        if kind == "2":
            subs.pop(req_id, None)
            return
        if kind not in ("0", "1"):
            self._outbound.append((acct.sid, codec.md_reject(
                req_id, "4", f"SubscriptionRequestType {kind} is not supported")))
            return
        symbols = [g.get(55) for g in f.groups(55)]
        unknown = [s for s in symbols if s not in self.markets]
        if unknown or not symbols:
            self._outbound.append((acct.sid, codec.md_reject(
                req_id, "0", f"unknown symbol {', '.join(map(str, unknown)) or '(none)'}; this "
                f"exchange plays {', '.join(sorted(self.markets))}")))  # fmt: skip
            return
        for symbol in symbols:
            last = self._last_bar(symbol)
            contract = self.markets[symbol].contract
            self._outbound.append((acct.sid, codec.md_snapshot(
                req_id, contract, *(last if last is not None else (None, None)))))
            if self._ended(symbol):
                self._outbound.append((acct.sid, self._end_status(symbol, req_id)))
            elif kind == "1":
                subs[req_id] = symbol
        if kind == "1" and self.start_mode == "subscribe" and not self._go.is_set():
            self._go.set()

    _handlers: ClassVar[dict[str, Callable[..., None]]] = {
        "D": _on_new, "F": _on_cancel, "G": _on_replace, "H": _on_status,
        "AF": _on_mass_status, "AN": _on_positions, "V": _on_md,
    }  # fmt: skip

    # --- sessions -------------------------------------------------------------------------

    def _on_create(self, sid: Any) -> None:
        acct = self.accounts.get(sid.getTargetCompID().getValue())
        if acct is not None:
            acct.sid = sid

    def _on_logon(self, sid: Any) -> None:
        client = sid.getTargetCompID().getValue()
        with self._lock:
            self._logged_on.add(client)
        self._event("logon", client=client)

    def _on_logout(self, sid: Any) -> None:
        # QuickFIX holds the session's mutex here: no lock that a sender may hold
        client = sid.getTargetCompID().getValue()
        self._logged_on.discard(client)
        self._subs.pop(client, None)
        self._event("logout", client=client)


def _md_bar(msg: Any) -> str | None:
    """The "SYMBOL:TS" of a market data incremental refresh (X) carrying a bar, else None."""
    if msg.getHeader().getField(35) != "X":
        return None
    bar = codec.bar_of(Fields.of(msg), 279)
    return None if bar is None else f"{bar.symbol}:{bar.ts_ns}"


def _application(exchange: LocalExchange) -> Any:
    import quickfix as fix

    class Application(fix.Application):
        def onCreate(self, sid):
            exchange._on_create(sid)

        def onLogon(self, sid):
            exchange._on_logon(sid)

        def onLogout(self, sid):
            exchange._on_logout(sid)

        def toAdmin(self, message, sid):
            pass

        def fromAdmin(self, message, sid):
            try:
                exchange._from_admin(message, sid)
            except Exception:  # an exception must never leave a QuickFIX callback
                log.exception("exchange: fromAdmin")

        def toApp(self, message, sid):
            pass

        def fromApp(self, message, sid):
            exchange._from_app(message, sid)

    return Application()
