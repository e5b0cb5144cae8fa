"""Causal rolling-window kernels on one float64 segment of a series.

The pipeline feeds these kernels segments whose bounds are fixed by absolute row index (a
chunk plus a fixed run of history rows before it), and every kernel computes output row t from
segment rows <= t only. So changing a later bar cannot move a single bit of an earlier output,
which is what the causality tests check.

Window sums are differences of prefix sums taken within the segment, so the rounding error
depends on the segment, not on how far into a million-row series it sits. A level (a log
price) is summed minus an anchor, the segment's first value, so its variance keeps its digits;
other series are summed as they are, so a run of zeros gives windows of exactly zero.

The pipeline runs this arithmetic on several chunks at once, one segment per row of a 2-D
array (`ema_rows` here; window sums and extremes in `foxhunt.features.pipeline`), which gives
every row the bits these one-segment kernels give it.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

MAX_BLOCK = 8192


def prefix_sum(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Inclusive float64 prefix sum along `axis`, with a leading 0 (a strictly sequential scan).

    torch's CPU scan adds left to right like numpy's, so the bits are the same, at ~4x speed.
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim == 1:
        return prefix_sum_1d(x)
    axis %= x.ndim
    shape = list(x.shape)
    shape[axis] += 1
    out = np.empty(shape)
    head = [slice(None)] * x.ndim
    head[axis] = slice(0, 1)
    out[tuple(head)] = 0.0
    head[axis] = slice(1, None)
    torch.cumsum(torch.from_numpy(x), axis, out=torch.from_numpy(out)[tuple(head)])
    return out


def prefix_sum_1d(x: np.ndarray) -> np.ndarray:
    """`prefix_sum` of a contiguous float64 vector: one single-threaded torch scan."""
    out = np.empty(len(x) + 1)
    out[0] = 0.0
    torch.cumsum(torch.from_numpy(x), 0, out=torch.from_numpy(out[1:]))
    return out


class Windows:
    """Rolling means (and variances) of one segment, for any window length.

    Rows before `start` are never read (they may be NaN); output rows before
    `start + w - 1` are NaN. `anchor` subtracts the first value before summing (for levels).
    """

    def __init__(self, x: np.ndarray, start: int = 0, variance: bool = False, anchor: bool = False):
        self.n, self.start = len(x), start
        self.anchor = float(x[start]) if anchor and start < len(x) else 0.0
        d = x[start:] - self.anchor if anchor else x[start:]
        self._q1 = prefix_sum(d)
        self._q2 = prefix_sum(np.square(d)) if variance else None

    def _diff(self, q: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
        out = np.full(self.n, np.nan)
        dst = out[self.start + w - 1 :]
        if len(dst):
            np.subtract(q[w:], q[:-w], out=dst)
            dst *= 1.0 / w
        return out, dst

    def mean(self, w: int) -> np.ndarray:
        out, dst = self._diff(self._q1, w)
        if self.anchor:
            dst += self.anchor
        return out

    def mean_var(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population variance; needs `variance=True`."""
        if self._q2 is None:
            raise ValueError("Windows built without variance=True")
        mean, m = self._diff(self._q1, w)
        var, v = self._diff(self._q2, w)
        v -= m * m
        np.maximum(v, 0.0, out=v)
        m += self.anchor
        return mean, var


def rolling_extremes(x: np.ndarray, windows: list[int], op: np.ufunc) -> dict[int, np.ndarray]:
    """Rolling max (op=np.maximum) or min (np.minimum) over each window, NaN before w - 1.

    A doubling ladder: level p holds op over the p rows ending at t, level 2p combines level p
    at t and t - p; window w is level p (largest power of two <= w) at t and at t - (w - p).
    Exact (no rounding), O(n log w) and shared across windows.
    """
    n = len(x)
    out: dict[int, np.ndarray] = {}
    level, p = x, 1
    for w in sorted(windows):
        while 2 * p <= w:
            nxt = np.full(n, np.nan)
            if p < n:
                op(level[p:], level[:-p], out=nxt[p:])
            level, p = nxt, 2 * p
        if w == p:
            out[w] = level
        else:
            out[w] = np.full(n, np.nan)
            if w - p < n:
                op(level[w - p :], level[: n - (w - p)], out=out[w][w - p :])
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


def ema(x: np.ndarray, alpha: float, prev: float | None = None) -> np.ndarray:
    """Exact recursive EMA y_t = alpha x_t + (1 - alpha) y_{t-1}, continuing from y_{-1} = prev.

    With `prev=None` the EMA is seeded y_0 = x_0. Inside a block of b rows the recursion has
    the closed form y_j = alpha beta^j (cumsum_i(beta^-i x_i) + carry beta / alpha), carry being
    the previous block's last y; blocks are short enough that beta^-i stays far from overflow,
    and their length depends on alpha only, so a row's bits never depend on the series length.
    """
    n = len(x)
    beta = 1.0 - alpha
    if n == 0 or beta <= 0.0:
        return np.array(x, dtype=np.float64)
    anchor = float(x[0])
    b = int(min(max(1.0, 600.0 / -math.log(beta)), MAX_BLOCK))
    nb = -(-n // b)
    flat = np.empty(nb * b)
    flat[n:] = 0.0
    np.subtract(x, anchor, out=flat[:n])
    blocks = flat.reshape(nb, b)
    down = _powers(beta, b)
    blocks /= down
    # one scan per block: a scan over several rows is split across torch's threads
    for row in torch.from_numpy(blocks).unbind(0):
        row.cumsum_(0)
    scale = _scaled_powers(alpha, beta, b)
    state, step = (0.0 if prev is None else prev - anchor), beta**b
    if nb == 1:
        blocks += state * (beta / alpha)
    else:
        ends = (blocks[:, -1] * scale[-1]).tolist()
        carry = np.empty(nb)
        for k in range(nb):
            carry[k] = state * (beta / alpha)
            state = step * state + ends[k]
        blocks += carry[:, None]
    blocks *= scale
    out = flat[:n]
    out += anchor
    return out


def ema_rows(x: np.ndarray, alpha: float, prev: float | None = None) -> tuple[np.ndarray, float]:
    """`ema` of consecutive stretches of one series, the rows of x [B, n], at once.

    Row b is what `ema(x[b], alpha, last)` returns, `last` being row b - 1's last value (`prev`
    for row 0); returns (the rows, the last row's last value). Only the carries between blocks
    run row after row, in Python floats (IEEE doubles, as numpy's); the vector work is shared.
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


def lag_diff(x: np.ndarray, k: int) -> np.ndarray:
    """x[t] - x[t-k], NaN for t < k."""
    out = np.full(len(x), np.nan)
    if k < len(x):
        np.subtract(x[k:], x[:-k], out=out[k:])
    return out


def safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den where den > 0, else 0: a flat market gives 0, not inf or NaN."""
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den > 0.0)
    return out
