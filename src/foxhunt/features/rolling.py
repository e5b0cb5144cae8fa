"""Causal rolling-window kernels on float64 columns.

Every output at row t is computed from inputs at rows <= t only, and from work whose layout
(chunk and block boundaries) is fixed by absolute row index, never by the array's length. So
changing a later input cannot move a single bit of an earlier output, which is what the
causality tests check.

Window sums are prefix-sum differences, but each chunk of `CHUNK` rows re-starts its prefix
sums just before its first window and subtracts an anchor value taken from that window: the
rounding error then depends on the chunk, not on how far into a million-row series it sits,
and a variance of price-like levels keeps its digits.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

CHUNK = 1 << 14


def chunks(n: int, w: int, start: int) -> Iterator[tuple[int, int, int]]:
    """(r0, r1, lo): output rows [r0, r1) of windows of w rows that begin no earlier than `start`.

    Chunks are aligned to multiples of CHUNK; `lo = r0 - w + 1` is the first input row they read.
    """
    first = start + w - 1
    for k0 in range(0, n, CHUNK):
        r0, r1 = max(k0, first), min(k0 + CHUNK, n)
        if r0 < r1:
            yield r0, r1, r0 - w + 1


def _nan(n: int) -> np.ndarray:
    return np.full(n, np.nan)


def rolling_mean(x: np.ndarray, w: int, start: int = 0) -> np.ndarray:
    """Mean of x[t-w+1 .. t] for t >= start + w - 1 (NaN before); x must be finite from `start`."""
    out = _nan(len(x))
    for r0, r1, lo in chunks(len(x), w, start):
        seg = x[lo:r1] - x[lo]
        p = np.empty(len(seg) + 1)
        p[0] = 0.0
        np.cumsum(seg, out=p[1:])
        np.subtract(p[w:], p[:-w], out=out[r0:r1])
        out[r0:r1] *= 1.0 / w
        out[r0:r1] += x[lo]
    return out


def rolling_mean_var(x: np.ndarray, w: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rolling mean and population variance over w rows, anchored per chunk (see module doc)."""
    n = len(x)
    mean, var = _nan(n), _nan(n)
    for r0, r1, lo in chunks(n, w, start):
        seg = x[lo:r1] - x[lo]
        p1 = np.empty(len(seg) + 1)
        p2 = np.empty(len(seg) + 1)
        p1[0] = p2[0] = 0.0
        np.cumsum(seg, out=p1[1:])
        np.square(seg, out=seg)
        np.cumsum(seg, out=p2[1:])
        m = (p1[w:] - p1[:-w]) * (1.0 / w)
        v = (p2[w:] - p2[:-w]) * (1.0 / w)
        v -= m * m
        np.maximum(v, 0.0, out=var[r0:r1])
        np.add(m, x[lo], out=mean[r0:r1])
    return mean, var


def _block_extreme(x: np.ndarray, w: int, start: int, op: np.ufunc, pad: float) -> np.ndarray:
    """Van Herk / Gil-Werman: prefix and suffix extremes inside blocks of w rows (O(n) for any w).

    The window ending at t spans at most two blocks; the suffix part of the earlier block ends
    at or before t, so nothing after t is read.
    """
    out = _nan(len(x))
    y = x[start:]
    n = len(y)
    if n < w:
        return out
    nb = -(-n // w)
    blocks = np.full(nb * w, pad)
    blocks[:n] = y
    blocks = blocks.reshape(nb, w)
    pre = op.accumulate(blocks, axis=1).ravel()
    suf = op.accumulate(blocks[:, ::-1], axis=1)[:, ::-1].ravel()
    op(suf[: n - w + 1], pre[w - 1 : n], out=out[start + w - 1 :])
    return out


def rolling_max(x: np.ndarray, w: int, start: int = 0) -> np.ndarray:
    return _block_extreme(x, w, start, np.maximum, -np.inf)


def rolling_min(x: np.ndarray, w: int, start: int = 0) -> np.ndarray:
    return _block_extreme(x, w, start, np.minimum, np.inf)


def ema(x: np.ndarray, alpha: float, start: int = 0) -> np.ndarray:
    """Exact recursive EMA y_t = alpha x_t + (1 - alpha) y_{t-1}, seeded y_start = x_start.

    Inside a block the recursion has the closed form beta^j * cumsum(x_i beta^-i); blocks are
    short enough that beta^-i stays far from overflow, and a scalar carry links them.
    """
    out = _nan(len(x))
    beta = 1.0 - alpha
    y = x[start:]
    n = len(y)
    if n == 0:
        return out
    if beta <= 0.0:
        out[start:] = y
        return out
    anchor = y[0]
    b = int(min(max(1, 40.0 / -math.log(beta)), CHUNK))
    nb = -(-n // b)
    blocks = np.zeros(nb * b)
    blocks[:n] = y
    blocks -= anchor
    blocks = blocks.reshape(nb, b)
    j = np.arange(b, dtype=np.float64)
    up, down = beta**-j, beta**j
    local = np.cumsum(blocks * up, axis=1)
    local *= alpha * down
    ends = local[:, -1].tolist()
    carry = np.empty(nb)
    prev, bb = 0.0, beta**b
    for k in range(nb):
        carry[k] = prev
        prev = bb * prev + ends[k]
    local += carry[:, None] * (beta * down)
    out[start:] = local.ravel()[:n]
    out[start:] += anchor
    return out


def lag_diff(x: np.ndarray, k: int) -> np.ndarray:
    """x[t] - x[t-k], NaN for t < k."""
    out = _nan(len(x))
    if k < len(x):
        np.subtract(x[k:], x[:-k], out=out[k:])
    return out


def safe_div(num: np.ndarray, den: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """num / den where den > floor, else 0 (flat markets give 0, not NaN or inf); NaN stays NaN."""
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den > floor)
    out[np.isnan(num) | np.isnan(den)] = np.nan
    return out
