"""The raw features of a run of chunks of a bar series, group by group (the formulas behind
`FeaturePipeline`'s columns; `foxhunt.features.specs` names and describes them)."""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from foxhunt.data.series import Bars
from foxhunt.features.config import FeatureConfig
from foxhunt.features.rolling import Sums, ema_rows, extremes, root, safe_div

VOL_FLOOR = 1e-10
_GK_K = 2.0 * math.log(2.0) - 1.0
_PK_K = 1.0 / (4.0 * math.log(2.0))


class Segment:
    """B chunks of a series at once, each as bars [lo, hi): the chunk plus the history rows its
    windows reach back into. Every series is [B, hi - lo], one row per chunk (overlapping
    views of the bar columns), so each numpy call serves B chunks.

    Group methods write their columns for the rows from `keep` on (the chunks, which have full
    history) straight into float32 destinations [B, chunk]; window sums run over each whole
    segment, and intermediates are computed once and shared by groups. The window arithmetic
    is `foxhunt.features.rolling`'s (prefix sums restarted per segment), evaluated at the kept
    rows only, so a chunk's bits do not depend on B.
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
        """Whether the pipeline's price check passes on these rows: prices positive and finite, volumes
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
    def levels(self) -> Sums:
        """Window means and variances of the log close (anchored: a level keeps its digits)."""
        return Sums(self.lc, variance=True, anchor=True)

    @cached_property
    def sq_returns(self) -> Sums:
        return Sums(np.square(self.r1[:, 1:]))

    def rv(self, w: int) -> np.ndarray:
        """Realised vol at the kept rows (float64)."""
        if w not in self._rv:
            # sq_returns holds r1[1:]^2, so its column j is segment row j + 1
            keep = self.keep - 1
            out, _ = self.sq_returns.window_means(self.sq_returns.q1, w, max(keep, 0))
            if keep < 0:  # keep == 0: row 0 has no return
                out = np.concatenate((np.full((out.shape[0], 1), np.nan), out), axis=1)
            self._rv[w] = root(out)
        return self._rv[w]

    def _lag(self, x: np.ndarray, k: int, out: np.ndarray) -> None:
        """x[t] - x[t - k] at the kept rows into `out`, NaN for t < k."""
        n = x.shape[1]
        t0 = max(self.keep, k)
        out[:, : t0 - self.keep] = np.nan
        if t0 < n:
            np.subtract(x[:, t0:], x[:, t0 - k : n - k], out=out[:, t0 - self.keep :])

    def _moves(self, sums: Sums, w: int) -> np.ndarray:
        """Window means of a series summed from row 1 (`sums` column j is row j + 1)."""
        if self.keep >= 1:
            return sums.window_means(sums.q1, w, self.keep - 1)[0]
        out = np.empty((sums.q1.shape[0], sums.n + 1))
        out[:, 0] = np.nan
        sums.window_means(sums.q1, w, 0, out=out[:, 1:])
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
        parkinson = Sums(hl2)
        hl2 *= 0.5
        np.square(co, out=co)
        co *= _GK_K
        hl2 -= co
        garman_klass = Sums(hl2)
        true_range = np.maximum(self.lh[:, 1:], self.lc[:, :-1])
        true_range -= np.minimum(self.ll[:, 1:], self.lc[:, :-1], out=co[:, 1:])
        ranges = Sums(true_range)  # from row 1: column j of ranges is segment row j + 1
        for w in windows:
            dst[f"rv_{w}"][...] = self.rv(w)
            pk = parkinson.mean(w, keep)
            pk *= _PK_K
            root(pk, out=dst[f"pk_{w}"])
            root(garman_klass.mean(w, keep), out=dst[f"gk_{w}"])
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
        flow_signed, flow_total = Sums(signed), Sums(total)
        logv = np.log(self.v + 1.0)
        logv_means = Sums(logv)
        safe_div(signed[:, keep:], total[:, keep:], dst["ofi"])
        for w in self.cfg.volume_windows:
            safe_div(flow_signed.mean(w, keep), flow_total.mean(w, keep), dst[f"ofi_{w}"])
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
        levels = self.levels
        moves = Sums(np.abs(self.r1[:, 1:]))  # from row 1
        tops = extremes(self.lh, windows, np.maximum, keep)
        bottoms = extremes(self.ll, windows, np.minimum, keep)
        close_top = extremes(lc, windows, np.maximum, keep)
        close_bottom = extremes(lc, windows, np.minimum, keep)
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
            safe_div(mean, std, dst[f"zscore_{w}"])
            change = np.empty(lck.shape)
            self._lag(lc, w, change)
            move = self._moves(moves, w)
            move *= w
            safe_div(change, move, dst[f"rsi_{w}"])
            top, bottom = tops[w], bottoms[w]
            mid = top + bottom
            mid *= 0.5
            np.subtract(lck, mid, out=mid)
            np.subtract(top, bottom, out=top)
            safe_div(mid, top, dst[f"chan_{w}"])

    def crosses(self, dst: dict[str, np.ndarray]) -> None:
        """Fast minus slow moving average of the log close, scaled like `ema_dist`: the slow
        window's noise grows as sqrt(slow) vol units, so a cross reads alike on every market."""
        unit = np.maximum(self.rv(max(self.cfg.vol_windows)), VOL_FLOOR)
        levels = self.levels
        for fast, slow in self.cfg.cross_pairs:
            # both means before their common anchor is added back, so it cancels exactly
            cross, _ = levels.window_means(levels.q1, fast, self.keep)
            cross -= levels.window_means(levels.q1, slow, self.keep)[0]
            np.divide(cross, unit * math.sqrt(slow), out=dst[f"cross_{fast}_{slow}"])
