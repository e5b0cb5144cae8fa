"""A rule strategy's actions bar by bar: the newest row of its table in O(1) a bar.

`TablePolicy.table(close)` is the definition (backtest and paper read it); live trading grows
the closes one bar at a time, and recomputing the whole table at every bar costs O(t), growing
through a session. A `RuleRows` keeps what the table's newest row needs (running sums, the
side a tie or a hysteresis band keeps) and computes row t from close t alone, bit for bit the
batch table's row: the same IEEE double operations in the same order (a running sum extended
one bar at a time adds as `np.cumsum` does), for every built-in rule. A rule it does not know
falls back to the batch table over the closes so far (correct, O(t)).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
import torch

from foxhunt.backtest.strategies import (
    SMA_TIE_TOLERANCE,
    BuyAndHold,
    Flat,
    RandomActions,
    SmaCross,
    TablePolicy,
    ZScoreFade,
)

Row = tuple[int, int, int]


class RuleRows(ABC):
    """Row t of a rule's table from the closes up to t: `push(close)` for every bar in order
    (bar 0 first), each returning the new row; `row(t)` reads any row pushed so far."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def push(self, close: float) -> Row:
        row = self._next(float(close))
        self.rows.append(row)
        return row

    def row(self, t: int) -> Row:
        return self.rows[t]

    def __len__(self) -> int:
        return len(self.rows)

    @abstractmethod
    def _next(self, close: float) -> Row:
        """Row t from close t and what the earlier rows left."""


def _side_row(side: int, size: int) -> Row:
    """`sides_table`'s row: direction 1 long, 2 short, 0 flat; `size` when not flat."""
    return (0, 0, 0) if side == 0 else (1 if side > 0 else 2, size, 0)


class _Constant(RuleRows):
    def __init__(self, row: Row):
        super().__init__()
        self._row = row

    def _next(self, close: float) -> Row:
        return self._row


class _SmaRows(RuleRows):
    """`SmaCross.sides`: prefix sums of close - close[0], the means' gap against the tie
    tolerance, a tie keeping the last side decided from bar `slow` on."""

    def __init__(self, rule: SmaCross):
        super().__init__()
        self.rule = rule
        self._c = [0.0]
        self._first = 0.0
        self._last = 0

    def _next(self, close: float) -> Row:
        r, c, t = self.rule, self._c, len(self.rows)
        if t == 0:
            self._first = close
        c.append(c[-1] + (close - self._first))
        if t < r.slow:
            return (0, 0, 0)
        top = c[t + 1]
        gap = (top - c[t + 1 - r.fast]) / r.fast - (top - c[t + 1 - r.slow]) / r.slow
        tol = SMA_TIE_TOLERANCE * max(abs(close), 1.0)
        side = (gap > tol) - (gap < -tol)
        if side:
            self._last = side
        else:
            side = self._last
        return _side_row(max(side, 0) if r.long_flat else side, r.size)


class _ZFadeRows(RuleRows):
    """`ZScoreFade.zscores` from running sums of x and x^2 (x = close - close[0]), then
    `fade_sides`' two latches: short from z > entry until z <= exit, long from z < -entry until
    z >= -exit (NaN: neither moves)."""

    def __init__(self, rule: ZScoreFade):
        super().__init__()
        self.rule = rule
        self._c1, self._c2 = [0.0], [0.0]
        self._first = 0.0
        self._short = self._long = False

    def _z(self, close: float, t: int) -> float:
        k, c1, c2 = self.rule.lookback, self._c1, self._c2
        x = close - self._first
        c1.append(c1[-1] + x)
        c2.append(c2[-1] + x * x)
        if t < k - 1:
            return math.nan
        mean = (c1[t + 1] - c1[t + 1 - k]) / k
        var = max((c2[t + 1] - c2[t + 1 - k]) / k - mean * mean, 0.0) * k / (k - 1)
        sd = math.sqrt(var)
        if not sd > SMA_TIE_TOLERANCE * max(abs(close), 1.0):
            return math.nan
        return (x - mean) / sd

    def _next(self, close: float) -> Row:
        t = len(self.rows)
        if t == 0:
            self._first = close
        z = self._z(close, t)
        r = self.rule
        if z > r.entry:
            self._short = True
        elif z <= r.exit:
            self._short = False
        if z < -r.entry:
            self._long = True
        elif z >= -r.exit:
            self._long = False
        return _side_row(int(self._long) - int(self._short), r.size)


class _RandomRows(RuleRows):
    """`RandomActions.table` is one draw for the whole series, and a longer draw from the same
    seed begins with a shorter one's rows: drawn ahead, twice as long each time it runs out."""

    def __init__(self, rule: RandomActions):
        super().__init__()
        self.rule = rule
        self._table = np.zeros((0, 3), np.uint8)

    def _next(self, close: float) -> Row:
        t = len(self.rows)
        if t >= len(self._table):
            g = torch.Generator().manual_seed(self.rule.seed)
            n = max(1024, 2 * len(self._table))
            self._table = torch.randint(0, 3, (n, 3), generator=g, dtype=torch.uint8).numpy()
        a = self._table[t]
        return int(a[0]), int(a[1]), int(a[2])


class _BatchRows(RuleRows):
    """Any other rule: its batch table over the closes so far, read at the newest bar."""

    def __init__(self, rule: TablePolicy):
        super().__init__()
        self.rule = rule
        self._close: list[float] = []

    def _next(self, close: float) -> Row:
        self._close.append(close)
        a = self.rule.table(np.asarray(self._close, np.float64))[-1]
        return int(a[0]), int(a[1]), int(a[2])


def rule_rows(rule: TablePolicy) -> RuleRows:
    """The incremental rows of `rule`: O(1) a bar for the built-in rules."""
    kind = type(rule)  # exact: a subclass may define its table otherwise
    if kind is Flat:
        return _Constant((0, 0, 0))
    if kind is BuyAndHold:
        return _Constant((1, rule.size, 0))
    if kind is SmaCross:
        return _SmaRows(rule)
    if kind is ZScoreFade:
        return _ZFadeRows(rule)
    if kind is RandomActions:
        return _RandomRows(rule)
    return _BatchRows(rule)
