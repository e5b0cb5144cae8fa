"""Causal rolling-window kernels on float64 columns.

Every output at row t is computed from inputs at rows <= t only, and from work whose layout
(chunk and block boundaries) is fixed by absolute row index, never by the array's length. So
changing a later input cannot move a single bit of an earlier output, which is what the
causality tests check.

Window sums are prefix-sum differences, but the prefix sums restart every `CHUNK` rows (just
before the chunk's first window) and are taken of x minus an anchor value from that window:
the rounding error then depends on the chunk, not on how far into a million-row series it
sits, and a variance of price-like levels keeps its digits.
"""

from __future__ import annotations

import math

import numpy as np
import torch

CHUNK = 1 << 14


def prefix_sum(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Inclusive float64 prefix sum along `axis` with a leading 0 (a strictly sequential scan).

    torch's CPU scan gives the same bits as numpy's (both add left to right) at ~4x the speed.
    """
    shape = list(x.shape)
    shape[axis] += 1
    out = np.empty(shape)
    first = [slice(None)] * x.ndim
    first[axis] = slice(0, 1)
    rest = list(first)
    rest[axis] = slice(1, None)
    out[tuple(first)] = 0.0
    dim = axis % x.ndim
    torch.cumsum(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)), dim,
                 out=torch.from_numpy(out)[tuple(rest)])
    return out


class Windows:
    """Rolling mean (and variance) of one column over any window up to `wmax` rows.

    The prefix sums are computed once and shared by every window length. Rows before
    `start` are never read (they may be NaN); outputs before `start + w - 1` are NaN. A
    variance of a drifting level (log price) wants short chunks: the prefix sums of squares
    grow with the drift inside a chunk, and their rounding error with them.
    """

    def __init__(
        self, x: np.ndarray, wmax: int, start: int = 0, variance: bool = False, chunk: int = CHUNK
    ):
        self.n, self.start, self.wmax = len(x), start, wmax
        self._parts: list[tuple[int, int, int, float, np.ndarray, np.ndarray | None]] = []
        for k0 in range(0, self.n, chunk):
            k1 = min(k0 + chunk, self.n)
            lo = max(k0 - wmax + 1, start)
            if lo >= k1:
                continue
            anchor = float(x[lo])
            seg = x[lo:k1] - anchor
            q1 = prefix_sum(seg)
            q2 = prefix_sum(np.square(seg, out=seg)) if variance else None
            self._parts.append((k0, k1, lo, anchor, q1, q2))

    def _spans(self, w: int):
        if not 1 <= w <= self.wmax:
            raise ValueError(f"window {w} outside 1..{self.wmax}")
        for k0, k1, lo, anchor, q1, q2 in self._parts:
            r0 = max(k0, self.start + w - 1)
            if r0 < k1:
                yield r0, k1, slice(r0 - lo + 1, k1 - lo + 1), slice(r0 - lo + 1 - w, k1 - lo + 1 - w), anchor, q1, q2

    def mean(self, w: int) -> np.ndarray:
        out = np.full(self.n, np.nan)
        for r0, r1, now, before, anchor, q1, _ in self._spans(w):
            dst = out[r0:r1]
            np.subtract(q1[now], q1[before], out=dst)
            dst *= 1.0 / w
            dst += anchor
        return out

    def mean_var(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population variance; needs `variance=True`."""
        mean, var = np.full(self.n, np.nan), np.full(self.n, np.nan)
        for r0, r1, now, before, anchor, q1, q2 in self._spans(w):
            if q2 is None:
                raise ValueError("Windows built without variance=True")
            m = mean[r0:r1]
            np.subtract(q1[now], q1[before], out=m)
            m *= 1.0 / w
            v = var[r0:r1]
            np.subtract(q2[now], q2[before], out=v)
            v *= 1.0 / w
            v -= m * m
            np.maximum(v, 0.0, out=v)
            m += anchor
        return mean, var


def rolling_extremes(x: np.ndarray, windows: list[int], op: np.ufunc) -> dict[int, np.ndarray]:
    """Rolling max (op=np.maximum) or min (np.minimum) over each window, NaN before w - 1.

    A doubling ladder: level p holds op over the p rows ending at t, level 2p combines level p
    at t and t - p; a window w is level p (largest power of two <= w) at t and t - (w - p).
    Exact (no rounding) and O(n log w), shared across windows.
    """
    n = len(x)
    out: dict[int, np.ndarray] = {}
    level, p = x, 1
    for w in sorted(windows):
        while 2 * p <= w:
            nxt = np.full(n, np.nan)
            op(level[p:], level[:-p], out=nxt[p:])
            level, p = nxt, 2 * p
        if w == p:
            out[w] = level
        else:
            out[w] = np.full(n, np.nan)
            op(level[w - p :], level[: n - (w - p)], out=out[w][w - p :])
    return out


def ema(x: np.ndarray, alpha: float) -> np.ndarray:
    """Exact recursive EMA y_t = alpha x_t + (1 - alpha) y_{t-1}, seeded y_0 = x_0.

    Inside a block of b rows the recursion has the closed form
    y_j = alpha beta^j (cumsum_i(beta^-i x_i) + carry beta / alpha); blocks are short enough
    that beta^-i stays far from overflow, and a scalar carry (the previous block's last y)
    links them.
    """
    n = len(x)
    beta = 1.0 - alpha
    if n == 0 or beta <= 0.0:
        return np.array(x, dtype=np.float64)
    anchor = float(x[0])
    b = int(min(max(1.0, 600.0 / -math.log(beta)), CHUNK))
    nb = -(-n // b)
    flat = np.zeros(nb * b)
    np.subtract(x, anchor, out=flat[:n])
    blocks = flat.reshape(nb, b)
    down = beta ** np.arange(b, dtype=np.float64)
    blocks /= down
    torch.from_numpy(blocks).cumsum_(1)
    scale = alpha * down
    ends = (blocks[:, -1] * scale[-1]).tolist()
    carry = np.empty(nb)
    prev, step = 0.0, beta**b
    for k in range(nb):
        carry[k] = prev * (beta / alpha)
        prev = step * prev + ends[k]
    blocks += carry[:, None]
    blocks *= scale
    out = flat[:n]
    out += anchor
    return out


def lag_diff(x: np.ndarray, k: int) -> np.ndarray:
    """x[t] - x[t-k], NaN for t < k."""
    out = np.full(len(x), np.nan)
    if k < len(x):
        np.subtract(x[k:], x[:-k], out=out[k:])
    return out


def safe_div(num: np.ndarray, den: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """num / den where den > floor, else 0: a flat market gives 0, not inf or NaN."""
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den > floor)
    return out
