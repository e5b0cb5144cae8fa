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

The per-bar arithmetic runs as one compiled call (`_row`, a Numba kernel over preallocated
ring buffers, ~3 us a bar where the same Python took ~28 us), with the same float64 operations
in the same order: Numba keeps IEEE semantics (no fast-math, no fused multiply-add), which the
bit-identity tests check. The logs stay numpy's: the inputs' five go through one `np.log` call
before the kernel, `rv_ratio`'s one after it.

Only the fitted normaliser (what a checkpoint stores) is supported; the causal rolling z-score
is not computed here.
"""

from __future__ import annotations

import math

import numba
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
_GROUPS = ("returns", "volatility", "volume", "trend", "crosses", "time")
"""The groups `push` computes (all of `config.GROUPS`); another in the config is refused (its
columns would stay NaN)."""
_TIME = ("tod_sin", "tod_cos", "dow_sin", "dow_cos", "session_elapsed", "session_to_close")

# the running sums, restarted at each segment: the first three sum from its second row on
SQ, MV, TR, PK, GK, FS, FT, LV, L1, L2 = range(10)
# a stored row: logs of open, high, low, close, signed and total volume, log(1 + volume)
LO, LH, LL, LC, SIGNED, TOTAL, LOGV = range(7)
# the EMA's state per trend window, and its constants
E_ANCHOR, E_STATE, E_CUM, E_CARRY, E_LAST, E_STARTED, E_I = range(7)
E_ALPHA, E_STEP, E_RATIO, E_B = range(4)
# kernel scalars: segment rows fed, the segment's anchor (first log close) as int-less float
S_ROWS, S_ANCHOR = range(2)


def _spec(rows: list[tuple[int, ...]], width: int) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(len(rows), width)


class IncrementalFeatures:
    """Feature rows of a bar series fed one bar at a time (`push`), equal bit for bit to
    `FeaturePipeline(config, session).raw(bars)` and, with a fitted `normaliser`, to
    `.transform(bars, normaliser=normaliser).values` row by row."""

    def __init__(self, config: FeatureConfig | None = None, session: Session | None = None,
                 normaliser: Normaliser | None = None):
        self.pipeline = batch.FeaturePipeline(config, session)
        self.config = c = self.pipeline.config
        self.normaliser = normaliser
        if normaliser is not None and normaliser.names != tuple(self.pipeline.names):
            raise DataError(
                f"incremental features: the normaliser was fitted on {len(normaliser.names)} "
                f"features, this config builds {self.pipeline.n_features}")
        self.chunk = batch.CHUNK
        self.history = self.pipeline.history
        self.names = tuple(self.pipeline.names)
        ix = {n: i for i, n in enumerate(self.names)}
        n = len(self.names)
        self.valid_from = self.pipeline.warmup
        self._warm = np.array([s.warmup for s in self.pipeline.specs], dtype=np.int64)
        if normaliser is not None:
            self._norm = (np.asarray(normaliser.mean, dtype=np.float64),
                          np.asarray(_scale(normaliser.std), dtype=np.float64),
                          float(normaliser.clip))
        else:
            self._norm = (np.zeros(n), np.zeros(n), -1.0)  # clip < 0: no normaliser
        groups = set(c.groups)
        unknown = sorted(groups - set(_GROUPS))
        if unknown:
            raise DataError(f"incremental features: group(s) {', '.join(unknown)} not computed "
                            f"bar by bar (only {', '.join(_GROUPS)})")
        # which columns each group writes, with its windows (an empty table: group absent)
        self._returns = _spec([(k, ix[f"ret_{k}"]) for k in c.returns_lags]
                              if "returns" in groups else [], 2)
        vol = "volatility" in groups
        self._vol = _spec([(w, ix[f"rv_{w}"], ix[f"pk_{w}"], ix[f"gk_{w}"], ix[f"atr_{w}"])
                           for w in c.vol_windows] if vol else [], 5)
        self._ratio = ix.get("rv_ratio") if vol else None
        volume = "volume" in groups
        self._volume = _spec([(w, ix[f"ofi_{w}"], ix[f"logvol_{w}"]) for w in c.volume_windows]
                             if volume else [], 3)
        trend = "trend" in groups
        self._trend = _spec([(w, ix[f"ema_dist_{w}"], ix[f"zscore_{w}"], ix[f"rsi_{w}"],
                              ix[f"chan_{w}"]) for w in c.trend_windows] if trend else [], 5)
        crosses = "crosses" in groups
        self._crosses = _spec([(fast, slow, ix[f"cross_{fast}_{slow}"])
                               for fast, slow in c.cross_pairs] if crosses else [], 3)
        self._has_time = "time" in groups
        self._time_cols = np.array([ix[k] for k in _TIME] if self._has_time else [],
                                   dtype=np.int64)
        slow = [s for _, s in c.cross_pairs] if crosses else []
        windows = [*c.vol_windows, *c.volume_windows, *c.trend_windows, *slow, *c.returns_lags, 1]
        ring = max(self.history, *windows) + 1
        self._misc = np.array([
            ix["ofi"] if volume else -1, max(c.vol_windows) if c.vol_windows else 1,
            self.chunk, self.history,
        ], dtype=np.int64)  # fmt: skip
        self._rows = np.zeros((ring, 7))
        self._sums = np.zeros((10, 1 << int(max(windows) + 1).bit_length()))
        self._seg = np.zeros(2)
        self._ema, self._ema_const, self._ema_powers = _ema_tables(c.trend_windows if trend else [])
        self._clock: SessionClock | None = None
        self._clock_end = -1
        self._clock_arrays = (np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64),
                              np.zeros((1, len(_TIME)), dtype=np.float32))
        self._time = {k: np.empty(1, dtype=np.float32) for k in _TIME}
        self._flow: bool | None = None
        self._inputs = np.empty(5)  # open, high, low, close, 1 + volume; then their logs
        self._one = np.empty(1)  # rv_ratio's log
        self.t = 0
        self.raw_row = np.full(n, np.nan, dtype=np.float32)
        self._compile()

    def _compile(self) -> None:
        """Load the kernels now (compiled once, then read from Numba's cache: ~0.3 s in a
        process's first instance), on scratch copies of the state, so the first bar doesn't
        wait."""
        scratch = [a.copy() for a in (self._rows, self._sums, self._seg, self._ema)]
        _row(0, 0, np.ones(5), 0.0, 0.0, *scratch, self._ema_const, self._ema_powers,
             self._returns, self._vol, self._volume, self._trend, self._crosses, self._misc,
             *self._clock_arrays, self._time_cols, self.raw_row.copy())
        _finish(0, self.raw_row.copy(), self._warm, self.valid_from, *self._norm,
                np.empty(len(self.raw_row), dtype=np.float32))

    def __len__(self) -> int:
        return self.t

    def push(self, ts_ns: int, open_: float, high: float, low: float, close: float,
             volume: float, buy_volume: float | None = None,
             sell_volume: float | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """The next bar (stamped at its close): its normalised float32 row (zeros before
        `valid_from`), or the raw row when there is no normaliser, in `out` (a float32 array
        of one row, say a slot of an observation) or a new array. `raw_row` holds the raw
        one."""
        flow = buy_volume is not None and sell_volume is not None
        if self._flow is None:
            self._flow = flow
        elif flow != self._flow:
            raise DataError(f"bar {self.t}: buy/sell volume present on some bars only")
        if not (min(open_, high, low, close) > 0.0 and max(open_, high, low, close) < math.inf):
            raise DataError(f"bar {self.t}: prices must be positive and finite (got "
                            f"{(open_, high, low, close)})")
        if not (0.0 <= volume < math.inf):
            raise DataError(f"bar {self.t}: volume must be finite and >= 0 (got {volume})")
        if flow:
            signed, total = buy_volume - sell_volume, buy_volume + sell_volume
        else:
            sign = 1.0 if close > open_ else (-1.0 if close < open_ else 0.0)
            signed, total = sign * volume, volume
        logs = self._inputs
        logs[0], logs[1], logs[2], logs[3], logs[4] = open_, high, low, close, volume + 1.0
        np.log(logs, out=logs)
        if self._has_time and ts_ns > self._clock_end:
            self._new_clock(ts_ns)
        t, raw = self.t, self.raw_row
        short, whole_minute = _row(
            t, ts_ns, logs, float(signed), float(total), self._rows, self._sums, self._seg,
            self._ema, self._ema_const, self._ema_powers, self._returns, self._vol, self._volume,
            self._trend, self._crosses, self._misc, *self._clock_arrays, self._time_cols, raw)
        if self._ratio is not None:  # numpy's log, as the batch pipeline takes it
            self._one[0] = short
            np.log(self._one, out=self._one)
            raw[self._ratio] = self._one[0]
        if self._has_time and not whole_minute:
            assert self._clock is not None
            self._clock.write(np.array([ts_ns], dtype=np.int64), self._time)
            for i, name in zip(self._time_cols, _TIME, strict=True):
                raw[i] = self._time[name][0]
        self.t = t + 1
        if out is None:
            out = np.empty(len(raw), dtype=np.float32)
        _finish(t, raw, self._warm, self.valid_from, *self._norm, out)
        return out

    def _new_clock(self, ts: int) -> None:
        """The session clock over the next `_CLOCK_HORIZON_NS`, with its table of a week's
        minutes (what `SessionClock.write` looks up for a whole-minute stamp)."""
        clock = self._clock = SessionClock(self.pipeline.session, ts, ts + _CLOCK_HORIZON_NS)
        self._clock_end = ts + _CLOCK_HORIZON_NS
        table = clock._table()
        week = np.ascontiguousarray(np.stack([table[k][:MIN_PER_WEEK] for k in _TIME], axis=1))
        self._clock_arrays = (np.ascontiguousarray(clock._starts, dtype=np.int64),
                              np.ascontiguousarray(clock._offsets, dtype=np.int64), week)


def _ema_tables(windows: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(state [W, 7], constants [W, 4], powers [W, 2, b]: beta^j and alpha beta^j) of
    `rolling.ema_rows`' block closed form per window."""
    state = np.zeros((len(windows), 7))
    const = np.zeros((len(windows), 4))
    blocks = []
    for i, w in enumerate(windows):
        alpha = 2.0 / (w + 1)
        beta = 1.0 - alpha
        b = int(min(max(1.0, 600.0 / -math.log(beta)), rolling.MAX_BLOCK))
        const[i] = (alpha, beta**b, beta / alpha, b)
        blocks.append((rolling._powers(beta, b), rolling._scaled_powers(alpha, beta, b)))
    width = max((len(d) for d, _ in blocks), default=1)
    powers = np.ones((len(windows), 2, width))
    for i, (down, scale) in enumerate(blocks):
        powers[i, 0, :len(down)] = down
        powers[i, 1, :len(scale)] = scale
    return state, const, powers


# --- the kernel: one bar ----------------------------------------------------------------------
# Each helper redoes, for one value, the batch's float64 operation sequence (see the module
# docstring); comments name the `rolling` / `segment` function it stands for.

_KERNEL = {"cache": True, "error_model": "numpy"}


@numba.njit(**_KERNEL)
def _floor(x, floor):
    """np.maximum(x, floor) for one value: NaN stays NaN."""
    return x if (math.isnan(x) or x >= floor) else floor


@numba.njit(**_KERNEL)
def _div(num, den):
    """`rolling.safe_div` for one value: num / den where den > 0, else 0."""
    return num / den if den > 0.0 else 0.0


@numba.njit(**_KERNEL)
def _root(x):
    """`rolling.root` for one value."""
    return math.sqrt(x) if x >= 0.0 else (x if math.isnan(x) else 0.0)


@numba.njit(**_KERNEL)
def _count(sums_seg, s):
    rows = int(sums_seg[S_ROWS])
    return max(rows - 1, 0) if s <= TR else rows


@numba.njit(**_KERNEL)
def _mean(sums, seg, s, w):
    """Window mean of series s as `rolling.Sums` reads it: (q[n] - q[n - w]) * (1 / w) of the
    left-to-right prefix sums since the segment started, NaN before w values."""
    n = _count(seg, s)
    if n < w:
        return np.nan
    mask = sums.shape[1] - 1
    return (sums[s, n & mask] - sums[s, (n - w) & mask]) * (1.0 / w)


@numba.njit(**_KERNEL)
def _add(sums, seg, s, x):
    n = _count(seg, s)
    mask = sums.shape[1] - 1
    sums[s, (n + 1) & mask] = sums[s, n & mask] + x


@numba.njit(**_KERNEL)
def _feed(sums, seg, row, prev):
    """One row into the segment's sums (`prev`: the row before it, None-like when empty)."""
    lo_, lh, ll, lc = row[LO], row[LH], row[LL], row[LC]
    if seg[S_ROWS] == 0:
        seg[S_ANCHOR] = lc
    hl = lh - ll
    co = lc - lo_
    d = lc - seg[S_ANCHOR]
    if seg[S_ROWS] > 0:  # series summed from the segment's second row on
        pc = prev[LC]
        r1 = lc - pc
        _add(sums, seg, SQ, r1 * r1)
        _add(sums, seg, MV, abs(r1))
        # Python's max(lh, pc) and min(ll, pc), as the batch took them
        top = pc if pc > lh else lh  # noqa: FURB136
        bottom = pc if pc < ll else ll  # noqa: FURB136
        _add(sums, seg, TR, top - bottom)
    _add(sums, seg, PK, hl * hl)
    _add(sums, seg, GK, hl * hl * 0.5 - co * co * _GK_K)
    _add(sums, seg, FS, row[SIGNED])
    _add(sums, seg, FT, row[TOTAL])
    _add(sums, seg, LV, row[LOGV])
    _add(sums, seg, L1, d)
    _add(sums, seg, L2, d * d)
    seg[S_ROWS] += 1


@numba.njit(**_KERNEL)
def _ema_start(e, x0):
    """A chunk starts: anchor at its first value, the previous chunk's last value as state."""
    e[E_ANCHOR] = x0
    e[E_STATE] = e[E_LAST] - x0 if e[E_STARTED] else 0.0
    e[E_I] = 0.0
    e[E_CUM] = 0.0


@numba.njit(**_KERNEL)
def _ema_push(e, const, powers, x):
    """`rolling.ema_rows` one value at a time: y = (cumsum + carry) * alpha beta^j + anchor
    within blocks of b rows, the carry from the block before."""
    i = int(e[E_I])
    if i == 0:
        e[E_CARRY] = e[E_STATE] * const[E_RATIO]
    e[E_CUM] += (x - e[E_ANCHOR]) / powers[0, i]
    y = (e[E_CUM] + e[E_CARRY]) * powers[1, i] + e[E_ANCHOR]
    if i == int(const[E_B]) - 1:  # the block is complete: the next block's state
        e[E_STATE] = const[E_STEP] * e[E_STATE] + e[E_CUM] * powers[1, i]
        e[E_I] = 0.0
        e[E_CUM] = 0.0
    else:
        e[E_I] = i + 1.0
    e[E_LAST] = y
    e[E_STARTED] = 1.0
    return y


@numba.njit(**_KERNEL)
def _extreme(rows, t, w, col, sign):
    """Max (sign 1) or min (sign -1) of the last w values of a row column, NaN before w rows
    (exact: any order gives the same value)."""
    if t + 1 < w:
        return np.nan
    ring = rows.shape[0]
    best = rows[(t - w + 1) % ring, col]
    for k in range(t - w + 2, t + 1):
        v = rows[k % ring, col]
        if v * sign >= best * sign:
            best = v
    return best


@numba.njit(**_KERNEL)
def _row(t, ts, logs, signed, total, rows, sums, seg, ema, ema_const, ema_powers, returns, vol,
         volume, trend, crosses, misc, starts, offsets, week, time_cols, out):
    """Bar t into the state, its raw row into `out` (float32) but rv_ratio, whose log the
    caller takes: returns (rv_ratio's argument, whether the time columns were written)."""
    ring = rows.shape[0]
    row = rows[t % ring]
    row[LO], row[LH], row[LL], row[LC] = logs[0], logs[1], logs[2], logs[3]
    row[SIGNED], row[TOTAL], row[LOGV] = signed, total, logs[4]
    lc = row[LC]
    ofi_col, unit_w, chunk, history = misc[0], misc[1], misc[2], misc[3]
    if t % chunk == 0:  # a new segment: the sums restart from the `history` rows before it
        seg[S_ROWS] = 0.0
        sums[:, 0] = 0.0
        start = max(0, t - history)
        for k in range(start, t):
            _feed(sums, seg, rows[k % ring], rows[(k - 1) % ring])
        for j in range(ema.shape[0]):
            _ema_start(ema[j], lc)
    _feed(sums, seg, row, rows[(t - 1) % ring])

    for j in range(returns.shape[0]):
        k = returns[j, 0]
        out[returns[j, 1]] = lc - (rows[(t - k) % ring, LC] if k <= t else np.nan)

    short = np.nan
    for j in range(vol.shape[0]):
        w = vol[j, 0]
        out[vol[j, 1]] = _root(_mean(sums, seg, SQ, w))
        out[vol[j, 2]] = _root(_mean(sums, seg, PK, w) * _PK_K)
        out[vol[j, 3]] = _root(_mean(sums, seg, GK, w))
        out[vol[j, 4]] = _mean(sums, seg, TR, w)
    if vol.shape[0]:
        short = (_floor(_root(_mean(sums, seg, SQ, vol[0, 0])), VOL_FLOOR)
                 / _floor(_root(_mean(sums, seg, SQ, vol[vol.shape[0] - 1, 0])), VOL_FLOOR))

    if ofi_col >= 0:
        out[ofi_col] = _div(signed, total)
        for j in range(volume.shape[0]):
            w = volume[j, 0]
            out[volume[j, 1]] = _div(_mean(sums, seg, FS, w), _mean(sums, seg, FT, w))
            out[volume[j, 2]] = row[LOGV] - _mean(sums, seg, LV, w)

    if trend.shape[0]:
        unit = _floor(_root(_mean(sums, seg, SQ, unit_w)), VOL_FLOOR)
        for j in range(trend.shape[0]):
            w = trend[j, 0]
            out[trend[j, 1]] = ((lc - _ema_push(ema[j], ema_const[j], ema_powers[j], lc))
                                / (unit * math.sqrt(w)))
            m = _mean(sums, seg, L1, w)
            v = _mean(sums, seg, L2, w)
            v = v - m * m
            v = v if (math.isnan(v) or v >= 0.0) else 0.0
            mean = m + seg[S_ANCHOR]
            std = v if math.isnan(v) else math.sqrt(v)
            top, bottom = _extreme(rows, t, w, LH, 1.0), _extreme(rows, t, w, LL, -1.0)
            if _extreme(rows, t, w, LC, 1.0) == _extreme(rows, t, w, LC, -1.0):
                std = 0.0
            out[trend[j, 2]] = _div(lc - mean, std)
            move = _mean(sums, seg, MV, w) * w
            out[trend[j, 3]] = _div(lc - (rows[(t - w) % ring, LC] if w <= t else np.nan), move)
            out[trend[j, 4]] = _div(lc - (top + bottom) * 0.5, top - bottom)

    if crosses.shape[0]:
        # `Segment.crosses`: both window means of the anchored level before the anchor is
        # added back (it cancels), fast minus slow, over (unit * sqrt(slow))
        unit = _floor(_root(_mean(sums, seg, SQ, unit_w)), VOL_FLOOR)
        for j in range(crosses.shape[0]):
            fast, slow = crosses[j, 0], crosses[j, 1]
            cross = _mean(sums, seg, L1, fast) - _mean(sums, seg, L1, slow)
            out[crosses[j, 2]] = cross / (unit * math.sqrt(slow))

    if time_cols.shape[0]:
        # `SessionClock.write` of one stamp on a whole local minute: the table's row for the
        # minute of the week; any other stamp is left to the caller
        local = ts + offsets[np.searchsorted(starts, ts // NS_PER_S, side="right")] * NS_PER_S
        if local % NS_PER_MIN != 0:
            return short, False
        minute = week[local // NS_PER_MIN % MIN_PER_WEEK]
        for j in range(time_cols.shape[0]):
            out[time_cols[j]] = minute[j]
    return short, True


@numba.njit(**_KERNEL)
def _finish(t, raw, warm, valid_from, mean, scale, clip, out):
    """Warm-up columns of `raw` to NaN; into `out` a copy, or with a normaliser (clip >= 0)
    the row `Normaliser.apply` gives: (x - mean) * scale clipped, NaN to 0, as float32 (zeros
    before `valid_from`). (Writing into the caller's array: a returned array costs a dtype
    unpickle a call.)"""
    n = raw.shape[0]
    for i in range(n):
        if t < warm[i]:
            raw[i] = np.nan
    if clip < 0.0:
        out[:] = raw
        return
    if t < valid_from:
        out[:] = 0.0
        return
    for i in range(n):
        x = (np.float64(raw[i]) - mean[i]) * scale[i]
        if x < -clip:
            x = -clip
        elif x > clip:
            x = clip
        out[i] = 0.0 if math.isnan(x) else x
