"""Prices and the instrument's tick grid at import (docs/domain.md#the-tick-grid).

Exchange data sits on the contract's tick grid; data from elsewhere (spot FX, an index, a
vendor's adjusted series) often does not. An import checks every price against the grid and a
policy decides what happens to the ones off it:
- ``error`` (the default): refuse the file, naming the first offending row and how many there
  are, and saying which policy to choose;
- ``snap``: round every price to the nearest tick (OHLC order survives: rounding is monotone);
- ``keep``: store them as they are, for data that is not exchange-native. Features read them
  as they are; fills and marks, in the env, backtest and paper alike, are at the nearest tick
  (`tradable`): a venue prints on its grid, and the event log records prices in whole ticks.
The store records the policy and the count with the import (`MarketStore.imports`); a snap
says how many rows and prices it moved (`GridCheck.snap_note`, the import's `snapped`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from foxhunt.data.series import Bars, Ticks
from foxhunt.errors import ValidationError

OffGrid = Literal["error", "snap", "keep"]
OFF_GRID_POLICIES: tuple[OffGrid, ...] = ("error", "snap", "keep")
GRID_TOLERANCE = 1e-6
"""How far from a multiple of the tick (in ticks) a price may be and still count as on the
grid: float64 prices such as 1.09035 are not exact multiples of 0.00005 in binary."""
OFF_GRID = "prices off the tick grid"


@dataclass(frozen=True)
class GridCheck:
    """What an import's grid check found and did."""

    policy: OffGrid
    tick_size: float
    off_grid_rows: int  # rows with at least one price off the grid, before the policy acted
    rows: int
    off_grid_prices: int = 0  # prices (of open, high, low, close; or trades) off the grid

    @property
    def snapped(self) -> tuple[int, int]:
        """(rows, prices) the check moved onto the grid: (0, 0) unless the policy is snap."""
        return (self.off_grid_rows, self.off_grid_prices) if self.policy == "snap" else (0, 0)

    def snap_note(self, what: str) -> str | None:
        """The line an import prints for what snapping changed, or None when it changed nothing."""
        rows, prices = self.snapped
        if not rows:
            return None
        return (f"{what}: snapped {rows:,} of {self.rows:,} rows ({prices:,} prices) to the "
                f"{self.tick_size:g} grid (--off-grid snap)")

    @property
    def record(self) -> str:
        """The line the store's import log keeps."""
        if self.off_grid_rows == 0:
            return f"on the {self.tick_size:g} grid"
        done = {"snap": "snapped to", "keep": "kept off", "error": "refused off"}[self.policy]
        return f"{self.off_grid_rows} of {self.rows} rows {done} the {self.tick_size:g} grid"


def off_grid_mask(prices: np.ndarray, tick_size: float) -> np.ndarray:
    ticks = np.asarray(prices, dtype=np.float64) / tick_size
    return np.abs(ticks - np.round(ticks)) > GRID_TOLERANCE


def snap(prices: np.ndarray, tick_size: float) -> np.ndarray:
    return np.round(np.asarray(prices, dtype=np.float64) / tick_size) * tick_size


def tradable(bars: Bars, tick_size: float) -> Bars:
    """The prices fills and marks use: each price off the grid at its nearest tick, every
    other as it is (bit for bit: `bars` itself when all are on the grid)."""
    cols = {k: getattr(bars, k) for k in ("open", "high", "low", "close")}
    masks = {k: off_grid_mask(v, tick_size) for k, v in cols.items()}
    if not any(m.any() for m in masks.values()):
        return bars
    return replace(bars, **{k: np.where(masks[k], snap(v, tick_size), v) for k, v in cols.items()})


def check_bars(bars: Bars, tick_size: float, policy: OffGrid, source: str) -> tuple[Bars, GridCheck]:
    """`bars` as the policy leaves them, and what the check found; ``error`` raises on any
    price off the grid."""
    cols = {k: getattr(bars, k) for k in ("open", "high", "low", "close")}
    masks = {k: off_grid_mask(v, tick_size) for k, v in cols.items()}
    rows = np.logical_or.reduce(list(masks.values()))
    found = GridCheck(policy, tick_size, int(rows.sum()), len(bars),
                      sum(int(m.sum()) for m in masks.values()))
    if found.off_grid_rows == 0 or policy == "keep":
        return bars, found
    if policy == "error":
        i = int(np.argmax(rows))
        name = next(k for k, m in masks.items() if m[i])
        raise _refusal(found, i, f"{name}={float(cols[name][i])!r}", source)
    return replace(bars, **{k: snap(v, tick_size) for k, v in cols.items()}), found


def check_ticks(ticks: Ticks, tick_size: float, policy: OffGrid,
                source: str) -> tuple[Ticks, GridCheck]:
    """`check_bars` for trades."""
    rows = off_grid_mask(ticks.price, tick_size)
    found = GridCheck(policy, tick_size, int(rows.sum()), len(ticks), int(rows.sum()))
    if found.off_grid_rows == 0 or policy == "keep":
        return ticks, found
    if policy == "error":
        i = int(np.argmax(rows))
        raise _refusal(found, i, f"price={float(ticks.price[i])!r}", source)
    return replace(ticks, price=snap(ticks.price, tick_size)), found


def _refusal(found: GridCheck, i: int, value: str, source: str) -> ValidationError:
    return ValidationError(
        f"{found.off_grid_rows:,} of {found.rows:,} rows have {OFF_GRID} {found.tick_size:g}",
        i + 1, source,
        f"{value}; import with --off-grid snap to round them to the grid, or --off-grid keep "
        "for data that is not exchange-native (spot FX, indices)",
    )
