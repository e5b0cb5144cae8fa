"""Random but valid bar series for the feature tests, suffix perturbations of them, and their
mirrored market."""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import numpy as np

from foxhunt.data.series import Bars
from foxhunt.features import normalise, pipeline, rolling
from foxhunt.features.config import GROUPS, FeatureConfig

MINUTE = 60_000_000_000
START_NS = 1_709_856_000 * 1_000_000_000  # 2024-03-08 00:00 UTC, two days before a US DST change


def random_bars(
    rng: np.random.Generator,
    n: int,
    *,
    flow: bool = False,
    flat_from: int | None = None,
    zero_volume: bool = False,
    step_ns: int = MINUTE,
) -> Bars:
    """A log random walk with valid OHLC; `flat_from` freezes prices from that row on."""
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 2e-3, n)))
    opens = np.empty(n)
    opens[0] = close[0]
    opens[1:] = close[:-1] * np.exp(rng.normal(0.0, 5e-4, n - 1))
    if flat_from is not None:
        close[flat_from:] = opens[flat_from:] = close[max(flat_from - 1, 0)]
    spread = np.abs(rng.normal(0.0, 1e-3, (2, n)))
    if flat_from is not None:
        spread[:, flat_from:] = 0.0
    high = np.maximum(opens, close) * np.exp(spread[0])
    low = np.minimum(opens, close) * np.exp(-spread[1])
    volume = np.where(rng.random(n) < 0.1, 0.0, rng.integers(1, 500, n)).astype(float)
    if zero_volume:
        volume[:] = 0.0
    buy = sell = None
    if flow:
        buy = np.floor(volume * rng.random(n))
        sell = volume - buy
    ts = START_NS + np.arange(1, n + 1, dtype=np.int64) * step_ns
    return Bars(ts, opens, high, low, close, volume, buy, sell)


FIELDS = ("open", "high", "low", "close", "volume", "flow", "ts")


def perturb(
    bars: Bars, rng: np.random.Generator, first: int, fields: set[str], every: bool
) -> Bars:
    """Change bars from row `first` on (all of them, or `first` alone) keeping them valid."""
    cols = {k: (None if v is None else v.copy()) for k, v in bars.columns().items()}
    rows = np.arange(first, len(bars)) if every else np.array([first])
    m = len(rows)
    o, h, l, c = cols["open"], cols["high"], cols["low"], cols["close"]
    if "close" in fields:
        c[rows] *= np.exp(rng.normal(0.0, 0.02, m))
    if "open" in fields:
        o[rows] *= np.exp(rng.normal(0.0, 0.02, m))
    if "high" in fields:
        h[rows] *= np.exp(np.abs(rng.normal(0.0, 0.02, m)))
    if "low" in fields:
        l[rows] *= np.exp(-np.abs(rng.normal(0.0, 0.02, m)))
    h[rows] = np.maximum.reduce([h[rows], o[rows], c[rows]])
    l[rows] = np.minimum.reduce([l[rows], o[rows], c[rows]])
    if "volume" in fields:
        cols["volume"][rows] = rng.integers(0, 5000, m).astype(float)
    if bars.has_flow and ("flow" in fields or "volume" in fields):
        cols["buy_volume"][rows] = np.floor(cols["volume"][rows] * rng.random(m))
        cols["sell_volume"][rows] = cols["volume"][rows] - cols["buy_volume"][rows]
    if "ts" in fields:
        cols["ts"][first:] += int(rng.integers(1, 10_000)) * MINUTE
    return Bars(**cols)


def mirrored_bars(bars: Bars, pivot: float) -> Bars:
    """The mirrored market: prices p -> pivot^2 / p (log prices reflected about log pivot), highs
    and lows swapped, buy and sell volume swapped."""
    cols = bars.columns()
    square = pivot * pivot
    cols["open"], cols["close"] = square / cols["open"], square / cols["close"]
    cols["high"], cols["low"] = square / cols["low"], square / cols["high"]
    cols["buy_volume"], cols["sell_volume"] = cols.get("sell_volume"), cols.get("buy_volume")
    return Bars(**cols)


@contextmanager
def small_chunks(chunk: int = 37, rows: int = 23, rolling_chunk: int = 29, block: int = 5):
    """Shrink every chunk and block size so short test series cross many of their boundaries."""
    with (
        mock.patch.object(pipeline, "CHUNK", chunk),
        mock.patch.object(normalise, "ROWS", rows),
        mock.patch.object(normalise, "ROLLING_CHUNK", rolling_chunk),
        mock.patch.object(normalise, "ROLLING_FEATURES", 3),
        mock.patch.object(rolling, "MAX_BLOCK", block),
    ):
        yield


def every_group(**overrides) -> FeatureConfig:
    """Every feature group, at windows no longer than those the tests' series and expected values
    were written for (a 256-bar warm-up; the shipped config builds a compact subset)."""
    return FeatureConfig(**{"groups": list(GROUPS), "trend_windows": [8, 32, 128],
                            "cross_pairs": [(4, 16), (16, 64), (32, 128)], **overrides})
