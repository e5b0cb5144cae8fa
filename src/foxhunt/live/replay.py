"""Two more feed sources: stored bars replayed at a chosen speed, and Databento's live feed.

`ReplayFeed` plays bars the store holds as if they arrived now: bar i is handed out
(ts_i - ts_first) / speed seconds after the first (None: as fast as they are asked for). It is
what a rehearsal against a venue without market data of its own uses (a broker's paper account
fed with yesterday's bars), and what tests drive the live loop with.

`DatabentoFeed` takes one-minute OHLCV bars from Databento's live service (the `databento`
package, `pip install databento`, and a key in DATABENTO_API_KEY). It cannot be reached from
the machines foxhunt is tested on: it is written to Databento's documented client API and is
not tested here.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any

from foxhunt.data.series import Bars
from foxhunt.live.feed import FeedEnded, FeedError, LiveBar

MINUTE_NS = 60_000_000_000


class ReplayFeed:
    def __init__(self, bars: Bars, symbol: str, speed: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):  # fmt: skip
        if speed is not None and not speed > 0:
            raise ValueError(f"replay speed {speed} must be > 0 (None: as fast as asked)")
        self.bars, self.symbol, self.speed = bars, symbol, speed
        self.clock, self.sleep = clock, sleep
        self.i = 0
        self._start: float | None = None
        self._subscribed = False

    def subscribe(self, symbol: str) -> None:
        if symbol != self.symbol:
            raise FeedError(f"the replay plays {self.symbol}, not {symbol}")
        self._subscribed = True

    def next_bar(self, timeout_s: float) -> LiveBar | None:
        if not self._subscribed:
            raise FeedError("subscribe before asking for bars")
        b, i = self.bars, self.i
        if i >= len(b):
            raise FeedEnded(f"the replay of {self.symbol} ended after {len(b)} bars")
        if self.speed is not None:
            now = self.clock()
            if self._start is None:
                self._start = now
            due = self._start + (int(b.ts[i]) - int(b.ts[0])) / 1e9 / self.speed
            if due - now > timeout_s:
                self.sleep(timeout_s)
                return None
            if due > now:
                self.sleep(due - now)
        self.i += 1
        return LiveBar(self.symbol, int(b.ts[i]), float(b.open[i]), float(b.high[i]),
                       float(b.low[i]), float(b.close[i]), float(b.volume[i]))

    def close(self) -> None:
        self.i = len(self.bars)


class DatabentoFeed:
    """Databento `ohlcv-1m` bars of `symbols` (Databento's symbology, e.g. "ES.c.0" with
    stype_in "continuous") mapped to our symbols: {our symbol: databento symbol}."""

    def __init__(self, dataset: str, symbols: dict[str, str], *, stype_in: str = "continuous",
                 key: str | None = None):  # fmt: skip
        try:
            import databento as db
        except ImportError:
            raise FeedError("the Databento live feed needs the databento package: "
                            "pip install databento") from None
        self._db, self.dataset, self.stype_in = db, dataset, stype_in
        self.symbols = dict(symbols)
        self._ours = {v: k for k, v in self.symbols.items()}
        self._ids: dict[int, str] = {}  # Databento instrument id -> our symbol
        self._items: queue.Queue[LiveBar | Exception] = queue.Queue()
        try:
            self.client = db.Live(key=key)
        except Exception as exc:  # noqa: BLE001 - the client's own errors, as one line
            raise FeedError(f"Databento live: {exc}") from None
        self.client.add_callback(self._on_record, self._on_error)
        self._started = False

    def subscribe(self, symbol: str) -> None:
        theirs = self.symbols.get(symbol)
        if theirs is None:
            raise FeedError(f"no Databento symbol for {symbol}; give it in the mapping")
        self.client.subscribe(dataset=self.dataset, schema="ohlcv-1m", symbols=[theirs],
                              stype_in=self.stype_in)  # fmt: skip
        if not self._started:
            self.client.start()
            self._started = True

    def _on_record(self, record: Any) -> None:
        name = type(record).__name__
        if name == "SymbolMappingMsg":
            ours = self._ours.get(getattr(record, "stype_in_symbol", ""))
            if ours is not None:
                self._ids[record.instrument_id] = ours
        elif name == "OHLCVMsg":
            symbol = self._ids.get(record.instrument_id)
            if symbol is not None:  # stamped at the bar's open: ours are at its close
                scale = 1e-9
                self._items.put(LiveBar(symbol, int(record.ts_event) + MINUTE_NS,
                                        record.open * scale, record.high * scale,
                                        record.low * scale, record.close * scale,
                                        float(record.volume)))  # fmt: skip
        elif name == "ErrorMsg":
            self._items.put(FeedError(f"Databento live: {getattr(record, 'err', record)}"))

    def _on_error(self, exc: Exception) -> None:
        self._items.put(FeedError(f"Databento live: {exc}"))

    def next_bar(self, timeout_s: float) -> LiveBar | None:
        try:
            item = self._items.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        if self._started:
            self.client.stop()
            self._started = False


__all__ = ["DatabentoFeed", "FeedEnded", "ReplayFeed"]
