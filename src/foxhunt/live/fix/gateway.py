"""`FixVenue`: a FIX 4.4 initiator session as a `LiveVenue` for the OMS.

QuickFIX runs the session layer on its own thread: logon and logout, heartbeats and test
requests, sequence numbers kept in a `FileStore` across restarts, resend requests and
sequence-reset gap fills, reconnecting every ReconnectInterval. This module is the
application layer on top: orders out (`codec`), execution reports in.

Durability: QuickFIX counts an incoming message as processed (its sequence number advances,
and a resend will never ask for it again) when `fromApp` returns. So every report is appended
to this venue's journal and flushed inside `fromApp`, before it returns: a killed process
loses no report the exchange considers delivered, and `history` reads the journal. A report
whose loss a status request would repair (`STATUS_RESTORES`: the order accepted, canceled,
expired or rejected; reconciliation asks about every order the log has as open at the next
start and applies what the venue says) is only flushed; every other one (a fill above all:
its price and id are in no status) is fsync'd too, so a power cut loses none of them, and
each fsync carries the lines written before it.
A resend (PossDupFlag=Y) of a report already journaled (same ExecID) is dropped. If the
journal cannot be written the process stops at once (`os._exit`), before QuickFIX advances the
sequence number: the exchange resends the report to the next run. A journal that cannot keep a
promise must not pretend to.

Threads: `submit`, `cancel`, `modify` and the queries run on the caller's thread and call
`Session.sendToTarget` (which releases the GIL and takes the session's mutex). QuickFIX calls
the application on its thread, and calls `toApp`/`toAdmin`/`onLogout` while holding that same
mutex, so those callbacks take no lock at all, and `fromApp` takes only `_lock`, which no
thread holds while calling into QuickFIX. `reports()` drains a queue and never blocks. A Python
exception must never leave a QuickFIX callback (it aborts or wedges the C++ engine): each
callback logs and swallows what it cannot handle.

Reconnects are QuickFIX's; after each logon but the first, `take_reconnected()` turns True
once and `on_reconnect` (if given) is called on QuickFIX's thread (it must not block): the
live loop then reconciles (`request_status`, `open_orders`, `positions`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from foxhunt.execution import venue as v
from foxhunt.fileio import read_json_lines
from foxhunt.live.fix import codec
from foxhunt.live.fix.codec import Fields, FixFieldError
from foxhunt.live.fix.settings import BEGIN_STRING, SessionConfig, load_session_file
from foxhunt.orders.contract import Contract
from foxhunt.orders.order import Order

log = logging.getLogger(__name__)

STATUS_RESTORES = (v.Accepted, v.Canceled, v.Expired, v.Rejected)
"""Reports a power cut may take from the journal: an order status request at the next start
restores what each says (`live.reconcile`); QuickFIX's store only flushes its sequence
numbers too, so after a power cut the exchange may or may not send them again."""
JOURNAL_FAILED_EXIT = 75
"""The exit status when the report journal cannot be written (EX_TEMPFAIL)."""
_N_A = "[N/A]"


LOGOUT_WAIT_S = 2.0
"""How long `close` waits for the venue to answer our Logout (QuickFIX's own stop polls once a
second for up to ten: a rehearsal would wait a second at each stop)."""


def _logout(sid: Any, logged_on: Callable[[], bool], wait_s: float) -> None:
    """Send a Logout on the session and wait (briefly) until the session is down."""
    import quickfix as fix

    session = fix.Session.lookupSession(sid) if sid is not None else None
    if session is None or not logged_on():
        return
    # a Logout now (Session.logout() waits for QuickFIX's one-second timer to send it)
    fix.Session.sendToTarget(codec.message("5", [(58, "closing")]), sid)
    deadline = time.monotonic() + wait_s
    while logged_on() and time.monotonic() < deadline:
        time.sleep(0.01)


class _Collector:
    """The answers to one query (mass status, positions), filled on QuickFIX's thread."""

    def __init__(self) -> None:
        self.messages: list[Fields] = []
        self.expected: int | None = None
        self.done = threading.Event()


def _stop_quietly(initiator: Any) -> None:
    try:
        initiator.stop()
    except Exception:  # at exit nothing more can be done about it
        log.warning("stopping the FIX initiator at exit failed", exc_info=True)


def _application(venue: FixVenue) -> Any:
    """The QuickFIX application of `venue` (a SWIG director class, so it is defined where
    quickfix is imported: importing this module stays cheap). It holds the venue weakly."""
    import quickfix as fix

    ref = weakref.ref(venue)

    class Application(fix.Application):
        def onCreate(self, sid):
            pass

        def onLogon(self, sid):
            venue_ = ref()
            if venue_ is not None:
                venue_._on_logon()

        def onLogout(self, sid):
            venue_ = ref()
            if venue_ is not None:
                venue_._on_logout()

        def toAdmin(self, message, sid):
            venue_ = ref()
            if venue_ is not None:
                venue_._to_admin(message)

        def fromAdmin(self, message, sid):
            venue_ = ref()
            if venue_ is not None:
                venue_._from_admin(message)

        def toApp(self, message, sid):
            pass

        def fromApp(self, message, sid):
            venue_ = ref()
            if venue_ is not None:
                venue_._from_app(message)

    return Application()


class FixVenue:
    """One FIX 4.4 initiator session (`session_file`, a QuickFIX settings file) as a venue.

    `contracts` are the symbols it trades (prices go out and come back in ticks). The report
    journal defaults to `<FileStorePath>/<SenderCompID>-<TargetCompID>.reports.jsonl`."""

    def __init__(
        self,
        session_file: Path | str | SessionConfig,
        contracts: Mapping[str, Contract],
        *,
        journal: Path | str | None = None,
        on_reconnect: Callable[[], None] | None = None,
    ):
        self.config = (session_file if isinstance(session_file, SessionConfig)
                       else load_session_file(session_file))  # fmt: skip
        self.contracts = dict(contracts)
        self.on_reconnect = on_reconnect
        self.name = f"FIX session {self.config.sender}->{self.config.target}"
        self.journal_path = (Path(journal) if journal is not None else self.config.store
                             / f"{self.config.sender}-{self.config.target}.reports.jsonl")
        self._lock = threading.Lock()
        self._logon_changed = threading.Condition(self._lock)
        self._queue: deque[v.VenueReport] = deque()
        self._history: list[v.VenueReport] = []
        self._keys: set[str] = set()
        self._aliases: dict[str, str] = {}
        self._orders: dict[str, tuple[str, str]] = {}  # cid -> (symbol, FIX side)
        self._collectors: dict[str, _Collector] = {}
        self._feeds: list[Any] = []
        self._ids = itertools.count(1)
        self._logged_on = False
        self._reconnected = threading.Event()
        self.logons = 0
        self.refused = 0  # reports that could not be read (logged, not handed on)
        self._initiator: Any = None
        self._sid: Any = None
        self._finalizer: Any = None
        self._journal = self._open_journal()

    # --- the journal ----------------------------------------------------------------------

    def _open_journal(self):
        path = self.journal_path

        def damaged(message: str) -> v.VenueError:
            return v.VenueError(f"{self.name}: journal {message}; move it away to start "
                                "afresh (the exchange resends nothing older than the FIX store)")

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            read_json_lines(path, self._restore, damaged)
            return open(path, "a", encoding="utf-8")
        except OSError as exc:
            raise v.VenueError(f"{self.name}: journal {path}: {exc.strerror or exc}") from None

    def _restore(self, rec: Any) -> None:
        if not isinstance(rec, dict):
            raise TypeError("not an object")
        if "sent" in rec:
            cid, symbol, side = rec["cid"], rec["symbol"], rec["side"]
            self._orders[cid] = (symbol, side)
            if rec.get("alias"):
                self._aliases[rec["alias"]] = cid
            return
        report = v.report_from_json(rec)
        self._history.append(report)
        if rec.get("key"):
            self._keys.add(rec["key"])

    def _append(self, rec: dict[str, Any], sync: bool) -> None:
        """One journal line (the caller holds `_lock`); with `sync`, on disk before return."""
        try:
            self._journal.write(json.dumps(rec, default=str) + "\n")
            self._journal.flush()
            if sync:
                os.fsync(self._journal.fileno())
        except (OSError, ValueError) as exc:
            log.critical("%s: cannot write the report journal %s (%s): stopping before the "
                         "session acknowledges a report it could lose", self.name,
                         self.journal_path, exc)  # fmt: skip
            logging.shutdown()
            os._exit(JOURNAL_FAILED_EXIT)

    # --- the session ----------------------------------------------------------------------

    def connect(self, timeout_s: float) -> None:
        """Start the session and wait for the logon; VenueError when none comes in time."""
        import quickfix as fix

        if self._initiator is None:
            settings = self.config.quickfix_settings()
            try:
                store = fix.FileStoreFactory(settings)
                self._app = _application(self)
                if self.config.file_log is not None:
                    self._log_factory = fix.FileLogFactory(settings)
                    initiator = fix.SocketInitiator(self._app, store, settings, self._log_factory)
                else:
                    initiator = fix.SocketInitiator(self._app, store, settings)
                self._store_factory = store
                self._settings = settings
                initiator.start()
            except (fix.ConfigError, fix.RuntimeError, RuntimeError) as exc:
                raise v.VenueError(f"{self.name} ({self.config.path}): QuickFIX refused it: "
                                   f"{' '.join(str(exc).split())}") from None
            self._initiator = initiator
            self._sid = fix.SessionID(BEGIN_STRING, self.config.sender, self.config.target)
            self._finalizer = weakref.finalize(self, _stop_quietly, initiator)
        deadline = time.monotonic() + timeout_s
        with self._logon_changed:
            while not self._logged_on:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._logon_changed.wait(left)
            if self._logged_on:
                return
        where = self.config.file_log or "FileLogPath in the session file to see why"
        self.close()
        raise v.VenueError(f"{self.name}: no logon from {self.config.address} within "
                           f"{timeout_s:g} s (is the venue up and expecting "
                           f"TargetCompID={self.config.sender}? see {where})")

    def close(self) -> None:
        """Log out and stop the session; the journal is closed. Idempotent."""
        initiator, self._initiator = self._initiator, None
        if initiator is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            _logout(self._sid, lambda: self._logged_on, LOGOUT_WAIT_S)
            initiator.stop(True)
        with self._lock:
            self._logged_on = False
            for feed in self._feeds:
                feed._closed_venue()

    def shutdown(self) -> None:
        """`close`, and the journal file too (the venue is done for good)."""
        self.close()
        with self._lock:
            if not self._journal.closed:
                self._journal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def connected(self) -> bool:
        return self._logged_on

    def take_reconnected(self) -> bool:
        """True once after each logon that follows a lost session: time to reconcile."""
        was = self._reconnected.is_set()
        self._reconnected.clear()
        return was

    def _on_logon(self) -> None:
        with self._logon_changed:
            self._logged_on = True
            self.logons += 1
            again = self.logons > 1
            feeds = list(self._feeds)
            self._logon_changed.notify_all()
        log.info("%s: logged on (%s)", self.name, self.config.address)
        for feed in feeds:
            try:
                feed._resubscribe()
            except Exception:
                log.exception("%s: resubscribing market data failed", self.name)
        if again:
            self._reconnected.set()
            if self.on_reconnect is not None:
                try:
                    self.on_reconnect()
                except Exception:
                    log.exception("%s: on_reconnect failed", self.name)

    def _on_logout(self) -> None:
        # QuickFIX holds the session's mutex here: set a flag, wake waiters, nothing more
        self._logged_on = False
        log.info("%s: logged out", self.name)

    def _to_admin(self, message: Any) -> None:
        try:
            import quickfix as fix

            header = message.getHeader()
            if header.getField(35) == "A":
                for key, tag in (("Username", 553), ("Password", 554)):
                    if self.config.keys.get(key):
                        message.setField(fix.StringField(tag, self.config.keys[key]))
        except Exception:
            log.exception("%s: toAdmin", self.name)

    def _from_admin(self, message: Any) -> None:
        try:
            f = Fields.of(message)
            if f.msg_type == "3":
                log.warning("%s: the venue refused our message %s: %s (tag %s)", self.name,
                            f.get(45), f.get(58, "session reject"), f.get(371))  # fmt: skip
            elif f.msg_type == "5" and f.get(58):
                log.warning("%s: logout: %s", self.name, f.get(58))
        except Exception:
            log.exception("%s: fromAdmin", self.name)

    def _require(self, what: str) -> None:
        if self._initiator is None:
            raise v.VenueError(f"{self.name}: not started; call connect() first ({what})")

    def _send(self, message: Any, what: str) -> None:
        import quickfix as fix

        self._require(what)
        try:
            fix.Session.sendToTarget(message, self._sid)
        except fix.SessionNotFound:
            raise v.VenueError(f"{self.name}: no such session ({what})") from None
        # not logged on: QuickFIX stores it and it goes out on the resend after the next logon

    # --- orders ---------------------------------------------------------------------------

    def _contract(self, symbol: str) -> Contract:
        try:
            return self.contracts[symbol]
        except KeyError:
            raise v.VenueError(f"{self.name}: {symbol} is not a symbol this venue was given "
                               f"({', '.join(sorted(self.contracts))})") from None

    def _note(self, order: Order, alias: str | None = None) -> None:
        self._require(f"order {order.client_order_id}")
        side = codec.SIDE[order.side]
        with self._lock:
            self._orders[order.client_order_id] = (order.symbol, side)
            if alias is not None:
                self._aliases[alias] = order.client_order_id
            self._append({"sent": True, "cid": order.client_order_id, "symbol": order.symbol,
                          "side": side, "alias": alias}, sync=False)  # fmt: skip

    def submit(self, order: Order) -> None:
        msg = codec.new_order_single(order, self._contract(order.symbol), order.ts_last)
        self._note(order)
        self._send(msg, f"order {order.client_order_id}")

    def cancel(self, order: Order) -> None:
        msg = codec.cancel_request(order, order.ts_last)
        self._note(order, codec.alias(order.client_order_id, "c", order.requests))
        self._send(msg, f"cancel of {order.client_order_id}")

    def modify(
        self, order: Order, quantity: int | None, limit_ticks: int | None, stop_ticks: int | None
    ) -> None:
        msg = codec.replace_request(order, self._contract(order.symbol), quantity, limit_ticks,
                                    stop_ticks, order.ts_last)  # fmt: skip
        self._note(order, codec.alias(order.client_order_id, "r", order.requests))
        self._send(msg, f"replace of {order.client_order_id}")

    def reports(self) -> list[v.VenueReport]:
        """The reports received since the last call, in the order they came (non-blocking)."""
        out = []
        while True:
            try:
                out.append(self._queue.popleft())
            except IndexError:
                return out

    @property
    def history(self) -> list[v.VenueReport]:
        """Every report received, in order, across restarts (the journal's)."""
        with self._lock:
            return list(self._history)

    # --- what comes in --------------------------------------------------------------------

    def _from_app(self, message: Any) -> None:
        """QuickFIX's thread; never raises (see the module's doc)."""
        try:
            f = Fields.of(message)
            self._dispatch(f)
        except FixFieldError as exc:
            self.refused += 1
            log.error("%s: refused a message it cannot read (%s): %s", self.name, exc,
                      message.toString().replace(codec.SOH, "|"))  # fmt: skip
        except Exception:
            self.refused += 1
            log.exception("%s: failed on %s", self.name,
                          message.toString().replace(codec.SOH, "|"))

    def _dispatch(self, f: Fields) -> None:
        t = f.msg_type
        if t in ("W", "X", "Y", "f"):
            for feed in list(self._feeds):
                feed._on_message(f)
            return
        if t == "8" and f.get(584):
            self._collect(f.req(584), f, f.get(912) == "Y")
            return
        if t == "AO":
            self._collect_positions_ack(f)
            return
        if t == "AP":
            self._collect(f.req(710), f, False)
            return
        if t == "8":
            report = codec.exec_report(f, self.contracts, self._aliases)
            if report is None:
                log.info("%s: %s %s (ExecType %s): nothing for the OMS", self.name,
                         f.get(11), codec.IGNORED_EXEC_TYPES[f.req(150)], f.get(150))
                return
        elif t == "9":
            report = codec.cancel_reject(f, self._aliases)
        elif t == "j":
            log.warning("%s: business reject of %s %s: %s", self.name, f.get(372),
                        f.get(379) or f.get(45), f.get(58, f.get(380)))  # fmt: skip
            report = codec.business_rejected(f, self._aliases)
            if report is None:
                return
        else:
            log.warning("%s: unexpected message type %s ignored", self.name, t)
            return
        key = codec.report_key(f)
        with self._lock:
            if key in self._keys and f.poss_dup:
                log.debug("%s: resend of %s dropped (already journaled)", self.name, key)
                return
            self._append({**v.report_to_json(report), "key": key, "seq": f.get(34)},
                         sync=not isinstance(report, STATUS_RESTORES))
            self._keys.add(key)
            self._history.append(report)
            self._queue.append(report)

    def _collect(self, req_id: str, f: Fields, last: bool) -> None:
        with self._lock:
            c = self._collectors.get(req_id)
        if c is None:
            log.info("%s: answer to a request no one waits for (%s)", self.name, req_id)
            return
        c.messages.append(f)
        if last or (c.expected is not None and len(c.messages) >= c.expected):
            c.done.set()

    def _collect_positions_ack(self, f: Fields) -> None:
        with self._lock:
            c = self._collectors.get(f.req(710))
        if c is None:
            return
        if f.get(728) not in ("0", "2"):
            c.expected = -1  # refused
            c.messages.append(f)
            c.done.set()
            return
        c.expected = int(f.get(727, "0") or 0) if f.get(728) == "0" else 0
        if len(c.messages) >= c.expected:
            c.done.set()

    # --- queries --------------------------------------------------------------------------

    def _query(self, make: Callable[[str], Any], what: str, timeout_s: float) -> _Collector:
        if not self._logged_on:
            raise v.VenueError(f"{self.name}: not logged on; cannot ask for {what}")
        req_id = f"{what[:3].upper()}-{time.time_ns()}-{next(self._ids)}"
        c = _Collector()
        with self._lock:
            self._collectors[req_id] = c
        try:
            self._send(make(req_id), what)
            if not c.done.wait(timeout_s):
                raise v.VenueError(f"{self.name}: no complete answer to the {what} request "
                                   f"within {timeout_s:g} s")
        finally:
            with self._lock:
                self._collectors.pop(req_id, None)
        return c

    def request_status(self, client_order_ids: Sequence[str]) -> None:
        for cid in client_order_ids:
            symbol, side = self._orders.get(cid, (_N_A, "1"))
            self._send(codec.status_request(cid, symbol, side), f"status of {cid}")

    def open_orders(self, timeout_s: float) -> list[v.VenueOrder]:
        """The venue's working orders (an order mass status request)."""
        c = self._query(codec.mass_status_request, "mass status", timeout_s)
        out = []
        for f in c.messages:
            if f.get(911) == "0" or codec.STATUS_OF.get(f.get(39, "")) != "working":
                continue
            contract = self._contract(f.req(55))
            ord_type = f.get(40)
            out.append(v.VenueOrder(
                client_order_id=codec.root_id(f.req(11), self._aliases),
                venue_order_id=f.req(37), symbol=contract.symbol,
                side=codec.SIDE_OF[f.req(54)], quantity=codec.qty_of(f.req(38)),
                filled=codec.qty_of(f.req(14), 14),
                limit_ticks=codec.ticks_of(contract, f.req(44)) if ord_type == "2" else None,
                stop_ticks=codec.ticks_of(contract, f.req(99)) if ord_type == "3" else None,
            ))  # fmt: skip
        return out

    def positions(self, timeout_s: float) -> dict[str, int]:
        """Net signed contracts per symbol (a request for positions)."""
        account = self.config.keys.get("Account", self.config.sender)
        c = self._query(lambda rid: codec.positions_request(rid, account, time.time_ns()),
                        "positions", timeout_s)  # fmt: skip
        if c.expected == -1:
            f = c.messages[-1]
            raise v.VenueError(f"{self.name}: positions request refused: "
                               f"{f.get(58) or 'PosReqResult ' + str(f.get(728))}")
        out: dict[str, int] = {}
        for f in c.messages:
            net = sum(codec.qty_of(g.get(704, "0"), 704) - codec.qty_of(g.get(705, "0"), 705)
                      for g in f.groups(703))  # fmt: skip
            out[f.req(55)] = out.get(f.req(55), 0) + net
        return {s: q for s, q in out.items() if q}

    # --- market data ----------------------------------------------------------------------

    def feed(self) -> Any:
        """A `Feed` of the venue's bars over this session (`FixMarketData`)."""
        from foxhunt.live.fix.marketdata import FixMarketData

        return FixMarketData(self)

    def _add_feed(self, feed: Any) -> None:
        with self._lock:
            self._feeds.append(feed)

    def _remove_feed(self, feed: Any) -> None:
        with self._lock:
            if feed in self._feeds:
                self._feeds.remove(feed)
