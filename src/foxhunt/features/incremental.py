"""Features bar by bar: the same float32 bits as `FeaturePipeline`, computed as bars arrive.

Paper and live trading see one bar at a time; recomputing the batch pipeline over the whole
history at every bar costs O(T) a bar. `IncrementalFeatures.push` costs O(features) a bar
(plus, once every `pipeline.CHUNK` bars, a re-sum of `history` rows), and gives the row the
batch pipeline gives for that bar, bit for bit (tests/features/test_incremental.py). This is
the train/serve skew guard: an agent sees in paper trading exactly what it saw in training.

Bit-identity means redoing the batch arithmetic in the same order, not merely the same maths:

- the batch computes chunk [c0, c0 + CHUNK) from a segment starting `history` rows earlier and
  sums windows as differences of prefix sums restarted at that segment's first row (a level
  minus the segment's first value); so here every running sum restarts at each chunk start
  from the stored last `history` rows, and a window sum is q[n] - q[n - w] of the same
  left-to-right prefix sums, times 1/w as the batch does;
- the EMA is `rolling.ema_rows`' block closed form (anchor = the chunk's first value, blocks
  of b rows, carries between blocks), not the recursion, whose bits differ;
- logs go through numpy's own `np.log` (its SIMD kernel, not libm's), rolling extremes are
  exact whatever the order, and every value is rounded to float32 once, from float64.

Only the fitted normaliser (what a checkpoint stores) is supported; the causal rolling z-score
is not computed here.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable

import numpy as np

from foxhunt.data.instruments import Session
from foxhunt.errors import DataError
from foxhunt.features import pipeline as batch
from foxhunt.features import rolling
from foxhunt.features.calendar import MIN_PER_WEEK, NS_PER_DAY, NS_PER_MIN, NS_PER_S, SessionClock
from foxhunt.features.config import FeatureConfig
from foxhunt.features.normalise import Normaliser, _scale
from foxhunt.features.segment import _GK_K, _PK_K, VOL_FLOOR

_CLOCK_HORIZON_NS = 400 * NS_PER_DAY
_NAN = float("nan")


def _floor(x: float, floor: float) -> float:
    """np.maximum(x, floor) for one value: NaN stays NaN."""
    return x if (math.isnan(x) or x >= floor) else floor


def _div(num: float, den: float) -> float:
    """`rolling.safe_div` for one value: num / den where den > 0, else 0."""
    return num / den if den > 0.0 else 0.0


def _root(x: float) -> float:
    """`rolling.root` for one value."""
    return math.sqrt(x) if x >= 0.0 else (x if math.isnan(x) else 0.0)


class _Prefix:
    """Left-to-right prefix sums of one series since the segment started (q[0] = 0), read back
    as window sums q[n] - q[n - w], as `rolling.Sums` does."""

    __slots__ = ("q",)

    def __init__(self) -> None:
        self.q = [0.0]

    def add(self, x: float) -> None:
        self.q.append(self.q[-1] + x)

    def mean(self, w: int) -> float:
        q = self.q
        n = len(q) - 1
        return (q[n] - q[n - w]) * (1.0 / w) if n >= w else _NAN


class _Extreme:
    """Rolling max (or min) of the last w values (exact, so any order gives the batch's bits)."""

    __slots__ = ("items", "n", "sign", "w")

    def __init__(self, w: int, sign: float):
        self.w, self.sign, self.items, self.n = w, sign, deque(), 0

    def push(self, x: float) -> float:
        items, s = self.items, self.sign
        while items and items[-1][1] * s <= x * s:
            items.pop()
        items.append((self.n, x))
        self.n += 1
        if items[0][0] <= self.n - 1 - self.w:
            items.popleft()
        return items[0][1] if self.n >= self.w else _NAN


class _Ema:
    """`rolling.ema_rows` one value at a time: y = (cumsum + carry) * alpha beta^j + anchor
    within blocks of b rows of a chunk, carries between blocks, the chunk's first value as
    anchor and the previous chunk's last value as its start."""

    def __init__(self, w: int):
        self.alpha = 2.0 / (w + 1)
        self.beta = 1.0 - self.alpha
        self.b = int(min(max(1.0, 600.0 / -math.log(self.beta)), rolling.MAX_BLOCK))
        self.down = rolling._powers(self.beta, self.b).tolist()
        self.scale = rolling._scaled_powers(self.alpha, self.beta, self.b).tolist()
        self.step = self.beta**self.b
        self.ratio = self.beta / self.alpha
        self.last: float | None = None

    def start_chunk(self, x0: float) -> None:
        self.anchor = x0
        self.state = 0.0 if self.last is None else self.last - x0
        self.i, self.cum = 0, 0.0
        self.carry = self.state * self.ratio

    def push(self, x: float) -> float:
        i = self.i
        self.cum += (x - self.anchor) / self.down[i]
        y = (self.cum + self.carry) * self.scale[i] + self.anchor
        if i == self.b - 1:  # the block is complete: the next block's carry
            self.state = self.step * self.state + self.cum * self.scale[i]
            self.carry = self.state * self.ratio
            self.i, self.cum = 0, 0.0
        else:
            self.i = i + 1
        self.last = y
        return y


class IncrementalFeatures:
    """Feature rows of a bar series fed one bar at a time (`push`), equal bit for bit to
    `FeaturePipeline(config, session).raw(bars)` and, with a fitted `normaliser`, to
    `.transform(bars, normaliser=normaliser).values` row by row."""

    def __init__(self, config: FeatureConfig | None = None, session: Session | None = None,
                 normaliser: Normaliser | None = None):
        self.pipeline = batch.FeaturePipeline(config, session)
        self.config = self.pipeline.config
        self.normaliser = normaliser
        if normaliser is not None and normaliser.names != tuple(self.pipeline.names):
            raise DataError(
                f"incremental features: the normaliser was fitted on {len(normaliser.names)} "
                f"features, this config builds {self.pipeline.n_features}")
        self.chunk = batch.CHUNK
        self.history = self.pipeline.history
        self.names = tuple(self.pipeline.names)
        self._index = {n: i for i, n in enumerate(self.names)}
        self._warmups = [s.warmup for s in self.pipeline.specs]
        self._warm_until = max(self._warmups, default=0)
        if normaliser is not None:
            self._norm_mean = normaliser.mean
            self._norm_scale = _scale(normaliser.std)
            self._norm_clip = normaliser.clip
        self.valid_from = self.pipeline.warmup
        c = self.config
        self._max_lag = max(c.returns_lags + c.trend_windows)
        self._rows: deque[tuple[float, ...]] = deque(maxlen=max(self.history, self._max_lag) + 1)
        self._ema = {w: _Ema(w) for w in c.trend_windows}
        self._ext = {
            (key, w): _Extreme(w, sign)
            for w in c.trend_windows
            for key, sign in (("top", 1.0), ("bottom", -1.0), ("ctop", 1.0), ("cbottom", -1.0))
        }  # fmt: skip
        self._clock: SessionClock | None = None
        self._clock_end = -1
        self._time = {n: np.empty(1, dtype=np.float32) for n in
                      ("tod_sin", "tod_cos", "dow_sin", "dow_cos", "session_elapsed",
                       "session_to_close")}  # fmt: skip
        self._flow: bool | None = None
        self.t = 0
        self.raw_row = np.full(len(self.names), np.nan, dtype=np.float32)
        self._writers = self._build_writers()

    def __len__(self) -> int:
        return self.t

    # --- segments -----------------------------------------------------------------------------

    def _new_segment(self, rows: list[tuple[float, ...]]) -> None:
        """Running sums restarted at a segment's first row, then fed its rows before this one."""
        self._sums = {k: _Prefix() for k in ("sq", "pk", "gk", "tr", "fs", "ft", "lv", "l1",
                                             "l2", "mv")}
        self._seg_rows = 0
        self._seg_prev: tuple[float, ...] | None = None
        self._anchor = rows[0][3] if rows else None
        for r in rows:
            self._feed_sums(r)

    def _feed_sums(self, r: tuple[float, ...]) -> None:
        """One row (log open, high, low, close, signed, total, log(1+volume)) into the sums."""
        lo_, lh, ll, lc, signed, total, logv = r
        s = self._sums
        if self._anchor is None:
            self._anchor = lc
        hl = lh - ll
        s["pk"].add(hl * hl)
        co = lc - lo_
        s["gk"].add(hl * hl * 0.5 - co * co * _GK_K)
        s["fs"].add(signed)
        s["ft"].add(total)
        s["lv"].add(logv)
        d = lc - self._anchor
        s["l1"].add(d)
        s["l2"].add(d * d)
        prev = self._seg_prev
        if prev is not None:  # series summed from the segment's second row on
            r1 = lc - prev[3]
            s["sq"].add(r1 * r1)
            s["mv"].add(abs(r1))
            s["tr"].add(max(lh, prev[3]) - min(ll, prev[3]))
        self._seg_prev = r
        self._seg_rows += 1

    # --- one bar ------------------------------------------------------------------------------

    def push(self, ts_ns: int, open_: float, high: float, low: float, close: float,
             volume: float, buy_volume: float | None = None,
             sell_volume: float | None = None) -> np.ndarray:
        """The next bar (stamped at its close): its normalised float32 row (zeros before
        `valid_from`), or the raw row when there is no normaliser. `raw_row` holds the raw one."""
        flow = buy_volume is not None and sell_volume is not None
        if self._flow is None:
            self._flow = flow
        elif flow != self._flow:
            raise DataError(f"bar {self.t}: buy/sell volume present on some bars only")
        prices = (open_, high, low, close)
        if not (min(prices) > 0.0 and max(prices) < math.inf):
            raise DataError(f"bar {self.t}: prices must be positive and finite (got {prices})")
        if not (0.0 <= volume < math.inf):
            raise DataError(f"bar {self.t}: volume must be finite and >= 0 (got {volume})")
        logs = np.log(np.array([open_, high, low, close, volume + 1.0]))
        lo_, lh, ll, lc, logv = logs.tolist()
        if flow:
            signed, total = buy_volume - sell_volume, buy_volume + sell_volume
        else:
            sign = 1.0 if close > open_ else (-1.0 if close < open_ else 0.0)
            signed, total = sign * volume, float(volume)
        row = (lo_, lh, ll, lc, signed, total, logv)
        t = self.t
        if t % self.chunk == 0:
            start = max(0, t - self.history)
            hist = list(self._rows)[len(self._rows) - (t - start):] if t > start else []
            self._new_segment(hist)
            for ema in self._ema.values():
                ema.start_chunk(lc)
        self._feed_sums(row)
        self._rows.append(row)
        out = self.raw_row
        for write in self._writers:
            write(out, row, ts_ns)
        if t < self._warm_until:
            for i, warm in enumerate(self._warmups):
                if t < warm:
                    out[i] = np.nan
        self.t = t + 1
        if self.normaliser is None:
            return out.copy()
        if t < self.valid_from:
            return np.zeros(len(self.names), dtype=np.float32)
        return self._normalise(out)

    def _normalise(self, raw: np.ndarray) -> np.ndarray:
        """`Normaliser.apply` of one row: the same float64 operations, element by element, so
        the same bits, without its per-call checks and scale."""
        x = raw.astype(np.float64)
        x -= self._norm_mean
        x *= self._norm_scale
        np.clip(x, -self._norm_clip, self._norm_clip, out=x)
        np.copyto(x, 0.0, where=np.isnan(x))
        return x.astype(np.float32)

    def _lc_ago(self, k: int) -> float:
        rows = self._rows
        return rows[-1 - k][3] if k < len(rows) and self.t >= k else _NAN

    def _build_writers(self) -> list[Callable[[np.ndarray, tuple[float, ...], int], None]]:
        c, ix = self.config, self._index
        writers = []
        for group in c.groups:
            writers.append(getattr(self, f"_writer_{group}")(c, ix))
        return writers

    def _writer_returns(self, c: FeatureConfig, ix: dict[str, int]):
        cols = [(ix[f"ret_{k}"], k) for k in c.returns_lags]

        def write(out, row, ts):
            lc = row[3]
            for i, k in cols:
                out[i] = lc - self._lc_ago(k)
        return write

    def _rv(self, w: int) -> float:
        return _root(self._sums["sq"].mean(w))

    def _writer_volatility(self, c: FeatureConfig, ix: dict[str, int]):
        windows = c.vol_windows
        cols = [(w, ix[f"rv_{w}"], ix[f"pk_{w}"], ix[f"gk_{w}"], ix[f"atr_{w}"]) for w in windows]
        ratio = ix.get("rv_ratio")

        def write(out, row, ts):
            s = self._sums
            for w, rv, pk, gk, atr in cols:
                out[rv] = self._rv(w)
                out[pk] = _root(s["pk"].mean(w) * _PK_K)
                out[gk] = _root(s["gk"].mean(w))
                out[atr] = s["tr"].mean(w)
            if ratio is not None:
                short = _floor(self._rv(windows[0]), VOL_FLOOR) / _floor(self._rv(windows[-1]),
                                                                         VOL_FLOOR)
                out[ratio] = np.log(np.array([short]))[0]
        return write

    def _writer_volume(self, c: FeatureConfig, ix: dict[str, int]):
        cols = [(w, ix[f"ofi_{w}"], ix[f"logvol_{w}"]) for w in c.volume_windows]
        ofi = ix["ofi"]

        def write(out, row, ts):
            s = self._sums
            out[ofi] = _div(row[4], row[5])
            for w, of, lv in cols:
                out[of] = _div(s["fs"].mean(w), s["ft"].mean(w))
                out[lv] = row[6] - s["lv"].mean(w)
        return write

    def _writer_trend(self, c: FeatureConfig, ix: dict[str, int]):
        unit_w = max(c.vol_windows)
        cols = [(w, ix[f"ema_dist_{w}"], ix[f"zscore_{w}"], ix[f"rsi_{w}"], ix[f"chan_{w}"],
                 math.sqrt(w)) for w in c.trend_windows]
        ext, emas = self._ext, self._ema

        def write(out, row, ts):
            s = self._sums
            _, lh, ll, lc = row[:4]
            unit = _floor(self._rv(unit_w), VOL_FLOOR)
            for w, ed, zs, rsi, chan, root_w in cols:
                out[ed] = (lc - emas[w].push(lc)) / (unit * root_w)
                m = s["l1"].mean(w)
                v = s["l2"].mean(w)
                v = v - m * m
                v = v if (math.isnan(v) or v >= 0.0) else 0.0
                mean = m + self._anchor
                std = v if math.isnan(v) else math.sqrt(v)
                top, bottom = ext[("top", w)].push(lh), ext[("bottom", w)].push(ll)
                ctop, cbottom = ext[("ctop", w)].push(lc), ext[("cbottom", w)].push(lc)
                if ctop == cbottom:
                    std = 0.0
                out[zs] = _div(lc - mean, std)
                move = s["mv"].mean(w) * w
                out[rsi] = _div(lc - self._lc_ago(w), move)
                out[chan] = _div(lc - (top + bottom) * 0.5, top - bottom)
        return write

    def _writer_time(self, c: FeatureConfig, ix: dict[str, int]):
        cols = [(ix[n], buf) for n, buf in self._time.items()]
        where = np.array([i for i, _ in cols])
        week: list[np.ndarray] = []  # the clock's table as [minute of the week, column] rows
        starts: list[int] = []
        offsets: list[int] = []

        def write(out, row, ts):
            if self._clock is None or ts > self._clock_end:
                self._clock = SessionClock(self.pipeline.session, ts, ts + _CLOCK_HORIZON_NS)
                self._clock_end = ts + _CLOCK_HORIZON_NS
                starts[:] = self._clock._starts.tolist()
                offsets[:] = self._clock._offsets.tolist()
                table = self._clock._table()
                week[:] = [np.stack([table[n][:MIN_PER_WEEK] for n in self._time], axis=1)]
            # `SessionClock.write` of one stamp: on a whole local minute, the table's row for
            # the minute of the week (what `write` looks up); otherwise its own arithmetic
            local = ts + offsets[bisect_right(starts, ts // NS_PER_S)] * NS_PER_S
            if local % NS_PER_MIN == 0:
                out[where] = week[0][local // NS_PER_MIN % MIN_PER_WEEK]
                return
            self._clock.write(np.array([ts], dtype=np.int64), self._time)
            for i, buf in cols:
                out[i] = buf[0]
        return write
