"""Helpers for the data tests: small files written on the fly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from foxhunt.data.series import Bars

T0 = 1_378_072_800_000_000_000  # 2013-09-01T22:00:00Z, ES Sunday open (17:00 America/Chicago)
MIN = 60_000_000_000


@pytest.fixture
def write_text(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def _make_bars(n: int = 5, *, start: int = T0, step: int = MIN, flow: bool = False) -> Bars:
    """Valid bars with known values: ts = start + (i+1) step, close = 100 + i, open = close - 0.5,
    high = close + 1, low = open - 1, volume = 10 + i (flow: 60% buy)."""
    i = np.arange(n, dtype=np.float64)
    close = 100.0 + i
    open_ = close - 0.5
    volume = 10.0 + i
    return Bars(
        ts=start + step * np.arange(1, n + 1, dtype=np.int64),
        open=open_,
        high=close + 1.0,
        low=open_ - 1.0,
        close=close,
        volume=volume,
        buy_volume=volume * 0.6 if flow else None,
        sell_volume=volume * 0.4 if flow else None,
    )


@pytest.fixture
def make_bars() -> Callable[..., Bars]:
    return _make_bars
