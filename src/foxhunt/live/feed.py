"""One feed interface: completed bars, whatever the source.

A source either delivers bars (a venue that publishes each bar at its close, a replay of
stored bars) or trades and partial bars (a vendor's tick feed, a broker's 5-second bars), which
a `BarBuilder` turns into bars of the trader's size. Bars are stamped at their close, as
everywhere in foxhunt: a bar is only known once its close time has passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from foxhunt.orders.errors import TradingError


class FeedEnded(TradingError):
    """The source has no more bars (a replay reached its end, the venue's data ended)."""


class FeedError(TradingError):
    """The source cannot be reached or sent what cannot be read."""


@dataclass(frozen=True, slots=True)
class LiveBar:
    symbol: str
    ts_ns: int  # the bar's close time, int64 ns UTC
    open: float
    high: float
    low: float
    close: float
    volume: float = 0.0

    def __post_init__(self) -> None:
        values = (self.open, self.high, self.low, self.close)
        if not all(math.isfinite(x) for x in values) or not (
            self.low <= min(self.open, self.close) and max(self.open, self.close) <= self.high
        ):
            raise FeedError(
                f"{self.symbol} bar at {self.ts_ns}: open {self.open}, high {self.high}, "
                f"low {self.low}, close {self.close} is not a bar"
            )
        if not math.isfinite(self.volume) or self.volume < 0:
            raise FeedError(f"{self.symbol} bar at {self.ts_ns}: volume {self.volume} is not a volume")


class Feed(Protocol):
    def subscribe(self, symbol: str) -> None:
        """Start receiving `symbol`'s bars; FeedError for a symbol the source does not have."""
        ...

    def next_bar(self, timeout_s: float) -> LiveBar | None:
        """The next completed bar of a subscribed symbol, in close-time order per symbol; None
        when none came within `timeout_s`; FeedEnded when none will come."""
        ...

    def close(self) -> None: ...


class BarBuilder:
    """Trades and partial bars of one symbol into bars of `bar_ns`, aligned to multiples of
    `bar_ns` since the epoch (a 1-minute bar closing at 14:31:00 holds what traded in
    (14:30:00, 14:31:00]). A bar is handed out when something at or after its close arrives, or
    when `on_time` says the clock passed its close (plus `grace_ns` for late prints); anything
    older than the last bar handed out is refused (late data is never rewritten into a bar a
    decision already read)."""

    def __init__(self, symbol: str, bar_ns: int = 60_000_000_000, grace_ns: int = 0):
        if bar_ns <= 0 or grace_ns < 0:
            raise ValueError(f"bar_ns {bar_ns} must be > 0 and grace_ns {grace_ns} >= 0")
        self.symbol, self.bar_ns, self.grace_ns = symbol, bar_ns, grace_ns
        self._close_ns: int | None = None  # the bar being built: its close time
        self._ohlcv: list[float] = []
        self.last_close_ns = -1
        self.late = 0  # prints refused for arriving after their bar was handed out

    def _end_of(self, ts_ns: int) -> int:
        return -(-ts_ns // self.bar_ns) * self.bar_ns

    def on_trade(self, ts_ns: int, price: float, size: float = 0.0) -> list[LiveBar]:
        return self.on_part(ts_ns, price, price, price, price, size)

    def on_part(self, ts_ns: int, open_: float, high: float, low: float, close: float,
                volume: float = 0.0) -> list[LiveBar]:  # fmt: skip
        """A partial bar (or a trade) whose last print is at `ts_ns`."""
        end = self._end_of(ts_ns)
        if end <= self.last_close_ns:
            self.late += 1
            return []
        out = self._flush_before(end)
        if self._close_ns is None:
            self._close_ns, self._ohlcv = end, [open_, high, low, close, volume]
        else:
            b = self._ohlcv
            b[1], b[2], b[3], b[4] = max(b[1], high), min(b[2], low), close, b[4] + volume
        return out

    def on_time(self, now_ns: int) -> list[LiveBar]:
        """The clock: hand out the bar being built once `now_ns` is past its close + grace."""
        if self._close_ns is not None and now_ns >= self._close_ns + self.grace_ns:
            return self._flush_before(now_ns + 1)
        return []

    def _flush_before(self, end: int) -> list[LiveBar]:
        if self._close_ns is None or self._close_ns >= end:
            return []
        o, h, low, c, v = self._ohlcv
        bar = LiveBar(self.symbol, self._close_ns, o, h, low, c, v)
        self.last_close_ns, self._close_ns, self._ohlcv = self._close_ns, None, []
        return [bar]
