"""`FixMarketData`: the venue's completed bars over the FIX session, as a `Feed`.

One MarketDataRequest (V, snapshot plus updates) per symbol. The snapshot (W) carries the last
completed bar, each incremental refresh (X) one more; a bar is its opening, high, low and
closing prices and its trade volume, stamped with its close time (MDEntryDate/MDEntryTime).
The exchange says a symbol's data ended with a SecurityStatus (f) whose SecurityTradingStatus
is 18 (not available for trading); once every subscribed symbol ended and its bars are read,
`next_bar` raises `FeedEnded`.

Market data is not guaranteed delivery: after a reconnect the feed subscribes again and the
snapshot brings the last bar, but bars completed while the session was down are not replayed.
A bar at or before the last one handed out for its symbol (a resend, a snapshot of a bar
already seen) is dropped. Messages arrive on QuickFIX's thread and wait in a queue.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from foxhunt.execution.venue import VenueError
from foxhunt.live.feed import FeedEnded, FeedError, LiveBar
from foxhunt.live.fix import codec
from foxhunt.live.fix.codec import Fields

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Ended:
    symbol: str
    text: str


class _Answer:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.error = ""


class FixMarketData:
    """A `Feed` over a `FixVenue`'s session (see `FixVenue.feed()`)."""

    def __init__(self, venue: Any, subscribe_timeout_s: float = 10.0):
        self.venue = venue
        self.subscribe_timeout_s = subscribe_timeout_s
        self._lock = threading.Lock()
        self._items: queue.Queue[LiveBar | _Ended] = queue.Queue()
        self._symbol_of: dict[str, str] = {}  # MDReqID -> symbol (the current one per symbol)
        self._req_of: dict[str, str] = {}  # symbol -> MDReqID
        self._answers: dict[str, _Answer] = {}
        self._last: dict[str, int] = {}
        self._ended: set[str] = set()
        self._ids = itertools.count(1)
        self._closed = False
        self._unacked: LiveBar | None = None  # the bar handed out last, not yet said done
        venue._add_feed(self)

    def _request(self, symbol: str) -> tuple[str, _Answer]:
        req_id = f"MD-{symbol}-{time.time_ns()}-{next(self._ids)}"
        answer = _Answer()
        with self._lock:
            old = self._req_of.get(symbol)
            if old is not None:
                self._symbol_of.pop(old, None)
            self._req_of[symbol] = req_id
            self._symbol_of[req_id] = symbol
            self._answers[req_id] = answer
        self.venue._send(codec.md_request(req_id, symbol), f"market data of {symbol}")
        return req_id, answer

    def subscribe(self, symbol: str) -> None:
        """Subscribe and wait for the snapshot; FeedError for a symbol the venue rejects (or
        when no answer comes within `subscribe_timeout_s`)."""
        if self._closed:
            raise FeedError("the FIX market data feed is closed")
        if symbol not in self.venue.contracts:
            raise FeedError(f"{self.venue.name}: {symbol} is not a symbol this venue was given")
        if not self.venue.connected:
            raise FeedError(f"{self.venue.name}: not logged on; cannot subscribe to {symbol}")
        req_id, answer = self._request(symbol)
        if not answer.event.wait(self.subscribe_timeout_s):
            raise FeedError(f"{self.venue.name}: no market data for {symbol} within "
                            f"{self.subscribe_timeout_s:g} s")
        with self._lock:
            self._answers.pop(req_id, None)
            if answer.error:
                self._req_of.pop(symbol, None)
                self._symbol_of.pop(req_id, None)
        if answer.error:
            raise FeedError(f"{self.venue.name}: market data for {symbol} refused: "
                            f"{answer.error}")

    def next_bar(self, timeout_s: float) -> LiveBar | None:
        """Asking for the next bar says the caller is done with the last one: a TestRequest
        tells the venue so (the local exchange in lockstep waits for it; others just answer)."""
        self._ack()
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                done = bool(self._req_of) and self._ended >= set(self._req_of)
            if done and self._items.empty():
                raise FeedEnded(f"{self.venue.name}: the venue's data ended for "
                                f"{', '.join(sorted(self._ended))}")
            try:
                item = self._items.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                return None
            if isinstance(item, _Ended):
                with self._lock:
                    self._ended.add(item.symbol)
                log.info("%s: %s data ended: %s", self.venue.name, item.symbol, item.text)
                continue
            self._unacked = item
            return item

    def _ack(self) -> None:
        bar, self._unacked = self._unacked, None
        if bar is None or not self.venue.connected:
            return
        try:
            self.venue._send(codec.bar_done(bar.symbol, bar.ts_ns), "a bar's acknowledgement")
        except VenueError as exc:
            log.warning("%s: %s", self.venue.name, exc)

    def close(self) -> None:
        """Unsubscribe (when logged on) and stop receiving."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            subs = dict(self._req_of)
        if self.venue.connected:
            for symbol, req_id in subs.items():
                try:
                    self.venue._send(codec.md_request(req_id, symbol, subscribe=False),
                                     f"unsubscribe {symbol}")  # fmt: skip
                except Exception:
                    log.warning("%s: unsubscribing %s failed", self.venue.name, symbol,
                                exc_info=True)  # fmt: skip
        self.venue._remove_feed(self)

    # --- QuickFIX's thread ----------------------------------------------------------------

    def _resubscribe(self) -> None:
        """After a logon: subscribe again to every symbol (the exchange forgot the old ones)."""
        with self._lock:
            symbols = [s for s in self._req_of if s not in self._ended]
        for symbol in symbols:
            self._request(symbol)

    def _closed_venue(self) -> None:
        pass  # the venue stopped: next_bar times out (None) until it logs on again

    def _on_message(self, f: Fields) -> None:
        t = f.msg_type
        if t == "f":
            symbol = f.get(55)
            with self._lock:
                mine = symbol in self._req_of
            if mine and f.get(326) == codec.END_OF_DATA:
                self._items.put(_Ended(symbol, f.get(58, "")))
            return
        req_id = f.get(262, "")
        with self._lock:
            symbol = self._symbol_of.get(req_id)
            answer = self._answers.get(req_id)
        if symbol is None:
            return  # another feed's, or an old subscription's resend
        if t == "Y":
            if answer is not None:
                answer.error = f.get(58) or f"MDReqRejReason {f.get(281)}"
                answer.event.set()
            return
        bar = codec.bar_of(f, 269 if t == "W" else 279, symbol)
        if bar is not None:
            self._offer(bar)
        if t == "W" and answer is not None:
            answer.event.set()

    def _offer(self, bar: LiveBar) -> None:
        with self._lock:
            if bar.ts_ns <= self._last.get(bar.symbol, -1):
                return
            self._last[bar.symbol] = bar.ts_ns
        self._items.put(bar)

    def __repr__(self) -> str:
        return f"FixMarketData({self.venue.name}, {sorted(self._req_of)})"
