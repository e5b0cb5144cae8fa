"""The bars a live trader has seen, growing bar by bar, with the series the env reads.

History (stored bars before the first live one) and then the feed's bars share one buffer, so
a bar has one index t from the warm-up to the end of the session, as in paper trading. The
per-bar series the env's rules read (prices on the tick grid, the ATR that sizes stops, the
dollar volatility that scales rewards and position features, the session's last bar) are
computed as each bar arrives, bit for bit what the batch functions (`env.market`) give over
the same bars: their trailing means are differences of running sums, and a running sum
extended one bar at a time adds in the same order as `np.cumsum`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np

from foxhunt.data.grid import GRID_TOLERANCE
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.env.config import EnvConfig
from foxhunt.env.market import average_true_range, dollar_volatility, session_ends
from foxhunt.live.feed import FeedError, LiveBar

_COLUMNS = ("open", "high", "low", "close", "volume")
QUARTER_HOUR_NS = 900_000_000_000
"""Zones change their UTC offset on quarter-hour boundaries (`env.market` looks up each once)."""
DAY_NS = 86_400_000_000_000


class LiveMarket:
    def __init__(self, history: Bars, instrument: Instrument, env: EnvConfig,
                 capacity: int = 4096):  # fmt: skip
        self.inst, self.env = instrument, env
        self.tick = instrument.tick_size
        self.atr_window, self.vol_window = env.atr_window, env.reward_vol_window
        self.floor = env.reward_scale_floor_ticks * instrument.tick_value
        n = len(history)
        self.n = 0
        self._zone = ZoneInfo(instrument.session.tz)
        self._close_ns = instrument.session.minutes("close") * 60 * 1_000_000_000
        self._offset_bucket: int | None = None
        self._offset_ns = 0
        self._prev_close, self._last_ts = 0.0, 0
        self._c_tr, self._c_d2 = [0.0], [0.0]  # the running sums as floats (the arrays' twins)
        self._alloc(max(capacity, 2 * n, 16))
        if n:
            self._load(history)

    # --- storage ----------------------------------------------------------------------------

    def _alloc(self, cap: int) -> None:
        old = getattr(self, "ts", None)
        self.cap = cap
        new = {
            "ts": np.zeros(cap, np.int64),
            **{k: np.zeros(cap, np.float64) for k in (*_COLUMNS, "t_open", "t_high", "t_low",
                                                     "t_close", "atr", "scale")},
            "session_end": np.zeros(cap, np.bool_),
            "c_tr": np.zeros(cap + 1, np.float64), "c_d2": np.zeros(cap + 1, np.float64),
        }  # fmt: skip
        if old is not None:
            for k, arr in new.items():
                arr[: self.n + (k.startswith("c_"))] = getattr(self, k)[: self.n + (k.startswith("c_"))]
        for k, arr in new.items():
            setattr(self, k, arr)
        # one Bars over the whole buffer: its arrays are the buffer's (no copy), so a decider
        # holding it reads each new bar; a new object only when the buffer grows
        self.bars = Bars(self.ts, self.open, self.high, self.low, self.close, self.volume)

    def _load(self, history: Bars) -> None:
        """The stored bars through the batch functions (the definition the running sums match)."""
        n = len(history)
        for k in ("ts", *_COLUMNS):
            getattr(self, k)[:n] = getattr(history, k)
        self.n = n
        prices = {k: self._on_grid(getattr(history, k)) for k in ("open", "high", "low", "close")}
        for k, v in prices.items():
            getattr(self, f"t_{k}")[:n] = v
        grid = Bars(history.ts, prices["open"], prices["high"], prices["low"], prices["close"],
                    history.volume)  # fmt: skip
        self.atr[:n] = average_true_range(grid, self.atr_window, self.tick)
        self.scale[:n] = dollar_volatility(grid.close, self.vol_window, self.inst.point_value,
                                           self.floor)  # fmt: skip
        self.session_end[:n] = session_ends(history.ts, self.inst.session)
        if n:  # the last stored bar ends a session only if it closes at the session close
            self.session_end[n - 1] = self._ends_session(int(history.ts[-1]))
        close = prices["close"]
        prev = np.concatenate([close[:1], close[:-1]])
        tr = np.maximum(prices["high"], prev) - np.minimum(prices["low"], prev)
        tr[0] = prices["high"][0] - prices["low"][0]
        self.c_tr[1 : n + 1] = np.cumsum(tr)
        d = np.diff(close, prepend=close[0])
        self.c_d2[1 : n + 1] = np.cumsum(d * d)
        self._c_tr, self._c_d2 = self.c_tr[: n + 1].tolist(), self.c_d2[: n + 1].tolist()
        if n:
            self._prev_close, self._last_ts = float(close[-1]), int(history.ts[-1])

    def _on_grid(self, x: np.ndarray) -> np.ndarray:
        ticks = np.asarray(x, np.float64) / self.tick
        return np.where(np.abs(ticks - np.round(ticks)) > GRID_TOLERANCE,
                        np.round(ticks) * self.tick, x)  # fmt: skip

    def _ends_session(self, ts: int) -> bool:
        """`session_ends` of a bar that is the last so far: whether it closes at the session
        close (the zone's UTC offset looked up once per quarter hour, as the batch does)."""
        session = self.inst.session
        if session.open == session.close:
            return False
        bucket = ts // QUARTER_HOUR_NS
        if bucket != self._offset_bucket:
            when = datetime.fromtimestamp(bucket * 900, tz=UTC).astimezone(self._zone)
            self._offset_bucket = bucket
            self._offset_ns = int(when.utcoffset().total_seconds()) * 1_000_000_000
        return (ts + self._offset_ns - self._close_ns) % DAY_NS == 0

    # --- a new bar ------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.n

    def append(self, bar: LiveBar) -> int:
        """Add the feed's next bar; its index. A bar not after the last one is refused.

        On Python floats and ints: the same IEEE double operations, in the same order, as the
        batch functions' numpy arrays (a numpy scalar costs several times a float)."""
        t = self.n
        if t and bar.ts_ns <= self._last_ts:
            raise FeedError(f"{bar.symbol} bar at {bar.ts_ns} is not after the last bar "
                            f"({self._last_ts}); bars must come in time order")
        if t == self.cap:
            self._alloc(2 * self.cap)
        self.ts[t] = bar.ts_ns
        for k in _COLUMNS:
            getattr(self, k)[t] = getattr(bar, k)
        on_grid = self._on_grid_float
        o, h, lo, c = on_grid(bar.open), on_grid(bar.high), on_grid(bar.low), on_grid(bar.close)
        self.t_open[t], self.t_high[t], self.t_low[t], self.t_close[t] = o, h, lo, c
        if t == 0:
            tr, d = h - lo, 0.0
        else:
            prev = self._prev_close
            tr, d = max(h, prev) - min(lo, prev), c - prev
        c_tr, c_d2 = self._c_tr, self._c_d2
        c_tr.append(c_tr[-1] + tr)
        c_d2.append(c_d2[-1] + d * d)
        self.c_tr[t + 1], self.c_d2[t + 1] = c_tr[-1], c_d2[-1]
        self.atr[t] = max(self._trailing(c_tr, t, self.atr_window, 0), self.tick)
        rms = math.sqrt(self._trailing(c_d2, t, self.vol_window, 1))
        self.scale[t] = max(rms * self.inst.point_value, self.floor)
        self.session_end[t] = self._ends_session(bar.ts_ns)
        self._prev_close, self._last_ts = c, bar.ts_ns
        self.n = t + 1
        return t

    def _on_grid_float(self, x: float) -> float:
        """`_on_grid` of one price (`round` halves to even, as `np.round` does)."""
        x = float(x)
        if not math.isfinite(x):
            return x
        ticks = x / self.tick
        r = float(round(ticks))
        return r * self.tick if abs(ticks - r) > GRID_TOLERANCE else x

    @staticmethod
    def _trailing(c: list[float], t: int, window: int, start: int) -> float:
        """`env.market._trailing_mean` at t, from the running sums `c`."""
        lo = max(start, t - window + 1)
        count = t + 1 - lo
        return (c[t + 1] - c[min(lo, t + 1)]) / max(count, 1) if count > 0 else 0.0
