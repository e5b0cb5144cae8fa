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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Self

import numpy as np
import torch

from foxhunt.data.instruments import Session
from foxhunt.data.series import Bars
from foxhunt.errors import DataError
from foxhunt.features import normalise
from foxhunt.features.calendar import SessionClock
from foxhunt.features.config import FeatureConfig
from foxhunt.features.normalise import Normaliser, RollingZScore, pair_buffer, pair_rows
from foxhunt.features.rolling import ema_rows

PASSTHROUGH_GROUPS = frozenset({"time"})
VOL_FLOOR = 1e-10
CHUNK = 8000
BATCH = 8  # chunks computed together (one numpy call serves all of them)
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
    if den.size and den.min() > 0.0:  # a NaN fails this too
        np.divide(num, den, out=out)
    else:
        z = np.zeros(den.shape)
        np.divide(num, den, out=z, where=den > 0.0)
        out[...] = z


def _prefix_rows(d: np.ndarray) -> np.ndarray:
    """`prefix_sum` of each row of d [B, n]: [B, n + 1], one single-threaded torch scan a row."""
    d = np.ascontiguousarray(d, dtype=np.float64)
    out = np.empty((d.shape[0], d.shape[1] + 1))
    out[:, 0] = 0.0
    for x, q in zip(torch.from_numpy(d).unbind(0), torch.from_numpy(out[:, 1:]).unbind(0),
                    strict=True):
        torch.cumsum(x, 0, out=q)
    return out


class _Sums:
    """Prefix sums of segment series x [B, n] (one row per segment) from column `start` on,
    minus each row's first value for a level, read back as rolling means at the columns the
    caller keeps. Columns before `start + w - 1` are NaN."""

    def __init__(self, x: np.ndarray, start: int = 0, variance: bool = False,
                 anchor: bool = False):
        self.n, self.start = x.shape[1], start
        self.anchor = x[:, start].copy() if anchor and start < x.shape[1] else None
        d = x[:, start:] - self.anchor[:, None] if self.anchor is not None else x[:, start:]
        self.q1 = _prefix_rows(d)
        if variance:
            self.q2 = _prefix_rows(np.square(d, out=d) if self.anchor is not None
                                   else np.square(d))

    def _diff(self, q: np.ndarray, w: int, keep: int, out: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """(window sums / w at columns [keep, n), the part of it at columns >= start + w - 1).

        `out` may be float32: the float64 result is rounded into it."""
        if out is None:
            out = np.empty((q.shape[0], self.n - keep))
        t0 = max(keep, self.start + w - 1)
        out[:, : t0 - keep] = np.nan
        dst = out[:, t0 - keep :]
        if dst.shape[1]:
            a = t0 - self.start + 1
            if dst.dtype == np.float64:
                np.subtract(q[:, a:], q[:, a - w : q.shape[1] - w], out=dst)
                dst *= 1.0 / w
            else:
                np.multiply(q[:, a:] - q[:, a - w : q.shape[1] - w], 1.0 / w, out=dst)
        return out, dst

    def mean(self, w: int, keep: int) -> np.ndarray:
        out, dst = self._diff(self.q1, w, keep)
        if self.anchor is not None:  # rows whose anchor is 0 are left alone, as `Windows` does
            np.add(dst, self.anchor[:, None], out=dst, where=self.anchor[:, None] != 0.0)
        return out

    def mean_var(self, w: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population variance at columns [keep, n); needs `variance=True`."""
        mean, m = self._diff(self.q1, w, keep)
        var, v = self._diff(self.q2, w, keep)
        v -= m * m
        np.maximum(v, 0.0, out=v)
        m += 0.0 if self.anchor is None else self.anchor[:, None]
        return mean, var


def _extremes(x: np.ndarray, windows: list[int], op: np.ufunc, keep: int
              ) -> dict[int, np.ndarray]:
    """`rolling_extremes` along the rows of x [B, n] at columns [keep, n) only (max and min
    are exact, so the bits are those of the full ladder); columns before w - 1 are NaN."""
    n = x.shape[1]
    out: dict[int, np.ndarray] = {}
    level, p = x, 1
    for w in sorted(windows):
        while 2 * p <= w:
            nxt = np.empty(x.shape)
            nxt[:, :p] = np.nan
            if p < n:
                op(level[:, p:], level[:, :-p], out=nxt[:, p:])
            level, p = nxt, 2 * p
        t0 = max(keep, w - 1)
        if w == p > 1 and t0 == keep:
            out[w] = level[:, keep:]  # a view; the ladder's later levels are already built
            continue
        res = np.empty((x.shape[0], n - keep))
        res[:, : t0 - keep] = np.nan
        if w == p:
            res[:, t0 - keep :] = level[:, t0:]
        elif t0 < n:
            op(level[:, t0:], level[:, t0 - (w - p) : n - (w - p)], out=res[:, t0 - keep :])
        out[w] = res
    return out


class _Segment:
    """B chunks of a series at once, each as bars [lo, hi): the chunk plus the history rows its
    windows reach back into. Every series is [B, hi - lo], one row per chunk (overlapping
    views of the bar columns), so each numpy call serves B chunks.

    Group methods write their columns for the rows from `keep` on (the chunks, which have full
    history) straight into float32 destinations [B, chunk]; window sums run over each whole
    segment, and intermediates are computed once and shared by groups. The arithmetic is that
    of the `rolling` kernels (prefix sums restarted per segment, the same operations in the
    same order), evaluated at the kept rows only, so a chunk's bits do not depend on B.
    """

    def __init__(self, bars: Bars, lo: int, hi: int, keep: int, chunks: int, step: int,
                 cfg: FeatureConfig):
        self.cfg, self.keep = cfg, keep
        self._rv: dict[int, np.ndarray] = {}
        shape, length = (chunks, hi - lo), hi - lo + (chunks - 1) * step

        def rows(col: np.ndarray) -> np.ndarray:
            x = col[lo : lo + length]
            return np.lib.stride_tricks.as_strided(
                x, shape, (step * x.strides[0], x.strides[0]), writeable=False)

        self.o, self.h, self.l = rows(bars.open), rows(bars.high), rows(bars.low)
        self.c, self.v = rows(bars.close), rows(bars.volume)
        self.buy = rows(bars.buy_volume) if bars.buy_volume is not None else None
        self.sell = rows(bars.sell_volume) if bars.sell_volume is not None else None
        self.flow = bars.has_flow

    def valid(self) -> bool:
        """Whether `_check_prices` passes on these rows: prices positive and finite, volumes
        finite and >= 0 (a NaN fails the first comparison)."""
        return all(x.min() > 0.0 and x.max() < np.inf for x in (self.o, self.h, self.l, self.c)) \
            and all(x is None or (x.min() >= 0.0 and x.max() < np.inf)
                    for x in (self.v, self.buy, self.sell))

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
        out = np.empty(self.lc.shape)
        out[:, 0] = np.nan
        np.subtract(self.lc[:, 1:], self.lc[:, :-1], out=out[:, 1:])
        return out

    @cached_property
    def sq_returns(self) -> _Sums:
        return _Sums(np.square(self.r1[:, 1:]))

    def rv(self, w: int) -> np.ndarray:
        """Realised vol at the kept rows (float64)."""
        if w not in self._rv:
            # sq_returns holds r1[1:]^2, so its column j is segment row j + 1
            keep = self.keep - 1
            out, _ = self.sq_returns._diff(self.sq_returns.q1, w, max(keep, 0))
            if keep < 0:  # keep == 0: row 0 has no return
                out = np.concatenate((np.full((out.shape[0], 1), np.nan), out), axis=1)
            self._rv[w] = _root(out)
        return self._rv[w]

    def _lag(self, x: np.ndarray, k: int, out: np.ndarray) -> None:
        """x[t] - x[t - k] at the kept rows into `out`, NaN for t < k."""
        n = x.shape[1]
        t0 = max(self.keep, k)
        out[:, : t0 - self.keep] = np.nan
        if t0 < n:
            np.subtract(x[:, t0:], x[:, t0 - k : n - k], out=out[:, t0 - self.keep :])

    def _moves(self, sums: _Sums, w: int) -> np.ndarray:
        """Window means of a series summed from row 1 (`sums` column j is row j + 1)."""
        if self.keep >= 1:
            return sums._diff(sums.q1, w, self.keep - 1)[0]
        out = np.empty((sums.q1.shape[0], sums.n + 1))
        out[:, 0] = np.nan
        sums._diff(sums.q1, w, 0, out=out[:, 1:])
        return out

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
        true_range = np.maximum(self.lh[:, 1:], self.lc[:, :-1])
        true_range -= np.minimum(self.ll[:, 1:], self.lc[:, :-1], out=co[:, 1:])
        ranges = _Sums(true_range)  # from row 1: column j of ranges is segment row j + 1
        for w in windows:
            dst[f"rv_{w}"][...] = self.rv(w)
            pk = parkinson.mean(w, keep)
            pk *= _PK_K
            _root(pk, out=dst[f"pk_{w}"])
            _root(garman_klass.mean(w, keep), out=dst[f"gk_{w}"])
            dst[f"atr_{w}"][...] = self._moves(ranges, w)
        if len(windows) > 1:
            short = np.maximum(self.rv(windows[0]), VOL_FLOOR)
            short /= np.maximum(self.rv(windows[-1]), VOL_FLOOR)
            np.log(short, out=dst["rv_ratio"])

    def volume(self, dst: dict[str, np.ndarray]) -> None:
        keep = self.keep
        if self.flow:
            assert self.buy is not None and self.sell is not None
            signed, total = self.buy - self.sell, self.buy + self.sell
        else:
            signed, total = np.sign(self.c - self.o) * self.v, np.array(self.v)
        flow_signed, flow_total = _Sums(signed), _Sums(total)
        logv = np.log(self.v + 1.0)
        logv_means = _Sums(logv)
        _safe_div(signed[:, keep:], total[:, keep:], dst["ofi"])
        for w in self.cfg.volume_windows:
            _safe_div(flow_signed.mean(w, keep), flow_total.mean(w, keep), dst[f"ofi_{w}"])
            np.subtract(logv[:, keep:], logv_means.mean(w, keep), out=dst[f"logvol_{w}"])

    def trend(self, dst: dict[str, np.ndarray], ema_state: dict[int, float]) -> None:
        """`ema_state` carries each EMA's last value from the previous chunk and is updated.

        A window of equal closes has a variance of exactly zero, but prefix sums leave rounding
        dust in it; the close's own rolling max == min marks those windows, so their z-score is
        0 rather than dust / dust.
        """
        keep = self.keep
        lc = self.lc
        lck = lc[:, keep:]
        unit = np.maximum(self.rv(max(self.cfg.vol_windows)), VOL_FLOOR)
        windows = self.cfg.trend_windows
        levels = _Sums(lc, variance=True, anchor=True)
        moves = _Sums(np.abs(self.r1[:, 1:]))  # from row 1
        tops = _extremes(self.lh, windows, np.maximum, keep)
        bottoms = _extremes(self.ll, windows, np.minimum, keep)
        close_top = _extremes(lc, windows, np.maximum, keep)
        close_bottom = _extremes(lc, windows, np.minimum, keep)
        for w in windows:
            smooth, ema_state[w] = ema_rows(lck, 2.0 / (w + 1), ema_state.get(w))
            np.subtract(lck, smooth, out=smooth)
            np.divide(smooth, unit * math.sqrt(w), out=dst[f"ema_dist_{w}"])
            mean, var = levels.mean_var(w, keep)
            std = np.sqrt(var, out=var)
            flat = close_top[w] == close_bottom[w]
            if flat.any():
                std[flat] = 0.0
            np.subtract(lck, mean, out=mean)
            _safe_div(mean, std, dst[f"zscore_{w}"])
            change = np.empty(lck.shape)
            self._lag(lc, w, change)
            move = self._moves(moves, w)
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
        out = np.empty((self.n_features, _row_length(n)), dtype=np.float32)[:, :n]
        fill = self._filler(bars)
        for k0 in range(0, n, BATCH * CHUNK):
            k1 = min(k0 + BATCH * CHUNK, n)
            fill(k0, k1, out[:, k0:k1])
        for i, spec in enumerate(self.specs):
            out[i, : spec.warmup] = np.nan
        return out

    def _filler(self, bars: Bars) -> Callable[[int, int, Sequence[np.ndarray]], None]:
        """fill(k0, k1, dst): raw features of rows [k0, k1) into the float32 rows dst[i] (one
        per column, each k1 - k0 long; [F, k1 - k0] will do). k0 is a multiple of CHUNK, and
        k1 one too or n; calls come in order (the EMAs carry their state from chunk to chunk).

        Each CHUNK of rows is computed from its own segment (`_Segment`); runs of whole chunks
        that have their full history before them go through together, up to BATCH at a time.
        Rows before a feature's warm-up are left undefined.
        """
        clock = SessionClock(self.session, int(bars.ts.min()), int(bars.ts.max()))
        ema_state: dict[int, float] = {}
        groups = [g for g in self.config.groups if g != "time"]
        names = self.names
        history = self.history

        def segment(k0: int, chunks: int, stop: int, dst: dict[str, np.ndarray]) -> None:
            lo = max(0, k0 - history)
            seg = _Segment(bars, lo, stop, k0 - lo, chunks, CHUNK, self.config)
            if not seg.valid():  # checked here, on rows in cache; the full check names the row
                _check_prices(bars)
            for group in groups:
                if group == "trend":
                    seg.trend(dst, ema_state)
                else:
                    getattr(seg, group)(dst)

        def fill(k0: int, k1: int, dst: Sequence[np.ndarray]) -> None:
            rows = dict(zip(names, dst, strict=True))
            if "time" in self.config.groups:
                clock.write(bars.ts[k0:k1], rows)
            c0 = k0
            while c0 < k1:
                c1 = min(c0 + CHUNK, k1)
                if c0 >= history and c1 - c0 == CHUNK:  # a run of whole chunks
                    chunks = min((k1 - c0) // CHUNK, BATCH)
                    c1 = c0 + chunks * CHUNK
                else:
                    chunks = 1
                width = (c1 - c0) // chunks
                part = {k: v[c0 - k0 : c1 - k0].reshape(chunks, width) for k, v in rows.items()}
                segment(c0, chunks, c0 + width, part)
                c0 = c1

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
        out = np.empty((n, f), dtype=np.float32)
        out[: self.rolling_valid_from] = 0.0
        scaling = _Scaling(
            lambda: RollingZScore(f, w, self.warmup, self.config.clip, self._fixed), out,
            threaded=_second_core())
        fill = self._filler(bars)
        rolling_chunk = normalise.ROLLING_CHUNK
        step = BATCH * CHUNK
        # Raw rows go into a window buffer; when it is full, the w - 1 rows before the first
        # unscaled row (and the unscaled ones) move to the front of the other buffer, so the
        # worker can go on reading this one. One buffer does when nothing runs alongside.
        cap = step + rolling_chunk + w - 1
        bufs = [pair_buffer(f, cap) for _ in range(2 if scaling.threaded else 1)]
        readers: list[list[threading.Event]] = [[] for _ in bufs]  # jobs reading each buffer
        cur = 0
        base = 0  # row of the series held in bufs[cur][:, 0]
        done = 0  # first row not yet scaled, a multiple of ROLLING_CHUNK (or n)
        with scaling:
            k1 = 0
            while k1 < n:
                # a first step of one chunk gets the scaling going sooner
                k0, k1 = k1, min(k1 + (step if k1 else CHUNK), n)
                if k1 - base > cap:
                    nxt = (cur + 1) % len(bufs)
                    scaling.wait(readers[nxt])
                    readers[nxt] = []
                    keep = max(0, done - w + 1)
                    bufs[nxt][:, : k0 - keep] = bufs[cur][:, keep - base : k0 - base]
                    cur, base = nxt, keep
                buf = bufs[cur]
                fill(k0, k1, pair_rows(buf, f, k0 - base, k1 - base))
                while done < n and min(done + rolling_chunk, n) <= k1:
                    stop = min(done + rolling_chunk, n)
                    readers[cur].append(scaling.submit((buf, done, stop, base)))
                    done = stop
                # take on what the worker has not started once more than a step's worth waits
                scaling.help(-(-step // rolling_chunk))
            scaling.wait([job for jobs in readers for job in jobs])
        return out


class _Scaling:
    """Runs `RollingZScore.rows` jobs (raw, k0, k1, base) into `out`: at once on the calling
    thread, or, `threaded`, on a worker thread, the caller taking queued jobs itself when it
    calls `help` or `wait`. Jobs write disjoint rows of `out`; each thread has its own
    scaler (work buffers)."""

    Job = tuple[np.ndarray, int, int, int]

    def __init__(self, make: Callable[[], RollingZScore], out: np.ndarray, threaded: bool):
        self.out, self.threaded = out, threaded
        self.own = make()
        self.error: BaseException | None = None
        if threaded:
            self.jobs: queue.Queue[tuple[_Scaling.Job, threading.Event] | None] = queue.Queue()
            self.side = make()
            self.thread = threading.Thread(target=self._work, name="foxhunt-zscore", daemon=True)

    def __enter__(self) -> Self:
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

    def _run(self, scaler: RollingZScore, item: tuple[_Scaling.Job, threading.Event]) -> None:
        (raw, k0, k1, base), finished = item
        try:
            if self.error is None:
                scaler.rows(raw, k0, k1, self.out, base)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread by wait()
            self.error = exc
        finally:
            finished.set()

    def _work(self) -> None:
        while (item := self.jobs.get()) is not None:
            self._run(self.side, item)

    def submit(self, job: _Scaling.Job) -> threading.Event:
        finished = threading.Event()
        if not self.threaded:
            self.own.rows(job[0], job[1], job[2], self.out, job[3])
            finished.set()
            return finished
        self.jobs.put((job, finished))
        return finished

    def _take(self) -> bool:
        """Run one queued job here; whether there was one."""
        try:
            item = self.jobs.get_nowait()
        except queue.Empty:
            return False
        assert item is not None
        self._run(self.own, item)
        return True

    def help(self, backlog: int) -> None:
        """Run queued jobs here until at most `backlog` wait."""
        while self.threaded and self.jobs.qsize() > backlog and self._take():
            pass

    def wait(self, jobs: list[threading.Event]) -> None:
        """Return once the given jobs are done, running queued jobs meanwhile."""
        if self.threaded:
            for finished in jobs:
                while not finished.is_set():
                    if not self._take():
                        finished.wait()
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
