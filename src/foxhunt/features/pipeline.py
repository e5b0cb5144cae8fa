"""Causal bar features in named groups (SPEC §2 Features) and their normalisation (SPEC §3).

The feature row for bar t is a function of bars[0..t] only: every kernel reads rows <= t, and
nothing is computed over the whole array except bounds used for checks. Groups are laid out in
the fixed order of `GROUPS`, each as a contiguous block of columns, so a variable-selection layer
can weight them. Prices enter through logs, so features are scale-free and one config serves
ES and CL alike.
"""

from __future__ import annotations

import math
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from foxhunt.data.instruments import Session
from foxhunt.data.series import Bars
from foxhunt.errors import DataError
from foxhunt.features.calendar import SessionClock
from foxhunt.features.config import FeatureConfig
from foxhunt.features import normalise
from foxhunt.features.normalise import Normaliser, RollingZScore
from foxhunt.features.rolling import ema, lag_diff, prefix_sum_1d

PASSTHROUGH_GROUPS = frozenset({"time"})
VOL_FLOOR = 1e-10
CHUNK = 8000
_GK_K = 2.0 * math.log(2.0) - 1.0
_PK_K = 1.0 / (4.0 * math.log(2.0))


@dataclass(frozen=True)
class FeatureSpec:
    """One column: `warmup` is the first row at which it is defined (earlier rows are NaN raw)."""

    name: str
    group: str
    warmup: int
    description: str


@dataclass(frozen=True, eq=False)
class FeatureMatrix:
    """Normalised features, float32 [T, F]; rows before `valid_from` are all zero (warm-up)."""

    values: np.ndarray
    names: tuple[str, ...]
    groups: dict[str, list[int]]
    ts: np.ndarray
    valid_from: int
    normaliser: Normaliser | None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def n_features(self) -> int:
        return self.values.shape[1]

    def group(self, name: str) -> np.ndarray:
        """The columns of one group, [T, F_group] (a view)."""
        idx = self.groups[name]
        return self.values[:, idx[0] : idx[-1] + 1]


def _bars(k: int) -> str:
    return f"{k} bar" if k == 1 else f"{k} bars"


def _specs(cfg: FeatureConfig) -> list[FeatureSpec]:
    """Every column in order, with the first row at which it is defined (its warm-up)."""
    unit = max(cfg.vol_windows)
    out: list[FeatureSpec] = []

    def add(group: str, name: str, warmup: int, description: str) -> None:
        out.append(FeatureSpec(name, group, warmup, description))

    for g in cfg.groups:
        if g == "returns":
            for k in cfg.returns_lags:
                add(g, f"ret_{k}", k, f"log return over {_bars(k)}")
        elif g == "volatility":
            for w in cfg.vol_windows:
                add(g, f"rv_{w}", w, f"realised vol: RMS of 1-bar log returns over {_bars(w)}")
                add(g, f"pk_{w}", w - 1, f"Parkinson high-low range vol over {_bars(w)}")
                add(g, f"gk_{w}", w - 1, f"Garman-Klass OHLC vol over {_bars(w)}")
                add(g, f"atr_{w}", w, f"mean log true range (ATR / price) over {_bars(w)}")
            if len(cfg.vol_windows) > 1:
                short = cfg.vol_windows[0]
                add(g, "rv_ratio", unit, f"log(rv_{short} / rv_{unit}): vol regime shift")
        elif g == "volume":
            add(g, "ofi", 0, "order-flow imbalance (buy-sell)/(buy+sell) of the bar; "
                "sign(close-open) when the bars carry no buy/sell volume")
            for w in cfg.volume_windows:
                add(g, f"ofi_{w}", w - 1, f"order-flow imbalance over {_bars(w)}")
                add(g, f"logvol_{w}", w - 1, f"log(1+volume) minus its mean over {_bars(w)}")
        elif g == "trend":
            for w in cfg.trend_windows:
                add(g, f"ema_dist_{w}", max(2 * w, unit),
                    f"log close minus its EMA (span {w}), in units of rv_{unit} * sqrt({w})")
                add(g, f"zscore_{w}", w - 1,
                    f"z-score of log close within {_bars(w)} (mean reversion)")
                add(g, f"rsi_{w}", w,
                    f"RSI-like, -1..1: sum of 1-bar returns / sum of their sizes over {_bars(w)}")
                add(g, f"chan_{w}", w - 1,
                    f"close within the high-low channel of {_bars(w)}, -0.5..0.5")
        elif g == "time":
            add(g, "tod_sin", 0, "time of day in the session's zone, sine")
            add(g, "tod_cos", 0, "time of day in the session's zone, cosine")
            add(g, "dow_sin", 0, "day of week (plus time of day), sine")
            add(g, "dow_cos", 0, "day of week (plus time of day), cosine")
            add(g, "session_elapsed", 0,
                "time since the session opened / session length, 0..1 (1 outside the session)")
            add(g, "session_to_close", 0,
                "log(1 + minutes to the session close) / log(1 + session minutes), 0..1")
    return out


def _root(mean_square: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """sqrt of a rolling mean of squares, which prefix-sum rounding can push a hair below 0."""
    np.maximum(mean_square, 0.0, out=mean_square)
    return np.sqrt(mean_square, out=mean_square if out is None else out)


def _safe_div(num: np.ndarray, den: np.ndarray, out: np.ndarray) -> None:
    """`safe_div` into `out` (any float dtype): num / den where den > 0, else 0."""
    ok = den > 0.0
    if ok.all():
        np.divide(num, den, out=out)
    else:
        z = np.zeros(len(num))
        np.divide(num, den, out=z, where=ok)
        out[...] = z


class _Sums:
    """Prefix sums of one segment series from row `start` on (minus an anchor for a level), read
    back as rolling means at the rows the caller keeps. Rows before `start + w - 1` are NaN."""

    def __init__(self, x: np.ndarray, start: int = 0, variance: bool = False,
                 anchor: bool = False):
        self.n, self.start = len(x), start
        self.anchor = float(x[start]) if anchor and start < len(x) else 0.0
        d = x[start:] - self.anchor if anchor else np.ascontiguousarray(x[start:])
        self.q1 = prefix_sum_1d(d)
        self.q2 = prefix_sum_1d(np.square(d, out=d) if anchor else np.square(d)) \
            if variance else None

    def _diff(self, q: np.ndarray, w: int, keep: int, out: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """(window sums / w at rows [keep, n), the part of it at rows >= start + w - 1).

        `out` may be a float32 row: the float64 result is rounded into it."""
        if out is None:
            out = np.empty(self.n - keep)
        t0 = max(keep, self.start + w - 1)
        out[: t0 - keep] = np.nan
        dst = out[t0 - keep :]
        if len(dst):
            a = t0 - self.start + 1
            if dst.dtype == np.float64:
                np.subtract(q[a:], q[a - w : len(q) - w], out=dst)
                dst *= 1.0 / w
            else:
                np.multiply(q[a:] - q[a - w : len(q) - w], 1.0 / w, out=dst)
        return out, dst

    def mean(self, w: int, keep: int) -> np.ndarray:
        out, dst = self._diff(self.q1, w, keep)
        if self.anchor:
            dst += self.anchor
        return out

    def mean_var(self, w: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population variance at rows [keep, n); needs `variance=True`."""
        assert self.q2 is not None
        mean, m = self._diff(self.q1, w, keep)
        var, v = self._diff(self.q2, w, keep)
        v -= m * m
        np.maximum(v, 0.0, out=v)
        m += self.anchor
        return mean, var


def _extremes(x: np.ndarray, windows: list[int], op: np.ufunc, keep: int
              ) -> dict[int, np.ndarray]:
    """`rolling_extremes` of `x` at rows [keep, n) only (max and min are exact, so the bits
    are those of the full ladder); rows before w - 1 are NaN."""
    n = len(x)
    out: dict[int, np.ndarray] = {}
    level, p = x, 1
    for w in sorted(windows):
        while 2 * p <= w:
            nxt = np.empty(n)
            nxt[:p] = np.nan
            if p < n:
                op(level[p:], level[:-p], out=nxt[p:])
            level, p = nxt, 2 * p
        t0 = max(keep, w - 1)
        if w == p > 1 and t0 == keep:
            out[w] = level[keep:]  # a view; the ladder's later levels are already built
            continue
        res = np.empty(n - keep)
        res[: t0 - keep] = np.nan
        if w == p:
            res[t0 - keep :] = level[t0:]
        elif t0 < n:
            op(level[t0:], level[t0 - (w - p) : n - (w - p)], out=res[t0 - keep :])
        out[w] = res
    return out


class _Segment:
    """Bars [lo, hi) of a series: one chunk plus the history rows its windows reach back into.

    Group methods write their columns for the rows from `keep` on (the chunk, which has full
    history) straight into float32 destination rows; window sums run over the whole segment,
    and intermediates are computed once and shared by groups. The arithmetic is that of the
    `rolling` kernels (prefix sums restarted per segment, the same operations in the same
    order), evaluated at the kept rows only.
    """

    def __init__(self, bars: Bars, lo: int, hi: int, keep: int, cfg: FeatureConfig):
        self.cfg, self.keep = cfg, keep
        self._rv: dict[int, np.ndarray] = {}
        self.o, self.h, self.l = bars.open[lo:hi], bars.high[lo:hi], bars.low[lo:hi]
        self.c, self.v, self.ts = bars.close[lo:hi], bars.volume[lo:hi], bars.ts[lo:hi]
        self.buy = bars.buy_volume[lo:hi] if bars.has_flow else None
        self.sell = bars.sell_volume[lo:hi] if bars.has_flow else None

    @cached_property
    def lc(self) -> np.ndarray:
        return np.log(self.c)

    @cached_property
    def lh(self) -> np.ndarray:
        return np.log(self.h)

    @cached_property
    def ll(self) -> np.ndarray:
        return np.log(self.l)

    @cached_property
    def r1(self) -> np.ndarray:
        return lag_diff(self.lc, 1)

    @cached_property
    def sq_returns(self) -> _Sums:
        return _Sums(np.square(self.r1[1:]))

    def rv(self, w: int) -> np.ndarray:
        """Realised vol at the kept rows (float64)."""
        if w not in self._rv:
            # sq_returns holds r1[1:]^2, so its row j is segment row j + 1
            keep = self.keep - 1
            out, dst = self.sq_returns._diff(self.sq_returns.q1, w, max(keep, 0))
            if keep < 0:  # keep == 0: row 0 has no return
                out = np.concatenate(([np.nan], out))
            self._rv[w] = _root(out)
        return self._rv[w]

    def _lag(self, x: np.ndarray, k: int, out: np.ndarray) -> None:
        """x[t] - x[t - k] at the kept rows into `out`, NaN for t < k."""
        t0 = max(self.keep, k)
        out[: t0 - self.keep] = np.nan
        if t0 < len(x):
            np.subtract(x[t0:], x[t0 - k : len(x) - k], out=out[t0 - self.keep :])

    def returns(self, dst: dict[str, np.ndarray]) -> None:
        for k in self.cfg.returns_lags:
            self._lag(self.lc, k, dst[f"ret_{k}"])

    def volatility(self, dst: dict[str, np.ndarray]) -> None:
        keep = self.keep
        windows = self.cfg.vol_windows
        hl = self.lh - self.ll
        co = self.lc - np.log(self.o)
        hl2 = np.square(hl, out=hl)
        parkinson = _Sums(hl2)
        hl2 *= 0.5
        np.square(co, out=co)
        co *= _GK_K
        hl2 -= co
        garman_klass = _Sums(hl2)
        true_range = np.maximum(self.lh[1:], self.lc[:-1])
        true_range -= np.minimum(self.ll[1:], self.lc[:-1], out=co[1:])
        ranges = _Sums(true_range)  # from row 1: row j of ranges is segment row j + 1
        for w in windows:
            dst[f"rv_{w}"][...] = self.rv(w)
            pk = parkinson.mean(w, keep)
            pk *= _PK_K
            _root(pk, out=dst[f"pk_{w}"])
            _root(garman_klass.mean(w, keep), out=dst[f"gk_{w}"])
            atr = dst[f"atr_{w}"]
            if keep >= 1:
                ranges._diff(ranges.q1, w, keep - 1, out=atr)
            else:
                atr[0] = np.nan
                ranges._diff(ranges.q1, w, 0, out=atr[1:])
        if len(windows) > 1:
            short = np.maximum(self.rv(windows[0]), VOL_FLOOR)
            short /= np.maximum(self.rv(windows[-1]), VOL_FLOOR)
            np.log(short, out=dst["rv_ratio"])

    def volume(self, dst: dict[str, np.ndarray]) -> None:
        keep = self.keep
        if self.buy is not None and self.sell is not None:
            signed, total = self.buy - self.sell, self.buy + self.sell
        else:
            signed, total = np.sign(self.c - self.o) * self.v, self.v
        flow_signed, flow_total = _Sums(signed), _Sums(total)
        logv = np.log(self.v + 1.0)
        logv_means = _Sums(logv)
        _safe_div(signed[keep:], total[keep:], dst["ofi"])
        for w in self.cfg.volume_windows:
            _safe_div(flow_signed.mean(w, keep), flow_total.mean(w, keep), dst[f"ofi_{w}"])
            np.subtract(logv[keep:], logv_means.mean(w, keep), out=dst[f"logvol_{w}"])

    def trend(self, dst: dict[str, np.ndarray], ema_state: dict[int, float]) -> None:
        """`ema_state` carries each EMA's last value from the previous chunk and is updated.

        A window of equal closes has a variance of exactly zero, but prefix sums leave rounding
        dust in it; the close's own rolling max == min marks those windows, so their z-score is
        0 rather than dust / dust.
        """
        keep = self.keep
        lc = self.lc
        lck = lc[keep:]
        unit = np.maximum(self.rv(max(self.cfg.vol_windows)), VOL_FLOOR)
        windows = self.cfg.trend_windows
        levels = _Sums(lc, variance=True, anchor=True)
        moves = _Sums(np.abs(self.r1[1:]))  # from row 1
        tops = _extremes(self.lh, windows, np.maximum, keep)
        bottoms = _extremes(self.ll, windows, np.minimum, keep)
        close_top = _extremes(lc, windows, np.maximum, keep)
        close_bottom = _extremes(lc, windows, np.minimum, keep)
        for w in windows:
            smooth = ema(lck, 2.0 / (w + 1), ema_state.get(w))
            ema_state[w] = float(smooth[-1])
            np.subtract(lck, smooth, out=smooth)
            np.divide(smooth, unit * math.sqrt(w), out=dst[f"ema_dist_{w}"])
            mean, var = levels.mean_var(w, keep)
            std = np.sqrt(var, out=var)
            flat = close_top[w] == close_bottom[w]
            if flat.any():
                std[flat] = 0.0
            np.subtract(lck, mean, out=mean)
            _safe_div(mean, std, dst[f"zscore_{w}"])
            change = np.empty(len(lck))
            self._lag(lc, w, change)
            if keep >= 1:
                move, _ = moves._diff(moves.q1, w, keep - 1)
            else:
                move = np.empty(len(lck))
                move[0] = np.nan
                moves._diff(moves.q1, w, 0, out=move[1:])
            move *= w
            _safe_div(change, move, dst[f"rsi_{w}"])
            top, bottom = tops[w], bottoms[w]
            mid = top + bottom
            mid *= 0.5
            np.subtract(lck, mid, out=mid)
            np.subtract(top, bottom, out=top)
            _safe_div(mid, top, dst[f"chan_{w}"])


def _row_length(n: int) -> int:
    """n rounded up to an odd multiple of 16 floats: a row stride that is a large power of two
    makes every transpose of the matrix hit the same cache sets and run several times slower."""
    m = -(-n // 16) * 16
    return m + 16 if (m // 16) % 2 == 0 else m


def _check_prices(bars: Bars) -> None:
    """Logs need positive prices; a bad row fails here with its number, not as NaN features."""
    for name in ("open", "high", "low", "close"):
        col = getattr(bars, name)
        if not (col.min() > 0.0 and col.max() < np.inf):  # a NaN fails the first test
            row = int(np.argmax(~(np.isfinite(col) & (col > 0.0))))
            raise DataError(
                f"bars row {row}: {name} must be a positive finite price (got {col[row]})"
            )
    for name in ("volume", "buy_volume", "sell_volume"):
        col = getattr(bars, name)
        if col is not None and not (col.min() >= 0.0 and col.max() < np.inf):
            row = int(np.argmax(~(np.isfinite(col) & (col >= 0.0))))
            raise DataError(f"bars row {row}: {name} must be finite and >= 0 (got {col[row]})")


class FeaturePipeline:
    """Builds the feature matrix of a bar series; the layout depends on the config only.

    `session` places the clock features in the instrument's trading session; without one the
    session is UTC, around the clock.
    """

    def __init__(self, config: FeatureConfig | None = None, session: Session | None = None):
        self.config = config or FeatureConfig()
        self.session = session or Session()
        self.specs: tuple[FeatureSpec, ...] = tuple(_specs(self.config))
        self._fixed = [s.group in PASSTHROUGH_GROUPS for s in self.specs]
        self._by_group = {g: [s for s in self.specs if s.group == g] for g in self.config.groups}

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def groups(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, s in enumerate(self.specs):
            out.setdefault(s.group, []).append(i)
        return out

    @property
    def n_features(self) -> int:
        return len(self.specs)

    @property
    def warmup(self) -> int:
        """First row at which every raw feature is defined."""
        return max(s.warmup for s in self.specs)

    @property
    def rolling_valid_from(self) -> int:
        """First row of a rolling-normalised matrix: warm-up plus one full normalisation window."""
        return self.warmup + self.config.norm_window - 1

    def describe(self) -> list[dict[str, object]]:
        """One entry per column, in column order, for `features show --json`."""
        return [
            {"index": i, "name": s.name, "group": s.group, "warmup": s.warmup,
             "description": s.description}
            for i, s in enumerate(self.specs)
        ]

    def raw(self, bars: Bars) -> np.ndarray:
        """Un-normalised features, float32 [T, F] C-contiguous; NaN where a column is in warm-up."""
        return np.ascontiguousarray(self._raw_fm(bars).T)

    def transform(
        self,
        bars: Bars,
        *,
        fit_until: int | None = None,
        normaliser: Normaliser | None = None,
    ) -> FeatureMatrix:
        """Normalised features.

        `fit_until`: fit a `Normaliser` on rows [warmup, fit_until) (a fold's training window)
        and apply it to every row. `normaliser`: apply stored statistics, fitting nothing.
        Neither: causal rolling z-score over `norm_window` rows. Rows before `valid_from` are 0.
        """
        if fit_until is not None and normaliser is not None:
            raise DataError("transform: pass fit_until or normaliser, not both")
        n = len(bars)
        if normaliser is not None:
            if normaliser.names != tuple(self.names):
                raise DataError("transform: normaliser was fitted on a different feature set "
                                f"({len(normaliser.names)} features vs {self.n_features} here)")
            valid_from = self.warmup
            self._check_length(n, valid_from, "")
            values = normaliser.apply(self._raw_fm(bars).T)
        elif fit_until is not None:
            valid_from = self.warmup
            if not valid_from + 2 <= fit_until <= n:
                raise DataError(
                    f"fit_until={fit_until} out of range: the fit window starts after the "
                    f"{valid_from}-bar warm-up and needs at least 2 rows, so fit_until must be "
                    f"in [{valid_from + 2}, {n}]"
                )
            raw = self._raw_fm(bars).T
            normaliser = Normaliser.fit(raw, self.names, valid_from, fit_until,
                                        self.config.clip, self._fixed)
            values = normaliser.apply(raw)
        else:
            valid_from = self.rolling_valid_from
            self._check_length(n, valid_from, f" and a {self.config.norm_window}-bar "
                               "normalisation window (features.norm_window)")
            values = self._rolling(bars)
        values[:valid_from] = 0.0
        names = tuple(self.names)
        return FeatureMatrix(values, names, self.groups, bars.ts, valid_from, normaliser)

    def _check_length(self, n: int, valid_from: int, extra: str) -> None:
        if n <= valid_from:
            raise DataError(
                f"{n} bars are too few: the features need a {self.warmup}-bar warm-up{extra}, "
                f"so at least {valid_from + 1} bars"
            )

    @property
    def history(self) -> int:
        """Rows before a chunk that its windows and lags can reach back into."""
        c = self.config
        return max(c.returns_lags + c.vol_windows + c.volume_windows + c.trend_windows) + 1

    def _raw_fm(self, bars: Bars) -> np.ndarray:
        """Raw features feature-major [F, T] float32, warm-up rows NaN.

        Rows are computed CHUNK at a time, each chunk with `history` rows before it, so every
        intermediate stays small and in cache; chunk bounds are fixed multiples of CHUNK, so a
        row's bits never depend on later rows or on the series length.
        """
        n = len(bars)
        self._check_length(n, self.warmup, "")
        _check_prices(bars)
        out = np.empty((self.n_features, _row_length(n)), dtype=np.float32)[:, :n]
        fill = self._filler(bars)
        for k0 in range(0, n, CHUNK):
            k1 = min(k0 + CHUNK, n)
            fill(k0, k1, out[:, k0:k1])
        for i, spec in enumerate(self.specs):
            out[i, : spec.warmup] = np.nan
        return out

    def _filler(self, bars: Bars) -> Callable[[int, int, np.ndarray], None]:
        """fill(k0, k1, dst): raw features of rows [k0, k1) into dst [F, k1 - k0] (float32).

        Chunks must come in order, k0 a multiple of CHUNK: the EMAs carry their state from one
        chunk to the next. Rows before a feature's warm-up are left undefined.
        """
        clock = SessionClock(self.session, int(bars.ts.min()), int(bars.ts.max()))
        ema_state: dict[int, float] = {}
        groups = self.config.groups
        names = self.names

        def fill(k0: int, k1: int, dst: np.ndarray) -> None:
            lo = max(0, k0 - self.history)
            seg = _Segment(bars, lo, k1, k0 - lo, self.config)
            rows = dict(zip(names, dst, strict=True))
            for group in groups:
                if group == "trend":
                    seg.trend(rows, ema_state)
                elif group == "time":
                    clock.write(seg.ts[k0 - lo :], rows)
                else:
                    getattr(seg, group)(rows)

        return fill

    def _rolling(self, bars: Bars) -> np.ndarray:
        """`rolling_zscore(self._raw_fm(bars), ...)`, bit for bit, without the raw matrix: each
        chunk of raw features goes into a small window buffer and is scaled soon after, while
        in cache, by the same `RollingZScore` arithmetic.

        With a second core available (`_second_core`), a worker thread scales chunks while this
        one computes the next raw chunks (numpy and torch release the GIL in their loops), and
        this thread takes a queued chunk itself whenever the worker falls behind. Each chunk is
        computed by the same code on the same rows either way, so the bits do not change.
        """
        n, f = len(bars), self.n_features
        w = self.config.norm_window
        _check_prices(bars)
        out = np.empty((n, f), dtype=np.float32)
        out[: self.rolling_valid_from] = 0.0
        scaling = _Scaling(
            lambda: RollingZScore(f, w, self.warmup, self.config.clip, self._fixed), out,
            threaded=_second_core())
        fill = self._filler(bars)
        rolling_chunk = normalise.ROLLING_CHUNK
        # room for a few chunks ahead of the scaling, so the buffer is rarely shifted (a shift
        # waits for the scaling of every chunk before it)
        cap = (4 if scaling.threaded else 1) * CHUNK + rolling_chunk + w - 1
        buf = np.empty((f, _row_length(cap)), dtype=np.float32)[:, :cap]
        base = 0  # row of the series held in buf[:, 0]
        done = 0  # first row not yet scaled, a multiple of ROLLING_CHUNK (or n)
        with scaling:
            for k0 in range(0, n, CHUNK):
                k1 = min(k0 + CHUNK, n)
                if k1 - base > cap:  # keep the w - 1 rows before `done`, drop older ones
                    scaling.wait()
                    keep = max(0, done - w + 1)
                    buf[:, : k0 - keep] = buf[:, keep - base : k0 - base]
                    base = keep
                fill(k0, k1, buf[:, k0 - base : k1 - base])
                while done < n and min(done + rolling_chunk, n) <= k1:
                    stop = min(done + rolling_chunk, n)
                    scaling.submit((buf, done, stop, base))
                    done = stop
            scaling.wait()
        return out


class _Scaling:
    """Runs `RollingZScore.rows` jobs (raw, k0, k1, base) into `out`: in order on the calling
    thread, or, `threaded`, on a worker thread with the caller taking queued jobs whenever more
    than one is waiting. Jobs write disjoint rows of `out`; each thread has its own scaler."""

    def __init__(self, make: Callable[[], RollingZScore], out: np.ndarray, threaded: bool):
        self.out, self.threaded = out, threaded
        self.own = make()
        self.error: BaseException | None = None
        if threaded:
            self.jobs: queue.Queue[tuple[np.ndarray, int, int, int] | None] = queue.Queue()
            self.side = make()
            self.thread = threading.Thread(target=self._work, name="foxhunt-zscore", daemon=True)

    def __enter__(self) -> _Scaling:
        if self.threaded:
            try:
                self.thread.start()
            except RuntimeError:  # no thread to be had: scale on this one
                self.threaded = False
        return self

    def __exit__(self, *exc: object) -> None:
        if self.threaded:
            self.jobs.put(None)
            self.thread.join()

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                if job is None:
                    return
                if self.error is None:
                    self.side.rows(job[0], job[1], job[2], self.out, job[3])
            except BaseException as exc:  # re-raised on the calling thread by wait()
                self.error = exc
            finally:
                self.jobs.task_done()

    def submit(self, job: tuple[np.ndarray, int, int, int]) -> None:
        if not self.threaded:
            self.own.rows(job[0], job[1], job[2], self.out, job[3])
            return
        self.jobs.put(job)
        self._help(1)

    def _help(self, backlog: int) -> None:
        while self.jobs.qsize() > backlog:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                return
            try:
                assert job is not None
                self.own.rows(job[0], job[1], job[2], self.out, job[3])
            finally:
                self.jobs.task_done()

    def wait(self) -> None:
        """Return once every submitted job is done."""
        if self.threaded:
            self._help(0)
            self.jobs.join()
            if self.error is not None:
                raise self.error


def _second_core() -> bool:
    """Whether this process may run on more than one core and torch is allowed more than one
    thread (`torch.set_num_threads(1)` keeps the feature pipeline on one core too)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores > 1 and torch.get_num_threads() > 1
