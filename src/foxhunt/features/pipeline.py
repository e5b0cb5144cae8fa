"""Causal bar features in named groups (SPEC §2 Features) and their normalisation (SPEC §3).

The feature row for bar t is a function of bars[0..t] only: every kernel reads rows <= t, and
nothing is computed over the whole array except bounds used for checks. Groups are laid out in
the fixed order of `GROUPS`, each as a contiguous block of columns, so a variable-selection layer
can weight them. Prices enter through logs, so features are scale-free and one config serves
ES and CL alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from foxhunt.data.instruments import Session
from foxhunt.data.series import Bars
from foxhunt.errors import DataError
from foxhunt.features.calendar import calendar_features
from foxhunt.features.config import GROUPS, FeatureConfig
from foxhunt.features.normalise import Normaliser, rolling_zscore
from foxhunt.features.rolling import Windows, ema, lag_diff, rolling_extremes, safe_div

PASSTHROUGH_GROUPS = frozenset({"time"})
VOL_FLOOR = 1e-10
LEVEL_CHUNK = 2048
_GK_K = 2.0 * math.log(2.0) - 1.0
_PK_K = 1.0 / (4.0 * math.log(2.0))


@dataclass(frozen=True)
class FeatureSpec:
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


def _specs(cfg: FeatureConfig) -> list[FeatureSpec]:
    v_ref = max(cfg.vol_windows)
    out: list[FeatureSpec] = []
    add = out.append
    for group in cfg.groups:
        if group == "returns":
            for k in cfg.returns_lags:
                add(FeatureSpec(f"ret_{k}", group, k, f"log return over the last {k} bars"))
        elif group == "volatility":
            for w in cfg.vol_windows:
                add(FeatureSpec(f"rv_{w}", group, w, f"realised vol: RMS of 1-bar log returns, {w} bars"))
                add(FeatureSpec(f"pk_{w}", group, w - 1, f"Parkinson high-low range vol, {w} bars"))
                add(FeatureSpec(f"gk_{w}", group, w - 1, f"Garman-Klass OHLC vol, {w} bars"))
                add(FeatureSpec(f"atr_{w}", group, w, f"mean log true range (ATR / price), {w} bars"))
            if len(cfg.vol_windows) > 1:
                lo, hi = cfg.vol_windows[0], cfg.vol_windows[-1]
                add(FeatureSpec("rv_ratio", group, hi, f"log(rv_{lo} / rv_{hi}): vol regime shift"))
        elif group == "volume":
            add(FeatureSpec("ofi", group, 0, "bar order-flow imbalance (buy-sell)/(buy+sell); "
                            "sign(close-open) when the bars carry no flow"))
            for w in cfg.volume_windows:
                add(FeatureSpec(f"ofi_{w}", group, w - 1, f"order-flow imbalance over {w} bars"))
                add(FeatureSpec(f"logvol_{w}", group, w - 1,
                                f"log(1+volume) minus its {w}-bar mean"))
        elif group == "trend":
            for w in cfg.trend_windows:
                add(FeatureSpec(f"ema_dist_{w}", group, max(2 * w, v_ref),
                                f"log close minus its EMA (span {w}) in units of rv_{v_ref}*sqrt({w})"))
                add(FeatureSpec(f"zscore_{w}", group, w - 1,
                                f"z-score of log close in its {w}-bar window (mean reversion)"))
                add(FeatureSpec(f"rsi_{w}", group, w,
                                f"RSI-like: sum of 1-bar returns / sum of their sizes, {w} bars"))
                add(FeatureSpec(f"chan_{w}", group, w - 1,
                                f"close position in the {w}-bar high-low channel, -0.5..0.5"))
        elif group == "time":
            add(FeatureSpec("tod_sin", group, 0, "time of day (session zone), sine"))
            add(FeatureSpec("tod_cos", group, 0, "time of day (session zone), cosine"))
            add(FeatureSpec("dow_sin", group, 0, "day of week incl. time of day, sine"))
            add(FeatureSpec("dow_cos", group, 0, "day of week incl. time of day, cosine"))
            add(FeatureSpec("session_elapsed", group, 0,
                            "time since session open / session length, 0..1 (1 outside it)"))
            add(FeatureSpec("session_to_close", group, 0,
                            "log(1 + minutes to session close) / log(1 + session minutes), 0..1"))
    return out


class _Calc:
    """Shared intermediates of one bar series, computed once and reused across groups."""

    def __init__(self, bars: Bars, cfg: FeatureConfig, session: Session):
        self.bars, self.cfg, self.session = bars, cfg, session

    @cached_property
    def lc(self) -> np.ndarray:
        return np.log(self.bars.close)

    @cached_property
    def lh(self) -> np.ndarray:
        return np.log(self.bars.high)

    @cached_property
    def ll(self) -> np.ndarray:
        return np.log(self.bars.low)

    @cached_property
    def r1(self) -> np.ndarray:
        return lag_diff(self.lc, 1)

    @cached_property
    def sq_returns(self) -> Windows:
        return Windows(np.square(self.r1), max(self.cfg.vol_windows), start=1)

    def rv(self, w: int) -> np.ndarray:
        return np.sqrt(self.sq_returns.mean(w))

    @cached_property
    def flow(self) -> tuple[np.ndarray, np.ndarray]:
        """(signed, total) volume: aggressor flow when present, else sign(close - open) * volume."""
        b = self.bars
        if b.has_flow:
            return b.buy_volume - b.sell_volume, b.buy_volume + b.sell_volume
        return np.sign(b.close - b.open) * b.volume, b.volume

    def returns(self) -> dict[str, np.ndarray]:
        return {f"ret_{k}": lag_diff(self.lc, k) for k in self.cfg.returns_lags}

    def volatility(self) -> dict[str, np.ndarray]:
        windows = self.cfg.vol_windows
        wmax = max(windows)
        hl = self.lh - self.ll
        co = self.lc - np.log(self.bars.open)
        hl2 = np.square(hl)
        parkinson = Windows(hl2, wmax)
        hl2 *= 0.5
        hl2 -= _GK_K * np.square(co)
        garman_klass = Windows(hl2, wmax)
        prev = np.empty_like(self.lc)
        prev[0] = np.nan
        prev[1:] = self.lc[:-1]
        true_range = Windows(np.maximum(self.lh, prev) - np.minimum(self.ll, prev), wmax, start=1)
        out = {}
        for w in windows:
            out[f"rv_{w}"] = self.rv(w)
            out[f"pk_{w}"] = np.sqrt(parkinson.mean(w) * _PK_K)
            out[f"gk_{w}"] = np.sqrt(np.maximum(garman_klass.mean(w), 0.0))
            out[f"atr_{w}"] = true_range.mean(w)
        if len(windows) > 1:
            short = np.maximum(self.rv(windows[0]), VOL_FLOOR)
            out["rv_ratio"] = np.log(short / np.maximum(self.rv(wmax), VOL_FLOOR))
        return out

    def volume(self) -> dict[str, np.ndarray]:
        windows = self.cfg.volume_windows
        signed, total = self.flow
        flow_signed, flow_total = Windows(signed, max(windows)), Windows(total, max(windows))
        logv = np.log1p(self.bars.volume)
        logv_w = Windows(logv, max(windows))
        out = {"ofi": safe_div(signed, total)}
        for w in windows:
            out[f"ofi_{w}"] = safe_div(flow_signed.mean(w), flow_total.mean(w))
            out[f"logvol_{w}"] = logv - logv_w.mean(w)
        return out

    def trend(self) -> dict[str, np.ndarray]:
        windows = self.cfg.trend_windows
        lc = self.lc
        unit = np.maximum(self.rv(max(self.cfg.vol_windows)), VOL_FLOOR)
        levels = Windows(lc, max(windows), variance=True, chunk=LEVEL_CHUNK)
        moves = Windows(np.abs(self.r1), max(windows), start=1)
        tops = rolling_extremes(self.lh, windows, np.maximum)
        bottoms = rolling_extremes(self.ll, windows, np.minimum)
        out = {}
        for w in windows:
            out[f"ema_dist_{w}"] = (lc - ema(lc, 2.0 / (w + 1))) / (unit * math.sqrt(w))
            mean, var = levels.mean_var(w)
            out[f"zscore_{w}"] = safe_div(lc - mean, np.sqrt(var), VOL_FLOOR)
            out[f"rsi_{w}"] = safe_div(lag_diff(lc, w), moves.mean(w) * w)
            top, bottom = tops[w], bottoms[w]
            out[f"chan_{w}"] = safe_div(lc - 0.5 * (top + bottom), top - bottom)
        return out

    def time(self) -> dict[str, np.ndarray]:
        return calendar_features(self.bars.ts, self.session)


def _check_prices(bars: Bars) -> None:
    for name in ("open", "high", "low", "close"):
        col = getattr(bars, name)
        if not (np.isfinite(col).all() and col.min() > 0.0):
            row = int(np.argmax(~(np.isfinite(col) & (col > 0.0))))
            raise DataError(f"bars row {row}: {name} must be a positive finite price (got {col[row]})")
    if not (np.isfinite(bars.volume).all() and bars.volume.min() >= 0.0):
        row = int(np.argmax(~(np.isfinite(bars.volume) & (bars.volume >= 0.0))))
        raise DataError(f"bars row {row}: volume must be finite and >= 0 (got {bars.volume[row]})")


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
        """Un-normalised features, float32 [T, F] C-contiguous; NaN where a feature is in warm-up."""
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
        values.flags.writeable = False
        return FeatureMatrix(values, tuple(self.names), self.groups, bars.ts, valid_from, normaliser)

    def _check_length(self, n: int, valid_from: int, extra: str) -> None:
        if n <= valid_from:
            raise DataError(
                f"{n} bars are too few: the features need a {self.warmup}-bar warm-up{extra}, "
                f"so at least {valid_from + 1} bars"
            )

    def _raw_fm(self, bars: Bars) -> np.ndarray:
        """Raw features feature-major [F, T] float32, warm-up rows NaN."""
        self._check_length(len(bars), self.warmup, "")
        _check_prices(bars)
        calc = _Calc(bars, self.config, self.session)
        out = np.empty((self.n_features, len(bars)), dtype=np.float32)
        by_group: dict[str, Callable[[], dict[str, np.ndarray]]] = {
            g: getattr(calc, g) for g in GROUPS
        }
        i = 0
        for group in self.config.groups:
            cols = by_group[group]()
            for spec in self.specs[i : i + len(cols)]:
                if spec.group != group:
                    raise AssertionError(f"feature {spec.name} computed in group {group}")
                out[i] = cols.pop(spec.name)
                out[i, : spec.warmup] = np.nan
                i += 1
            if cols:
                raise AssertionError(f"unlisted features computed: {sorted(cols)}")
        return out
