"""Ticks -> bars (time, tick, volume and dollar bars), vectorised over ticks with numpy.

Every bar's ``ts`` is its close time (docs/domain.md#time):

- time bars: ticks fall in bucket ``floor((ts - session_anchor_ns) / size)``; the bar is stamped
  with the bucket's end. A bucket with no trades makes no bar: a bar without trades has no
  open, high, low or close to report, and inventing one would fake liquidity.
- tick bars: every ``N`` ticks; stamped with the last tick's ts. Only complete bars are kept:
  the trailing partial bar has not closed yet, and emitting it would make the series change
  when more ticks arrive.
- volume / dollar bars: a bar closes on the first tick at which the bar's running sum reaches
  the threshold (volume: ``size``; dollar: ``price * size * point_value``), then the sum restarts
  at zero. Trades are never split, so a bar holds at least the threshold and the overshoot stays
  in the bar that closed. Stamped with the closing tick's ts; the trailing partial bar is
  dropped, as for tick bars. The sums are compared through one cumulative sum, so values that are
  not exact in binary floating point can move a boundary by float round-off.

Tick, volume and dollar bars can close several times within one timestamp (trades stamped to
the millisecond); such bars get ``ts`` bumped by 1 ns each so timestamps stay unique and sorted.

``buy_volume`` / ``sell_volume``: the tick's aggressor side when known, else the tick rule
(price up: buy, down: sell, unchanged: the previous tick's class). Ticks before the first price
change of the input have no class; their volume is split half and half, so
``buy_volume + sell_volume == volume`` always and no side is favoured.
"""

from __future__ import annotations

import numpy as np

from foxhunt.data.series import Bars, BarSpec, Ticks
from foxhunt.errors import DataError


def resample(
    ticks: Ticks,
    spec: BarSpec | str,
    *,
    session_anchor_ns: int = 0,
    point_value: float = 1.0,
) -> Bars:
    """Bars of ``spec`` from time-sorted ticks; empty Bars when not even one bar completes.

    ``session_anchor_ns``: any instant on the time-bar grid (e.g. a session open; 0 aligns to
    UTC midnight). It is a fixed UTC instant, so bars do not follow a session across DST.
    ``point_value``: dollars per point for dollar bars (default 1: notional in price units).
    """
    spec = BarSpec.parse(spec) if isinstance(spec, str) else spec
    n = len(ticks)
    if n == 0:
        return _empty()
    if n > 1 and (ticks.ts[1:] < ticks.ts[:-1]).any():
        raise DataError(
            "ticks are not sorted by time; validate them (read_ticks does) before resampling"
        )
    if spec.kind == "time":
        size = spec.ns
        starts, bucket = _time_buckets(ticks.ts, size, session_anchor_ns)
        return _aggregate(ticks, starts, n, session_anchor_ns + (bucket + 1) * size)
    if spec.kind == "ticks":
        count = int(spec.size)
        stop = n // count * count
        starts = np.arange(0, stop, count)
        return _aggregate(ticks, starts, stop, _unique(ticks.ts[starts + count - 1]))
    if spec.kind in ("volume", "dollar"):
        amount = ticks.size if spec.kind == "volume" else ticks.price * ticks.size * point_value
        closes = _threshold_closes(amount, spec.size)
        if closes.size == 0:
            return _empty()
        starts = np.concatenate(([0], closes[:-1] + 1))
        return _aggregate(ticks, starts, int(closes[-1]) + 1, _unique(ticks.ts[closes]))
    raise DataError(f"bar spec {spec}: cannot resample bars of kind {spec.kind!r}")


def _time_buckets(ts: np.ndarray, size: int, anchor: int) -> tuple[np.ndarray, np.ndarray]:
    """(first tick of each non-empty bucket, that bucket's number) for sorted ``ts``, bucket
    ``(ts - anchor) // size``. The buckets between the first and the last tick are few next to
    the ticks, so each bucket's first tick is found by binary search of its left edge; a grid
    that would be larger than the ticks falls back to numbering every tick."""
    n = len(ts)
    first, last = int(ts[0]) - anchor, int(ts[-1]) - anchor
    if -(2**63) <= first and last < 2**63:
        lo, hi = first // size, last // size
        if hi - lo <= n // 4:
            edges = anchor + np.arange(lo + 1, hi + 1, dtype=np.int64) * size
            pos = np.searchsorted(ts, edges, side="left")
            # a run of empty buckets shares its first-tick position with the next non-empty
            # one: keep the last bucket of each run
            keep = np.empty(len(pos), dtype=bool)
            np.not_equal(pos[:-1], pos[1:], out=keep[:-1])
            keep[-1:] = True
            starts = np.concatenate(([0], pos[keep]))
            bucket = np.concatenate(([lo], np.arange(lo + 1, hi + 1, dtype=np.int64)[keep]))
            return starts, bucket
    bucket = (ts - anchor) // size
    starts = np.concatenate(([0], np.flatnonzero(np.diff(bucket)) + 1))
    return starts, bucket[starts]


def aggressor_sign(ticks: Ticks) -> np.ndarray:
    """+1 buy, -1 sell, 0 unknown per tick: the given side, else the tick rule (module doc)."""
    n = len(ticks)
    price = ticks.price
    sign = np.zeros(n, dtype=np.int8)
    if n > 1:
        up = price[1:] > price[:-1]
        down = price[1:] < price[:-1]
        np.subtract(up.view(np.int8), down.view(np.int8), out=sign[1:])
        _forward_fill(sign)
    if ticks.side is not None:
        sign = np.where(ticks.side != 0, ticks.side, sign).astype(np.int8)
    return sign


def _forward_fill(sign: np.ndarray) -> None:
    """Zeros after the first nonzero entry take the last nonzero value before them, in place.

    Pointer doubling: after the pass with shift k every zero within 2k - 1 entries of a
    nonzero one is filled, so the passes stop after log2 of the longest run of zeros (a few
    for real trades) and each is a handful of int8 vector operations.
    """
    nonzero = sign != 0
    first = int(np.argmax(nonzero))
    if not nonzero[first]:
        return
    seg = sign[first:]
    zero = np.empty(len(seg), dtype=bool)
    fill = np.empty(len(seg), dtype=np.int8)
    k = 1
    while k < len(seg):
        np.equal(seg, 0, out=zero)
        if not zero.any():
            break
        np.multiply(zero[k:].view(np.int8), seg[:-k], out=fill[k:])
        seg[k:] += fill[k:]
        k *= 2


def _threshold_closes(amount: np.ndarray, threshold: float) -> np.ndarray:
    """Indices of closing ticks. Each bar starts after the previous close, so bars chain: one
    Python step per bar, each a binary search in the cumulative sum. When bars are dense (over
    one per 32 ticks) the searches are done for every tick at once instead."""
    cum = np.cumsum(amount)
    n = len(cum)
    before = np.empty_like(cum)
    before[0] = 0.0
    before[1:] = cum[:-1]
    dense = cum[-1] / threshold > n / 32
    close_if_start = np.searchsorted(cum, before + threshold) if dense else None
    closes = []
    i = 0
    while i < n:
        if close_if_start is not None:
            e = int(close_if_start[i])
        else:
            e = int(np.searchsorted(cum, before[i] + threshold))
        if e >= n:
            break
        closes.append(e)
        i = e + 1
    return np.asarray(closes, dtype=np.int64)


def _aggregate(ticks: Ticks, starts: np.ndarray, stop: int, ts: np.ndarray) -> Bars:
    if starts.size == 0:
        return _empty()
    price, size = ticks.price[:stop], ticks.size[:stop]
    last = np.empty_like(starts)
    last[:-1] = starts[1:] - 1
    last[-1] = stop - 1
    volume = np.add.reduceat(size, starts)
    buy = np.add(aggressor_sign(ticks)[:stop], 1.0)  # the buy share (sign + 1) / 2, in place
    buy *= 0.5
    np.multiply(size, buy, out=buy)
    buy = np.add.reduceat(buy, starts)
    return Bars(
        ts=ts,
        open=price[starts],
        high=np.maximum.reduceat(price, starts),
        low=np.minimum.reduceat(price, starts),
        close=price[last],
        volume=volume,
        buy_volume=buy,
        sell_volume=np.maximum(volume - buy, 0.0),
    )


def _unique(ts: np.ndarray) -> np.ndarray:
    """Smallest strictly increasing stamps >= ``ts``: out[i] = max(ts[i], out[i-1] + 1)."""
    k = np.arange(len(ts), dtype=np.int64)
    return np.maximum.accumulate(ts - k) + k


def _empty() -> Bars:
    z = np.empty(0)
    return Bars(
        ts=np.empty(0, dtype=np.int64),
        open=z,
        high=z,
        low=z,
        close=z,
        volume=z,
        buy_volume=z,
        sell_volume=z,
    )
