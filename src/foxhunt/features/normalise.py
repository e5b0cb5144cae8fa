"""Feature normalisation: a z-score fitted on a training window, or a causal rolling z-score.

Walk-forward (docs/domain.md#walk-forward-folds) fits a `Normaliser` on a fold's training rows
only and re-applies the same frozen statistics to its validation and test rows;
`to_dict`/`from_dict` let a checkpoint carry them. Without a training window, `rolling_zscore`
scales each row by statistics of the `window` rows ending at it, which is causal by
construction.

Columns marked `fixed` (bounded clock features) pass through unchanged: rescaling a phase by a
window's mean would make the same clock time map to different values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from foxhunt.errors import DataError

MIN_STD = 1e-12
ROWS = 4000
ROLLING_CHUNK = 8000
ROLLING_FEATURES = 8


def _scale(std: np.ndarray) -> np.ndarray:
    """1/std, or 0 for a column that is constant: it carries no information, so it becomes 0."""
    out = np.zeros_like(std)
    np.divide(1.0, std, out=out, where=std > MIN_STD)
    return out


@dataclass(frozen=True)
class Normaliser:
    """Per-column mean and std fitted on rows [start, stop) of a raw feature matrix."""

    names: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray
    clip: float
    start: int
    stop: int

    def __post_init__(self) -> None:
        for field in ("mean", "std"):
            v = np.array(getattr(self, field), dtype=np.float64)
            if v.shape != (len(self.names),):
                raise DataError(
                    f"normaliser: {field} has shape {v.shape}, expected ({len(self.names)},)"
                )
            v.flags.writeable = False
            object.__setattr__(self, field, v)
        object.__setattr__(self, "names", tuple(self.names))

    @classmethod
    def fit(
        cls,
        raw: np.ndarray,
        names: Sequence[str],
        start: int,
        stop: int,
        clip: float,
        fixed: Sequence[bool] | None = None,
    ) -> Normaliser:
        """Statistics of rows [start, stop) of `raw` [T, F]; no other row is read.

        Sums run per chunk around the first row's values, so the variance keeps its digits
        even for a column whose mean is large next to its spread.
        """
        if not 0 <= start < stop - 1 or stop > len(raw):
            raise DataError(
                f"normaliser: fit window [{start}, {stop}) must hold at least 2 rows inside "
                f"[0, {len(raw)})"
            )
        anchor = np.asarray(raw[start], dtype=np.float64)
        s1 = np.zeros(raw.shape[1])
        s2 = np.zeros(raw.shape[1])
        for r0 in range(start, stop, ROWS):
            blk = np.asarray(raw[r0 : min(r0 + ROWS, stop)], dtype=np.float64)
            blk -= anchor
            s1 += blk.sum(axis=0)
            s2 += np.square(blk, out=blk).sum(axis=0)
        if not (np.isfinite(s1).all() and np.isfinite(s2).all()):
            bad = [n for n, a, b in zip(names, s1, s2, strict=True) if not np.isfinite(a + b)]
            raise DataError(f"normaliser: NaN or inf inside the fit window in {bad}")
        n = stop - start
        mean = s1 / n
        std = np.sqrt(np.maximum(s2 / n - mean * mean, 0.0))
        mean += anchor
        if fixed is not None:
            keep = np.asarray(fixed, dtype=bool)
            mean[keep], std[keep] = 0.0, 1.0
        return cls(tuple(names), mean, std, float(clip), int(start), int(stop))

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """(raw - mean) / std clipped to +-clip, NaN -> 0, as float32 [T, F] C-contiguous.

        `raw` may be time-major or a transposed feature-major array; both give the same bits.
        """
        if raw.ndim != 2 or raw.shape[1] != len(self.names):
            raise DataError(
                f"normaliser fitted on {len(self.names)} features cannot be applied to an array "
                f"of shape {raw.shape}"
            )
        out = np.empty(raw.shape, dtype=np.float32)
        feature_major = raw.strides[0] < raw.strides[1]
        src = raw.T if feature_major else raw
        mean, scale = (self.mean[:, None], _scale(self.std)[:, None]) if feature_major else (
            self.mean, _scale(self.std))
        for r0 in range(0, len(raw), ROWS):
            rows = slice(r0, r0 + ROWS)
            blk = np.array(src[:, rows] if feature_major else src[rows], dtype=np.float64)
            blk -= mean
            blk *= scale
            np.clip(blk, -self.clip, self.clip, out=blk)
            np.copyto(blk, 0.0, where=np.isnan(blk))
            out[rows] = blk.T if feature_major else blk
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "names": list(self.names),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "clip": self.clip,
            "start": self.start,
            "stop": self.stop,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Normaliser:
        try:
            return cls(
                tuple(data["names"]),
                np.asarray(data["mean"], dtype=np.float64),
                np.asarray(data["std"], dtype=np.float64),
                float(data["clip"]),
                int(data["start"]),
                int(data["stop"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"normaliser: stored statistics are malformed ({exc})") from None


def rolling_zscore(
    raw_fm: np.ndarray, window: int, start: int, clip: float, fixed: Sequence[bool]
) -> np.ndarray:
    """Row t -> (x_t - mean) / std over rows [t - window + 1, t], for t >= start + window - 1.

    `raw_fm` is feature-major [F, T] and finite from row `start`; earlier output rows are 0.
    Columns marked `fixed` are copied through. Window sums are prefix-sum differences restarted
    every ROLLING_CHUNK rows around an anchor (see `foxhunt.features.rolling`), worked a few
    features at a time to stay in cache. Returns float32 [T, F] C-contiguous.
    """
    f, n = raw_fm.shape
    out = np.zeros((n, f), dtype=np.float32)
    scaler = RollingZScore(f, window, start, clip, fixed)
    pairs = pair_buffer(f, n)
    for i in range(f):
        pairs[i // 2, :, i % 2] = raw_fm[i]
    for k0 in range(0, n, ROLLING_CHUNK):
        scaler.rows(pairs, k0, min(k0 + ROLLING_CHUNK, n), out)
    return out


def pair_buffer(n_features: int, rows: int) -> np.ndarray:
    """A float32 buffer for `RollingZScore`, [ceil(F / 2), rows, 2]: feature i is
    [i // 2, :, i % 2], so two features sit side by side, one complex number per row (see
    `RollingZScore`). The padding feature of an odd F is zero. Each pair's row stride is an odd
    multiple of 64 bytes (a power of two would make every pair map to the same cache sets)."""
    stride = -(-rows // 8) * 8
    stride += 8 if (stride // 8) % 2 == 0 else 0
    buf = np.empty(((n_features + 1) // 2, stride, 2), dtype=np.float32)[:, :rows]
    if n_features % 2:
        buf[-1, :, 1] = 0.0
    return buf


def pair_rows(buf: np.ndarray, n_features: int, lo: int, hi: int) -> list[np.ndarray]:
    """Rows [lo, hi) of each feature of a `pair_buffer`, as (strided) float32 vectors."""
    return [buf[i // 2, lo:hi, i % 2] for i in range(n_features)]


def _runs(mask: np.ndarray) -> list[slice]:
    """Maximal runs of True in `mask`, as slices."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [slice(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


class RollingZScore:
    """The causal rolling z-score of `rolling_zscore`, one ROLLING_CHUNK of rows at a time.

    Row chunk [k0, k1) (k0 a multiple of ROLLING_CHUNK) reads raw rows [k0 - window + 1, k1)
    only, so a caller may produce the raw features chunk by chunk and scale each chunk while
    it is still in cache. The raw features come in a `pair_buffer`: two features side by side,
    so that one torch scan of complex numbers (real and imaginary parts summed separately, in
    order, so the bits are those of two real scans) runs both prefix sums at once; scans are
    latency-bound, so that halves their cost. Work buffers are allocated once and reused; each
    chunk's z-scores are gathered pair-major and written into the time-major output in one
    transposing copy of 8-byte pairs.

    z of row t is (w x - S1) / sqrt(w S2 - S1^2), S1 and S2 being window sums of x - anchor and
    of its square, taken as differences of prefix sums over the chunk and its w - 1 rows of
    history, the anchor being the first of those rows. A window of equal values has
    w S2 - S1^2 = 0 exactly, but the prefix sums leave rounding dust of up to
    ~len * eps * (prefix sum of squares) in it; anything under that floor counts as constant
    (z = 0) instead of becoming dust / dust. The floor uses the prefix up to t only.
    """

    def __init__(self, n_features: int, window: int, start: int, clip: float,
                 fixed: Sequence[bool]):
        self.f, self.w, self.start, self.clip = n_features, window, start, clip
        with np.errstate(over="ignore"):
            self.clip32 = np.float32(clip)
        n_pairs = (n_features + 1) // 2
        fixed = np.concatenate([np.asarray(fixed, dtype=bool),
                                np.ones(2 * n_pairs - n_features, dtype=bool)])
        copied = fixed[0::2] & fixed[1::2]  # pairs passed through whole
        self.copied = _runs(copied)
        step = max(1, ROLLING_FEATURES // 2)
        self.scaled = [slice(i, min(i + step, run.stop))
                       for run in _runs(~copied) for i in range(run.start, run.stop, step)]
        # a fixed feature paired with a scaled one is scaled along, then copied over
        self.mixed = [(i // 2, i % 2) for i in range(n_features) if fixed[i] and not copied[i // 2]]
        rows, span = ROLLING_CHUNK, ROLLING_CHUNK + window - 1
        k = min(step, n_pairs)
        self.stage = np.empty((n_pairs, rows, 2), dtype=np.float32)
        self.seg = np.empty((k, span, 2))
        self.q = np.zeros((k, span + 1, 2))
        self.num = np.empty((k, rows, 2))
        self.den = np.empty((k, rows, 2))
        self.tmp = np.empty((k, rows, 2))
        self.varies = np.empty((k, rows, 2), dtype=bool)
        self.anchor = np.empty((k, 1), dtype=np.complex128)
        self._scan_full: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    def rows(self, pairs: np.ndarray, k0: int, k1: int, out: np.ndarray, base: int = 0) -> None:
        """Scale rows [k0, k1) into rows of time-major `out`; `pairs` is a `pair_buffer` that
        holds the series from row `base` on (at least from row k0 - window + 1)."""
        w = self.w
        r0 = max(k0, self.start + w - 1)
        if r0 >= k1:
            return
        m = k1 - r0
        stage = self.stage[:, :m]
        a, b = r0 - base, k1 - base
        with np.errstate(invalid="ignore", divide="ignore"):
            for block in self.scaled:
                self._block(pairs[block, a - w + 1 : b], stage[block])
        for block in self.copied:
            stage[block] = pairs[block, a:b]
        for p, j in self.mixed:
            stage[p, :, j] = pairs[p, a:b, j]
        if self.f % 2 == 0:  # one pair of float32 per 8-byte item
            np.copyto(out[r0:k1].view(np.uint64), stage.view(np.uint64)[..., 0].T)
        else:
            np.copyto(out[r0:k1], stage.transpose(1, 0, 2).reshape(m, -1)[:, : self.f])

    def _scans(self, k: int, span: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(pair row of seg, pair row of q after its leading 0) as complex tensors: one torch
        scan per pair row, since a scan over several rows is split across torch's threads,
        which stalls when another process holds a core. The full-size views are made once."""
        full = span == self.seg.shape[1] and k == self.seg.shape[0]
        if full and self._scan_full is not None:
            return self._scan_full
        seg = torch.view_as_complex(torch.from_numpy(self.seg))
        q = torch.view_as_complex(torch.from_numpy(self.q))
        pairs = [(seg[i, :span], q[i, 1 : span + 1]) for i in range(k)]
        if full:
            self._scan_full = pairs
        return pairs

    def _block(self, src: np.ndarray, dst: np.ndarray) -> None:
        """z-scores of the last len - w + 1 rows of `src` [k, len, 2] (float32) into `dst`."""
        w = self.w
        k, span, _ = src.shape
        m = span - w + 1
        seg, q = self.seg[:k, :span], self.q[:k, : span + 1]
        num, den, tmp, varies = (b[:k, :m] for b in (self.num, self.den, self.tmp, self.varies))
        scans = self._scans(k, span)
        np.copyto(seg, src)
        # minus each feature's anchor, as complex numbers: a broadcast over the last axis of 2
        # would run numpy's loops two elements at a time
        anchor = self.anchor[:k]
        anchor.view(np.float64)[:] = src[:, 0]
        np.subtract(seg.view(np.complex128)[..., 0], anchor, out=seg.view(np.complex128)[..., 0])
        for x, s in scans:
            torch.cumsum(x, 0, out=s)
        np.multiply(seg[:, w - 1 :], float(w), out=num)
        np.subtract(q[:, w:], q[:, :-w], out=tmp)  # S1
        np.subtract(num, tmp, out=num)
        np.square(seg, out=seg)
        for x, s in scans:
            torch.cumsum(x, 0, out=s)
        np.subtract(q[:, w:], q[:, :-w], out=den)  # S2
        np.multiply(den, float(w), out=den)
        np.square(tmp, out=tmp)
        np.subtract(den, tmp, out=den)
        # the floor q2[t + w] * eps_w never decreases along a row (q2 sums squares), so a row
        # whose smallest w S2 - S1^2 clears the floor at its last column clears it everywhere
        # the floor counts a full chunk's span even in a series' short last chunk, so a row's
        # verdict never depends on how many rows follow it
        floor = 4.0 * self.seg.shape[1] * np.finfo(np.float64).eps * w
        least, high = den.reshape(k, -1).min(axis=1), q[:, -1] * floor
        screened = bool((least > high.max(axis=1)).all()) or bool(
            ((den[..., 0].min(axis=1) > high[:, 0]) & (den[..., 1].min(axis=1) > high[:, 1])).all())
        if not screened:
            np.multiply(q[:, w:], floor, out=tmp)
            np.greater(den, tmp, out=varies)
        np.sqrt(den, out=den)
        np.divide(num, den, out=dst)  # rounded to float32 here, then clipped: rounding is
        if not screened and not varies.all():  # monotone, so that equals rounding the clip
            np.copyto(dst, 0.0, where=~varies)
        np.clip(dst, -self.clip32, self.clip32, out=dst)
