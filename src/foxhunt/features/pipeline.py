"""Causal bar features in named groups (SPEC §2 Features) and their normalisation (SPEC §3).

The feature row for bar t is a function of bars[0..t] only: every kernel reads rows <= t, and
nothing is computed over the whole array except bounds used for checks. Groups are laid out in
the fixed order of `GROUPS`, each as a contiguous block of columns, so a variable-selection layer
can weight them. Prices enter through logs, so features are scale-free and one config serves
ES and CL alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from foxhunt.data.instruments import Session
from foxhunt.data.series import Bars
from foxhunt.errors import DataError
from foxhunt.features.calendar import SessionClock
from foxhunt.features.config import FeatureConfig
from foxhunt.features.normalise import Normaliser, rolling_zscore
from foxhunt.features.rolling import Windows, ema, lag_diff, rolling_extremes, safe_div

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


def _root(mean_square: np.ndarray) -> np.ndarray:
    """sqrt of a rolling mean of squares, which prefix-sum rounding can push a hair below 0."""
    return np.sqrt(np.maximum(mean_square, 0.0, out=mean_square), out=mean_square)


class _Segment:
    """Bars [lo, hi) of a series: one chunk plus the history rows its windows reach back into.

    Group methods return columns over the whole segment; only rows from the chunk start on are
    kept, and those have full history. Intermediates are computed once and shared by groups.
    """

    def __init__(self, bars: Bars, lo: int, hi: int, cfg: FeatureConfig):
        self.cfg = cfg
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
    def sq_returns(self) -> Windows:
        return Windows(np.square(self.r1), start=1)

    def rv(self, w: int) -> np.ndarray:
        if w not in self._rv:
            self._rv[w] = _root(self.sq_returns.mean(w))
        return self._rv[w]

    def returns(self) -> dict[str, np.ndarray]:
        return {f"ret_{k}": lag_diff(self.lc, k) for k in self.cfg.returns_lags}

    def volatility(self) -> dict[str, np.ndarray]:
        windows = self.cfg.vol_windows
        hl = self.lh - self.ll
        co = self.lc - np.log(self.o)
        hl2 = np.square(hl, out=hl)
        parkinson = Windows(hl2)
        hl2 *= 0.5
        hl2 -= _GK_K * np.square(co, out=co)
        garman_klass = Windows(hl2)
        prev = np.empty_like(self.lc)
        prev[0] = np.nan
        prev[1:] = self.lc[:-1]
        true_range = np.maximum(self.lh, prev)
        true_range -= np.minimum(self.ll, prev, out=prev)
        ranges = Windows(true_range, start=1)
        out = {}
        for w in windows:
            out[f"rv_{w}"] = self.rv(w)
            out[f"pk_{w}"] = _root(parkinson.mean(w) * _PK_K)
            out[f"gk_{w}"] = _root(garman_klass.mean(w))
            out[f"atr_{w}"] = ranges.mean(w)
        if len(windows) > 1:
            short = np.maximum(self.rv(windows[0]), VOL_FLOOR)
            out["rv_ratio"] = np.log(short / np.maximum(self.rv(windows[-1]), VOL_FLOOR))
        return out

    def volume(self) -> dict[str, np.ndarray]:
        if self.buy is not None and self.sell is not None:
            signed, total = self.buy - self.sell, self.buy + self.sell
        else:
            signed, total = np.sign(self.c - self.o) * self.v, self.v
        flow_signed, flow_total = Windows(signed), Windows(total)
        logv = np.log(self.v + 1.0)
        logv_means = Windows(logv)
        out = {"ofi": safe_div(signed, total)}
        for w in self.cfg.volume_windows:
            out[f"ofi_{w}"] = safe_div(flow_signed.mean(w), flow_total.mean(w))
            out[f"logvol_{w}"] = logv - logv_means.mean(w)
        return out

    def trend(self, ema_state: dict[int, float], keep_from: int) -> dict[str, np.ndarray]:
        """`ema_state` carries each EMA's last value from the previous chunk and is updated.

        A window of equal closes has a variance of exactly zero, but prefix sums leave rounding
        dust in it; the close's own rolling max == min marks those windows, so their z-score is
        0 rather than dust / dust.
        """
        lc = self.lc
        unit = np.maximum(self.rv(max(self.cfg.vol_windows)), VOL_FLOOR)
        windows = self.cfg.trend_windows
        levels = Windows(lc, variance=True, anchor=True)
        moves = Windows(np.abs(self.r1), start=1)
        tops = rolling_extremes(self.lh, windows, np.maximum)
        bottoms = rolling_extremes(self.ll, windows, np.minimum)
        close_top = rolling_extremes(lc, windows, np.maximum)
        close_bottom = rolling_extremes(lc, windows, np.minimum)
        out = {}
        for w in windows:
            smooth = np.full(len(lc), np.nan)
            smooth[keep_from:] = ema(lc[keep_from:], 2.0 / (w + 1), ema_state.get(w))
            ema_state[w] = float(smooth[-1])
            out[f"ema_dist_{w}"] = (lc - smooth) / (unit * math.sqrt(w))
            mean, var = levels.mean_var(w)
            std = np.sqrt(var, out=var)
            std[close_top[w] == close_bottom[w]] = 0.0
            out[f"zscore_{w}"] = safe_div(lc - mean, std)
            out[f"rsi_{w}"] = safe_div(lag_diff(lc, w), moves.mean(w) * w)
            top, bottom = tops[w], bottoms[w]
            out[f"chan_{w}"] = safe_div(lc - 0.5 * (top + bottom), top - bottom)
        return out


def _row_length(n: int) -> int:
    """n rounded up to an odd multiple of 16 floats: a row stride that is a large power of two
    makes every transpose of the matrix hit the same cache sets and run several times slower."""
    m = -(-n // 16) * 16
    return m + 16 if (m // 16) % 2 == 0 else m


def _check_prices(bars: Bars) -> None:
    """Logs need positive prices; a bad row fails here with its number, not as NaN features."""
    for name in ("open", "high", "low", "close"):
        col = getattr(bars, name)
        if not (np.isfinite(col).all() and col.min() > 0.0):
            row = int(np.argmax(~(np.isfinite(col) & (col > 0.0))))
            raise DataError(
                f"bars row {row}: {name} must be a positive finite price (got {col[row]})"
            )
    for name in ("volume", "buy_volume", "sell_volume"):
        col = getattr(bars, name)
        if col is not None and not (np.isfinite(col).all() and col.min() >= 0.0):
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
            values = rolling_zscore(self._raw_fm(bars), self.config.norm_window, self.warmup,
                                    self.config.clip, self._fixed)
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
        clock = SessionClock(self.session, int(bars.ts.min()), int(bars.ts.max()))
        ema_state: dict[int, float] = {}
        groups = self.config.groups
        for k0 in range(0, n, CHUNK):
            k1 = min(k0 + CHUNK, n)
            lo = max(0, k0 - self.history)
            seg = _Segment(bars, lo, k1, self.config)
            i = 0
            for group in groups:
                if group == "trend":
                    cols = seg.trend(ema_state, k0 - lo)
                elif group == "time":
                    cols = clock.features(seg.ts)
                else:
                    cols = getattr(seg, group)()
                for spec in self._by_group[group]:
                    out[i, k0:k1] = cols[spec.name][k0 - lo :]
                    i += 1
        for i, spec in enumerate(self.specs):
            out[i, : spec.warmup] = np.nan
        return out
