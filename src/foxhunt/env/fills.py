"""The fill model: the one place that turns an order into a price, a cost and a position.

The training env, the backtester and the paper broker all fill through these functions, so a
backtest pays exactly what the env charged. Every function is elementwise on tensors of any
shape (float64 prices and contracts), with no host synchronisation, or, with `xp=SCALAR`, on
one account's Python floats: the paper loop's mirror of the env and the simulated venue apply
the same statement of each rule, so they agree with the env to the bit.

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
from types import SimpleNamespace
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


def fill_price(ref: Tensor, qty: Tensor, cost: CostModel, xp=torch) -> Tensor:
    """`ref` moved `slippage` whole ticks against the side of `qty`, and nothing else: the price
    is never rounded, so a fill's cost (`execute`) is its slippage and commission alone, >= 0,
    and without costs a fill is at `ref` exactly. References are on the tick grid (the market's
    prices are `data.grid.tradable`, stop levels are placed on it), so fills stay on it."""
    return ref + xp.sign(qty) * (cost.slippage_whole_ticks * cost.tick_size)


def execute(book: Book, qty: Tensor, ref: Tensor, cost: CostModel, xp=torch) -> Fill:
    """Fill `qty` contracts (signed; 0 = nothing) against reference price `ref`.

    `ref` is the market price the order meets (the open, the stop price, the close); the trader
    gets `fill_price`, and the difference plus commission is the fill's cost. A fill that goes
    through zero closes the old position and opens the rest at the fill price.
    """
    pos, avg = book.position, book.avg_price
    price = fill_price(ref, qty, cost, xp)
    new = pos + qty
    reducing = pos * qty < 0
    closing = xp.where(reducing, xp.minimum(abs(qty), abs(pos)), 0.0)
    realised = closing * xp.sign(pos) * (price - avg) * cost.point_value
    adding = pos * qty > 0
    blended = (avg * abs(pos) + price * abs(qty)) / xp.clamp_min(abs(new), 1.0)
    new_side = xp.sign(new) != xp.sign(pos)
    new_avg = xp.where(new == 0, 0.0, xp.where(adding, blended, xp.where(new_side, price, avg)))
    fee = abs(qty) * cost.commission
    cash = book.cash - qty * price * cost.point_value - fee
    slip = qty * (price - ref) * cost.point_value
    return Fill(Book(new, new_avg, cash), qty, price, slip + fee, realised, reducing & new_side)


def close_out(position: Tensor, price: Tensor, cost: CostModel) -> Fill:
    """The market order that takes `position` to flat against `price` (e.g. the end of a
    backtest or evaluation window). Only the fill's qty, price, cost and closed_trade are
    meaningful: the book it starts from has no average price or cash."""
    zero = torch.zeros_like(position)
    return execute(Book(position, zero, zero), -position, price, cost)


def stop_level(ref: Tensor, side: Tensor, multiple: Tensor, atr: Tensor, cost: CostModel,
               xp=torch) -> Tensor:
    """A stop `multiple` ATRs behind `ref` (below a long, above a short), on the tick grid."""
    return xp.round((ref - side * multiple * atr) / cost.tick_size) * cost.tick_size


def arm_stop(side: Tensor, held: Tensor, mode: Tensor, held_mode: Tensor, held_level: Tensor,
             close: Tensor, multiple: Tensor, atr: Tensor, cost: CostModel, xp=torch
             ) -> tuple[Tensor, Tensor]:
    """(level, armed) of the stop a decision at `close` leaves behind a `side` position: placed
    afresh (`stop_level`) when the side or the stop mode changes from what is `held`, else the
    held stop's trailed level. Armed where there is a position and a stop multiple."""
    rearm = (side != xp.sign(held)) | (mode != held_mode)
    level = xp.where(rearm, stop_level(close, side, multiple, atr, cost, xp), held_level)
    return level, (side != 0) & (multiple > 0)


def trail_stop(
    level: Tensor, side: Tensor, close: Tensor, multiple: Tensor, atr: Tensor, cost: CostModel,
    xp=torch,
) -> Tensor:
    """Ratchet a stop towards the close: it only ever moves in the position's favour."""
    candidate = stop_level(close, side, multiple, atr, cost, xp)
    return xp.where(side > 0, xp.maximum(level, candidate), xp.minimum(level, candidate))


def stop_trigger(
    side: Tensor, level: Tensor, open_: Tensor, high: Tensor, low: Tensor, cost: CostModel,
    xp=torch,
) -> tuple[Tensor, Tensor]:
    """(triggered, reference price) of a stop protecting a `side` position during one bar.

    The reference is the stop level, or the open where the bar opened through it (gap). Only
    meaningful where a stop is armed; the caller masks the rest.
    """
    eps = cost.touch_eps
    hit = xp.where(side > 0, low <= level + eps, high >= level - eps) & (side != 0)
    ref = xp.where(side > 0, xp.minimum(open_, level), xp.maximum(open_, level))
    return hit, ref


def after_bar(armed: Tensor, level: Tensor, side: Tensor, mode: Tensor, held: Tensor,
              pos: Tensor, bars_held: Tensor, close: Tensor, multiple: Tensor, atr: Tensor,
              cost: CostModel, xp=torch) -> tuple[Tensor, Tensor, Tensor]:
    """(bars in the trade, stop mode, stop level) at the close of a step that went from `held`
    to `pos` contracts: the stop trails the close while it still protects a position, and the
    trade's bars count on while the position keeps its side."""
    still = armed & (pos != 0)
    trailed = trail_stop(level, side, close, multiple, atr, cost, xp)
    same_side = (xp.sign(pos) == xp.sign(held)) & (pos != 0)
    return (xp.where(same_side, bars_held + 1, xp.where(pos != 0, 1, 0)),
            xp.where(still, mode, 0), xp.where(still, trailed, 0.0))


def position_state(book: Book, peak: Tensor, time_in_trade: Tensor, mode: Tensor,
                   level: Tensor, close: Tensor, atr: Tensor, per_position: Tensor,
                   cost: CostModel, max_contracts: int, xp=torch) -> tuple:
    """The agent's position features (`env.observation.POS_STATE`) of `book` at `close`, in
    float64 (the caller rounds them to float32); `time_in_trade` already over episode_len and
    `per_position` = reward_scale * max_contracts."""
    pos = book.position
    equity = book.cash + pos * close * cost.point_value
    unrealised = pos * (close - book.avg_price) * cost.point_value
    stop_distance = xp.sign(pos) * (close - level) / atr
    return (pos / max_contracts, unrealised / per_position, time_in_trade,
            (peak - equity) / per_position, mode / 2.0, xp.where(mode > 0, stop_distance, 0.0))


def _sign(x: float) -> float:
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


SCALAR = SimpleNamespace(where=lambda c, a, b: a if c else b, sign=_sign, minimum=min,
                         maximum=max, clamp_min=max, round=round)
"""The few torch functions the rules above call, for Python floats (`xp=SCALAR`): the paper
loop's mirror of the env and the simulated venue apply the rules to one account a bar, where
building tensors would cost more than the arithmetic. IEEE double arithmetic in the same
order gives the same bits; Python's round() rounds half to even, as torch.round does."""
