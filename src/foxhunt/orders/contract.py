"""A contract's prices and money in exact arithmetic: prices as integer ticks, money as Decimal.

`Instrument` (data layer) holds the spec as floats, as read from TOML; `Contract` turns it into
exact numbers once. Decimals come from the floats' shortest repr ("0.00005", "15.625"), so a
tick size or point value written in a file is the decimal the user wrote.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from functools import lru_cache

from foxhunt.data.instruments import Instrument
from foxhunt.orders.errors import OrderRequestError

Price = Decimal | int | float | str


def to_decimal(value: Price) -> Decimal:
    """Exact decimal of a price or amount; a float goes through its shortest repr."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    try:
        return Decimal(value)
    except (InvalidOperation, TypeError):
        raise OrderRequestError(f"not a number: {value!r}") from None


def money_text(amount: Decimal) -> str:
    """Money as every output shows it: exact, with at least two decimals (3270.00, 97705.00,
    and 15.625 for a ZN tick, which has three)."""
    exact = amount.normalize()
    if exact.as_tuple().exponent > -2:
        exact = amount.quantize(Decimal("0.01"))
    return f"{exact:f}"


@dataclass(frozen=True, slots=True)
class Contract:
    """Exact view of an instrument: tick grid, money per tick, commission per contract per side."""

    symbol: str
    tick_size: Decimal
    point_value: Decimal
    commission: Decimal
    currency: str = "USD"

    @classmethod
    def from_instrument(cls, inst: Instrument) -> Contract:
        return cls(
            inst.symbol,
            to_decimal(inst.tick_size),
            to_decimal(inst.point_value),
            to_decimal(inst.commission),
            inst.currency,
        )

    @property
    def tick_value(self) -> Decimal:
        """Money one contract gains or loses when the price moves one tick."""
        return self.tick_size * self.point_value

    def to_ticks(self, price: Price) -> int:
        """The nearest tick (ties to even): every price that reaches an order goes through it."""
        if type(price) is float and math.isfinite(price):
            return _float_ticks(price, self.tick_size)
        d = to_decimal(price)
        if not d.is_finite():
            raise OrderRequestError(f"{self.symbol}: price {price!r} is not finite")
        return _nearest_tick(d, self.tick_size)

    def ticks_exact(self, price: Price) -> int:
        """Ticks of a price that must already be on the grid (a fill, a mark from the venue)."""
        ticks = self.to_ticks(price)
        if ticks * self.tick_size != to_decimal(price):
            raise OrderRequestError(
                f"{self.symbol}: price {price} is off the {self.tick_size} tick grid"
            )
        return ticks

    def price(self, ticks: int) -> Decimal:
        return ticks * self.tick_size

    def price_float(self, ticks: int) -> float:
        """float(price(ticks)), remembered: the venue compares every bar with its stops in
        floats, as the env does."""
        return _tick_price(ticks, self.tick_size)

    def money(self, ticks: int) -> Decimal:
        """Money of `ticks` price ticks on one contract (a PnL or a notional)."""
        return ticks * self.tick_value

    def commission_for(self, quantity: int) -> Decimal:
        return abs(quantity) * self.commission



@lru_cache(maxsize=1 << 16)
def _float_ticks(price: float, tick_size: Decimal) -> int:
    """`Contract.to_ticks` of a finite float, remembered: a market's bars repeat a few thousand
    prices, and the decimal conversion costs ~2 us each time."""
    return _nearest_tick(Decimal(repr(price)), tick_size)


@lru_cache(maxsize=1 << 16)
def _tick_price(ticks: int, tick_size: Decimal) -> float:
    return float(ticks * tick_size)


def _nearest_tick(d: Decimal, tick_size: Decimal) -> int:
    return int((d / tick_size).to_integral_value(rounding=ROUND_HALF_EVEN))
