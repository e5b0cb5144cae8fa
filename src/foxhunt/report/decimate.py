"""Chart-side data reduction: min/max-preserving decimation and compact time encoding.

Long series are cut to at most `max_points` points per chart. The bars are split into equal
buckets and each bucket keeps its first and last bar plus, for every plotted column, the bar
with the column's minimum and the bar with its maximum. Peaks, troughs and the deepest
drawdown therefore survive exactly; only the path between them is thinned. All columns of a
chart share the kept bars, so their cursors line up.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

MAX_CHART_POINTS = 5000
"""Default cap on points per chart (every column of the chart shares the same x points)."""


def decimate(columns: Sequence[np.ndarray], max_points: int = MAX_CHART_POINTS) -> np.ndarray:
    """Sorted indices of the bars to plot: all of them, or a min/max-preserving subset."""
    if not columns:
        raise ValueError("decimate needs at least one column")
    n = len(columns[0])
    if n <= max_points:
        return np.arange(n, dtype=np.int64)
    buckets = max(1, max_points // (2 + 2 * len(columns)))
    size = -(-n // buckets)
    starts = np.arange(0, n, size, dtype=np.int64)
    ends = np.minimum(starts + size, n) - 1
    keep = [starts, ends]
    rows, pad = len(starts), len(starts) * size - n
    for col in columns:
        c = np.asarray(col, dtype=np.float64)
        lo = np.concatenate((np.where(np.isnan(c), np.inf, c), np.full(pad, np.inf))).reshape(
            rows, size
        )
        hi = np.concatenate((np.where(np.isnan(c), -np.inf, c), np.full(pad, -np.inf))).reshape(
            rows, size
        )
        keep.append(starts + lo.argmin(axis=1))
        keep.append(starts + hi.argmax(axis=1))
    idx = np.unique(np.concatenate(keep))
    return idx[idx < n]


def time_segments(ts_ns: np.ndarray, max_segments: int = MAX_CHART_POINTS) -> list[list[int]]:
    """Bar index -> time as `[[start_index, start_ms, step_ms], ...]`, exact for regular bars.

    A new segment starts wherever the spacing between bars changes (an overnight gap, a
    weekend), so 1-minute bars need two segments per session. Irregular series that would need
    more than `max_segments` fall back to evenly spaced anchors with linear interpolation.
    """
    ms = np.asarray(ts_ns, dtype=np.int64) // 1_000_000
    n = ms.size
    if n == 1:
        return [[0, int(ms[0]), 0]]
    d = np.diff(ms)
    starts = np.concatenate(([0], np.flatnonzero(d[1:] != d[:-1]) + 1))
    if starts.size <= max_segments:
        return [[int(s), int(ms[s]), int(d[s]) if s < n - 1 else 0] for s in starts]
    anchors = np.unique(np.linspace(0, n - 1, max_segments).astype(np.int64))
    out = []
    for a, b in pairwise(anchors):
        out.append([int(a), int(ms[a]), float((ms[b] - ms[a]) / (b - a))])
    out.append([int(anchors[-1]), int(ms[anchors[-1]]), 0])
    return out


def rolling_shares(direction: np.ndarray, window: int) -> np.ndarray:
    """[3, n] trailing-window share of bars flat / long / short (unknown bars count for none)."""
    d = np.asarray(direction)
    n = d.size
    onehot = np.stack([(d == k) for k in (0, 1, 2)]).astype(np.float64)
    csum = np.concatenate((np.zeros((3, 1)), np.cumsum(onehot, axis=1)), axis=1)
    hi = np.arange(1, n + 1)
    lo = np.maximum(hi - window, 0)
    counts = csum[:, hi] - csum[:, lo]
    total = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / total, np.nan)


def mix_window(n: int) -> int:
    """Bars in the action-mix rolling window: 2.5% of the series, at least 30, at most n."""
    return max(1, min(n, max(30, n // 40)))
