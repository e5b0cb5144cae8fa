"""IB's 5-second real-time bars (TRADES) built into 1-minute bars: a `Feed`.

IB stamps a real-time bar with its start; it covers [start, start + 5 s), so its prints are
handed to the `BarBuilder` at start + 5 s: the 5-second bar starting 14:30:55 belongs to the
minute bar closing at 14:31:00. A minute bar is handed out when the next minute's first part
arrives, or when the clock is `grace_s` past its close (IB sends a 5-second bar just after it
ends; the grace lets the last one arrive).

The feed has its own connection to TWS (its own client id): market data never waits behind
orders. A lost connection, or an IB error on a subscription (no market data permission, say),
makes `next_bar` raise FeedError; after `close`, FeedEnded. When TWS says its link came back
but data was lost (error 1101), the subscriptions are requested again.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import ib_async

from foxhunt.errors import ConfigError
from foxhunt.live.feed import BarBuilder, FeedEnded, FeedError, LiveBar
from foxhunt.live.ib import mapping as m
from foxhunt.live.ib.config import IbFuture, check_endpoint, parse_futures
from foxhunt.live.ib.loop import LoopThread, connect_error
from foxhunt.live.ib.venue import resolve_contracts

log = logging.getLogger(__name__)
PART_NS = 5 * 1_000_000_000


class IbBars:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: int,
        futures: Mapping[str, IbFuture | Mapping[str, Any]],
        *,
        bar_s: int = 60,
        grace_s: float = 2.0,
        use_rth: bool = False,
        connect_timeout_s: float = 10.0,
        clock: Callable[[], int] = time.time_ns,
    ):
        check_endpoint(host, port, client_id)
        self.host, self.port, self.client_id = host, port, client_id
        self.futures = parse_futures(futures, futures.keys(), "ib feed contracts")
        self.bar_ns, self.grace_ns = bar_s * 1_000_000_000, int(grace_s * 1e9)
        self.use_rth, self.connect_timeout_s, self.clock = use_rth, connect_timeout_s, clock
        self._parts: queue.Queue[tuple[str, int, tuple[float, ...]]] = queue.Queue()
        self._builders: dict[str, BarBuilder] = {}
        self._ready: deque[LiveBar] = deque()
        self._subs: dict[str, ib_async.RealTimeBarList] = {}  # on the IB thread only
        self._error = ""
        self._closed = False
        self._thread = LoopThread(f"ib-bars-{client_id}")
        self._ib: ib_async.IB = self._thread.call(self._make_ib)

    def _make_ib(self) -> ib_async.IB:
        ib = ib_async.IB()
        ib.errorEvent += self._on_error
        ib.disconnectedEvent += self._on_disconnected
        return ib

    def subscribe(self, symbol: str) -> None:
        """Connect if needed and ask IB for `symbol`'s 5-second bars; FeedError for a symbol
        with no IB contract or a TWS that cannot be reached."""
        if symbol not in self.futures:
            raise FeedError(f"IB feed: no IB contract for {symbol!r} "
                            f"(has {', '.join(sorted(self.futures))})")  # fmt: skip
        if symbol in self._builders:
            return
        future = self._thread.submit(self._subscribe(symbol))
        try:
            future.result(self.connect_timeout_s * 2 + 1)
        except ConfigError as exc:
            raise FeedError(str(exc)) from None
        except (OSError, TimeoutError) as exc:
            raise FeedError("IB feed: " + connect_error(
                exc, self.host, self.port, self.client_id, self.connect_timeout_s, [])) from None
        self._builders[symbol] = BarBuilder(symbol, self.bar_ns, self.grace_ns)

    async def _subscribe(self, symbol: str) -> None:
        ib = self._ib
        if not ib.isConnected():
            await ib.connectAsync(self.host, self.port, self.client_id,
                                  timeout=self.connect_timeout_s,
                                  fetchFields=ib_async.ib.StartupFetchNONE)  # fmt: skip
        (contract,) = (await resolve_contracts(ib, {symbol: self.futures[symbol]},
                                               self.connect_timeout_s)).values()  # fmt: skip
        self._request(symbol, contract)

    def _request(self, symbol: str, contract: ib_async.Contract) -> None:
        bars = self._ib.reqRealTimeBars(contract, 5, "TRADES", self.use_rth)
        bars.updateEvent += lambda bars, new: self._on_bar(symbol, bars, new)
        self._subs[symbol] = bars

    def _on_bar(self, symbol: str, bars: ib_async.RealTimeBarList, new: bool) -> None:
        if new and bars:
            b = bars[-1]
            end_ns = int(b.time.timestamp()) * 1_000_000_000 + PART_NS
            self._parts.put((symbol, end_ns, (b.open_, b.high, b.low, b.close, max(b.volume, 0))))

    def _on_error(self, req_id: int, code: int, message: str, contract: Any) -> None:
        if code == m.LINK_BACK_LOST_DATA:
            log.warning("IB feed: TWS lost market data subscriptions; requesting them again")
            for symbol, bars in list(self._subs.items()):
                self._ib.cancelRealTimeBars(bars)
                self._request(symbol, bars.contract)
            return
        for symbol, bars in self._subs.items():
            if bars.reqId == req_id and code not in m.INFO_CODES:
                self._error = f"IB feed: {symbol} real-time bars: IB error {code}: {message}"

    def _on_disconnected(self) -> None:
        if not self._closed:
            self._error = f"IB feed: lost the connection to TWS at {self.host}:{self.port}"

    def next_bar(self, timeout_s: float) -> LiveBar | None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self._closed:
                raise FeedEnded("IB feed: closed")
            self._build()
            if self._ready:
                return self._ready.popleft()
            if self._error:
                raise FeedError(self._error)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self._part(*self._parts.get(timeout=min(left, 0.05)))
            except queue.Empty:
                continue

    def _part(self, symbol: str, end_ns: int, ohlcv: tuple[float, ...]) -> None:
        self._ready.extend(self._builders[symbol].on_part(end_ns, *ohlcv))

    def _build(self) -> None:
        """Parts in arrival order into bars, then the clock: completed bars join `_ready`."""
        while True:
            try:
                self._part(*self._parts.get_nowait())
            except queue.Empty:
                break
        now = self.clock()
        for builder in self._builders.values():
            self._ready.extend(builder.on_time(now))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._thread.call(self._ib.disconnect)
        finally:
            self._thread.stop()
