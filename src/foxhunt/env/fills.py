"""The fill model: the one place that turns an order into a price, a cost and a position.

The training env, the backtester and the paper broker all fill through these functions, so a
backtest pays exactly what the env charged. Every function is elementwise on tensors of any
shape (float64 prices and contracts), with no host synchronisation.

Rules (docs/domain.md#fills-and-costs):
- A market order decided at the close of bar t fills at the open of bar t+1, `slippage_ticks`
  against the trader. Fractional slippage rounds up to whole ticks (against the trader).
- A trailing stop triggers inside a bar when the low (long) or high (short) touches it and fills
  at the stop price, slippage against the trader. When the bar opens through the stop (a gap),
  it fills at the open, slippage against the trader: a stop order becomes a market order once
  triggered, and the first price available is the open.
- Commission is charged per contract per side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from foxhunt.data.instruments import Instrument


@dataclass(frozen=True)
class CostModel:
    tick_size: float
    point_value: float
    commission: float
    slippage_ticks: float

    @classmethod
    def from_instrument(cls, inst: Instrument, slippage_ticks: float) -> CostModel:
        return cls(inst.tick_size, inst.point_value, inst.commission, slippage_ticks)

    @property
    def slippage_whole_ticks(self) -> int:
        return math.ceil(self.slippage_ticks - 1e-9)

    @property
    def touch_eps(self) -> float:
        """Tolerance when comparing a price with a stop level (both on the tick grid)."""
        return self.tick_size * 1e-6


class Book(NamedTuple):
    """One account per element. Equity at a mark price m is cash + position * m * point_value."""

    position: Tensor  # signed contracts (float64 holding whole numbers)
    avg_price: Tensor  # average fill price of the open position, 0 when flat
    cash: Tensor  # dollars: minus what fills paid, plus what they received, minus commissions


class Fill(NamedTuple):
    book: Book  # the account after the fill
    qty: Tensor  # signed contracts filled (0 = no order)
    price: Tensor  # fill price; meaningless where qty is 0
    cost: Tensor  # commission + slippage against `ref`, dollars (>= 0)
    realised: Tensor  # PnL of the closing part vs the average fill price, before commission
    closed_trade: Tensor  # bool: the fill took the position to flat or through zero


def round_to_tick(price: Tensor, tick_size: float) -> Tensor:
    return torch.round(price / tick_size) * tick_size


def fill_price(ref: Tensor, qty: Tensor, cost: CostModel) -> Tensor:
    """`ref` moved `slippage` whole ticks against the side of `qty`, and nothing else: the price
    is never rounded, so a fill's cost (`execute`) is its slippage and commission alone, >= 0,
    and without costs a fill is at `ref` exactly. Prices on the tick grid (exchange data, stop
    levels) stay on it; prices imported off it (`foxhunt data import --off-grid keep`, e.g. spot
    FX) are filled where they are."""
    return ref + torch.sign(qty) * (cost.slippage_whole_ticks * cost.tick_size)


def commission(qty: Tensor, cost: CostModel) -> Tensor:
    return qty.abs() * cost.commission


def execute(book: Book, qty: Tensor, ref: Tensor, cost: CostModel) -> Fill:
    """Fill `qty` contracts (signed; 0 = nothing) against reference price `ref`.

    `ref` is the market price the order meets (the open, the stop price, the close); the trader
    gets `fill_price`, and the difference plus commission is the fill's cost. A fill that goes
    through zero closes the old position and opens the rest at the fill price.
    """
    pos, avg = book.position, book.avg_price
    price = fill_price(ref, qty, cost)
    new = pos + qty
    reducing = pos * qty < 0
    closing = torch.where(reducing, torch.minimum(qty.abs(), pos.abs()), torch.zeros_like(qty))
    realised = closing * torch.sign(pos) * (price - avg) * cost.point_value
    adding = pos * qty > 0
    blended = (avg * pos.abs() + price * qty.abs()) / new.abs().clamp_min(1.0)
    new_side = torch.sign(new) != torch.sign(pos)
    new_avg = torch.where(adding, blended, torch.where(new_side, price, avg))
    new_avg = torch.where(new == 0, torch.zeros_like(new_avg), new_avg)
    fee = commission(qty, cost)
    cash = book.cash - qty * price * cost.point_value - fee
    slip = qty * (price - ref) * cost.point_value
    closed_trade = reducing & (torch.sign(new) != torch.sign(pos))
    return Fill(Book(new, new_avg, cash), qty, price, slip + fee, realised, closed_trade)


def close_out(position: Tensor, price: Tensor, cost: CostModel) -> Fill:
    """The market order that takes `position` to flat against `price` (e.g. the end of a
    backtest or evaluation window). Only the fill's qty, price, cost and closed_trade are
    meaningful: the book it starts from has no average price or cash."""
    zero = torch.zeros_like(position)
    return execute(Book(position, zero, zero), -position, price, cost)


def stop_level(ref: Tensor, side: Tensor, multiple: Tensor, atr: Tensor, cost: CostModel) -> Tensor:
    """A stop `multiple` ATRs behind `ref` (below a long, above a short), on the tick grid."""
    return round_to_tick(ref - side * multiple * atr, cost.tick_size)


def trail_stop(
    level: Tensor, side: Tensor, close: Tensor, multiple: Tensor, atr: Tensor, cost: CostModel
) -> Tensor:
    """Ratchet a stop towards the close: it only ever moves in the position's favour."""
    candidate = stop_level(close, side, multiple, atr, cost)
    return torch.where(side > 0, torch.maximum(level, candidate), torch.minimum(level, candidate))


def stop_trigger(
    side: Tensor, level: Tensor, open_: Tensor, high: Tensor, low: Tensor, cost: CostModel
) -> tuple[Tensor, Tensor]:
    """(triggered, reference price) of a stop protecting a `side` position during one bar.

    The reference is the stop level, or the open where the bar opened through it (gap). Only
    meaningful where a stop is armed; the caller masks the rest.
    """
    eps = cost.touch_eps
    hit = torch.where(side > 0, low <= level + eps, high >= level - eps) & (side != 0)
    ref = torch.where(side > 0, torch.minimum(open_, level), torch.maximum(open_, level))
    return hit, ref
