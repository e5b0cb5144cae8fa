"""Causal rolling-window kernels over segments of a series, several segments at once.

The pipeline feeds these kernels segments whose bounds are fixed by absolute row index (a
chunk plus a fixed run of history rows before it), one segment per row of a 2-D array, and
every kernel computes output column t from segment columns <= t only. So changing a later bar
cannot move a single bit of an earlier output, which is what the causality tests check, and a
row's bits do not depend on how many segments go through together.

Window sums are differences of prefix sums taken within the segment, so the rounding error
depends on the segment, not on how far into a million-row series it sits. A level (a log
price) is summed minus an anchor, the segment's first value, so its variance keeps its digits;
other series are summed as they are, so a run of zeros gives windows of exactly zero.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

MAX_BLOCK = 8192
"""Longest block of the EMA's closed form (shorter for fast EMAs; the tests shrink it)."""


def root(mean_square: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """sqrt of a rolling mean of squares, which prefix-sum rounding can push a hair below 0."""
    np.maximum(mean_square, 0.0, out=mean_square)
    return np.sqrt(mean_square, out=mean_square if out is None else out)


def safe_div(num: np.ndarray, den: np.ndarray, out: np.ndarray) -> None:
    """num / den where den > 0, else 0, into `out` (any float dtype): a flat market gives 0,
    not inf or NaN."""
    if den.size and den.min() > 0.0:  # a NaN fails this too
        np.divide(num, den, out=out)
    else:
        z = np.zeros(den.shape)
        np.divide(num, den, out=z, where=den > 0.0)
        out[...] = z


def prefix_rows(d: np.ndarray) -> np.ndarray:
    """Inclusive float64 prefix sum of each row of d [B, n], with a leading 0: [B, n + 1].

    One single-threaded torch scan a row: torch's CPU scan adds left to right like numpy's, so
    the bits are the same, at a few times the speed, and a row's bits do not depend on B."""
    d = np.ascontiguousarray(d, dtype=np.float64)
    out = np.empty((d.shape[0], d.shape[1] + 1))
    out[:, 0] = 0.0
    for x, q in zip(torch.from_numpy(d).unbind(0), torch.from_numpy(out[:, 1:]).unbind(0),
                    strict=True):
        torch.cumsum(x, 0, out=q)
    return out


class Sums:
    """Prefix sums of segment series x [B, n] (one row per segment) from column `start` on,
    minus each row's first value for a level, read back as rolling means at the columns the
    caller keeps. Columns before `start + w - 1` are NaN."""

    def __init__(self, x: np.ndarray, start: int = 0, variance: bool = False,
                 anchor: bool = False):
        self.n, self.start = x.shape[1], start
        self.anchor = x[:, start].copy() if anchor and start < x.shape[1] else None
        d = x[:, start:] - self.anchor[:, None] if self.anchor is not None else x[:, start:]
        self.q1 = prefix_rows(d)
        if variance:
            self.q2 = prefix_rows(np.square(d, out=d) if self.anchor is not None
                                   else np.square(d))

    def window_means(self, q: np.ndarray, w: int, keep: int, out: np.ndarray | None = None
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
        out, dst = self.window_means(self.q1, w, keep)
        if self.anchor is not None:  # rows whose anchor is 0 are left alone
            np.add(dst, self.anchor[:, None], out=dst, where=self.anchor[:, None] != 0.0)
        return out

    def mean_var(self, w: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population variance at columns [keep, n); needs `variance=True`."""
        mean, m = self.window_means(self.q1, w, keep)
        var, v = self.window_means(self.q2, w, keep)
        v -= m * m
        np.maximum(v, 0.0, out=v)
        m += 0.0 if self.anchor is None else self.anchor[:, None]
        return mean, var


def extremes(x: np.ndarray, windows: list[int], op: np.ufunc, keep: int
              ) -> dict[int, np.ndarray]:
    """Rolling max (op=np.maximum) or min (np.minimum) over each window along the rows of
    x [B, n], at columns [keep, n) only; columns before w - 1 are NaN.

    A doubling ladder: level p holds op over the p rows ending at t, level 2p combines level p
    at t and t - p; window w is level p (largest power of two <= w) at t and at t - (w - p).
    Exact (no rounding, so the bits are those of the full ladder), O(n log w) and shared across
    windows."""
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


@lru_cache(maxsize=64)
def _powers(beta: float, b: int) -> np.ndarray:
    """beta^0 .. beta^(b-1), read-only; every chunk of a series reuses them."""
    out = beta ** np.arange(b, dtype=np.float64)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _scaled_powers(alpha: float, beta: float, b: int) -> np.ndarray:
    """alpha * beta^j, read-only."""
    out = alpha * _powers(beta, b)
    out.flags.writeable = False
    return out


def ema_rows(x: np.ndarray, alpha: float, prev: float | None = None) -> tuple[np.ndarray, float]:
    """Exact recursive EMA y_t = alpha x_t + (1 - alpha) y_{t-1} of consecutive stretches of
    one series, the rows of x [B, n], at once; returns (the rows, the last row's last value).

    Row 0 continues from y_{-1} = `prev` (seeded y_0 = x_0 when None), row b from row b - 1's
    last value. Inside a block of b columns the recursion has the closed form
    y_j = alpha beta^j (cumsum_i(beta^-i x_i) + carry beta / alpha), carry being the previous
    block's last y; blocks are short enough that beta^-i stays far from overflow, and their
    length depends on alpha only, so a value's bits never depend on the series length. Only the
    carries between blocks run row after row, in Python floats (IEEE doubles, as numpy's); the
    vector work is shared.
    """
    rows, n = x.shape
    beta = 1.0 - alpha
    if n == 0 or beta <= 0.0:
        out = np.array(x, dtype=np.float64)
        return out, (float(out[-1, -1]) if out.size else (prev or 0.0))
    anchors = x[:, 0].astype(np.float64)
    b = int(min(max(1.0, 600.0 / -math.log(beta)), MAX_BLOCK))
    nb = -(-n // b)
    flat = np.empty((rows, nb * b))
    flat[:, n:] = 0.0
    np.subtract(x, anchors[:, None], out=flat[:, :n])
    blocks = flat.reshape(rows, nb, b)
    down = _powers(beta, b)
    blocks /= down
    # one scan per block: a scan over several rows is split across torch's threads
    for row in torch.from_numpy(flat.reshape(rows * nb, b)).unbind(0):
        row.cumsum_(0)
    scale = _scaled_powers(alpha, beta, b)
    ends = (blocks[:, :, -1] * scale[-1]).tolist()
    last = (n - 1) % b
    tails, scale_last = blocks[:, nb - 1, last].tolist(), float(scale[last])
    carry = np.empty((rows, nb))
    step = beta**b
    for r in range(rows):
        anchor = float(anchors[r])
        state = 0.0 if prev is None else prev - anchor
        for k in range(nb):
            carry[r, k] = state * (beta / alpha)
            state = step * state + ends[r][k]
        # this row's last value, as the vector code below computes it
        prev = (tails[r] + float(carry[r, nb - 1])) * scale_last + anchor
    blocks += carry[:, :, None]
    blocks *= scale
    out = flat[:, :n]
    out += anchors[:, None]
    assert prev is not None
    return out, prev
