"""A position in one instrument: signed contracts and the open lots behind them, in ticks.

Realised PnL is matched first in, first out (as futures clearing does), so every figure is an
integer number of tick-contracts and money is exact: `ticks * tick_value`. Total PnL (realised
plus unrealised) is the same under average-cost matching, which is what `env/fills.py` keeps;
only its split between realised and unrealised differs.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from typing import Any


class Position:
    __slots__ = ("cost_ticks", "lots", "quantity", "realised_ticks", "symbol", "ts_last")

    def __init__(self, symbol: str):
        self.symbol = symbol
        self.quantity = 0  # signed contracts: > 0 long, < 0 short
        self.lots: deque[list[int]] = deque()  # [signed contracts, entry price in ticks]
        self.realised_ticks = 0  # closed PnL in tick-contracts, before commission
        self.cost_ticks = 0  # sum of the open lots' contracts x entry price
        self.ts_last = 0

    @property
    def is_flat(self) -> bool:
        return self.quantity == 0

    @property
    def avg_price_ticks(self) -> Fraction | None:
        """Average entry price of the open contracts, exact; None when flat."""
        if not self.quantity:
            return None
        return Fraction(sum(q * p for q, p in self.lots), self.quantity)

    def fill(self, signed_qty: int, price_ticks: int, ts_ns: int = 0) -> int:
        """Book one fill; returns the tick-contracts it realised (0 when it only adds)."""
        realised = 0
        remaining = signed_qty
        lots = self.lots
        while remaining and lots and (lots[0][0] > 0) != (remaining > 0):
            lot = lots[0]
            take = min(abs(remaining), abs(lot[0]))
            direction = 1 if lot[0] > 0 else -1
            realised += take * (price_ticks - lot[1]) * direction
            lot[0] -= take * direction
            remaining += take * direction
            if lot[0] == 0:
                lots.popleft()
        if remaining:
            lots.append([remaining, price_ticks])
        self.cost_ticks = sum(q * p for q, p in lots)
        self.quantity += signed_qty
        self.realised_ticks += realised
        self.ts_last = ts_ns
        return realised

    def unrealised_ticks(self, mark_ticks: int) -> int:
        """sum over lots of q x (mark - entry), kept as one product: every mark reads it."""
        return self.quantity * mark_ticks - self.cost_ticks

    def snapshot(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "lots": [tuple(lot) for lot in self.lots],
            "realised_ticks": self.realised_ticks,
            "ts_last": self.ts_last,
        }

    def __repr__(self) -> str:
        return f"Position({self.symbol} {self.quantity:+d} avg {self.avg_price_ticks} ticks)"
