"""Fractional-Kelly sizing: an optional helper for an agent's size choice.

Full Kelly maximises the expected log growth of equity and is far too aggressive when its
inputs are estimates; a fraction (a half, a quarter) keeps most of the growth with much less
drawdown. These helpers never place orders: the risk limits still apply to what they suggest.
"""

from __future__ import annotations

import math


def kelly_fraction(mean: float, variance: float) -> float:
    """Continuous Kelly: the fraction of equity to hold as exposure, mean / variance of the
    per-period return of one unit of exposure. 0 when the variance is not positive."""
    if not (math.isfinite(mean) and math.isfinite(variance)) or variance <= 0:
        return 0.0
    return mean / variance


def kelly_fraction_binary(win_probability: float, win_loss_ratio: float) -> float:
    """Discrete Kelly for a bet won with probability p paying b per unit risked: p - (1-p)/b.
    Negative means the bet has no edge (do not take it)."""
    if not 0.0 <= win_probability <= 1.0:
        raise ValueError(f"win probability must be in [0, 1], got {win_probability}")
    if win_loss_ratio <= 0:
        raise ValueError(f"win/loss ratio must be > 0, got {win_loss_ratio}")
    return win_probability - (1.0 - win_probability) / win_loss_ratio


def kelly_contracts(
    equity: float,
    contract_notional: float,
    mean: float,
    variance: float,
    fraction: float = 0.5,
    max_contracts: int | None = None,
) -> int:
    """Signed whole contracts for `fraction` of continuous Kelly, rounded towards zero.

    `mean` and `variance` are of one contract's per-period simple return (price return);
    `contract_notional` is price x point value; `max_contracts` caps the size either way.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"Kelly fraction must be in (0, 1], got {fraction}")
    if equity <= 0 or contract_notional <= 0:
        return 0
    exposure = fraction * kelly_fraction(mean, variance) * equity
    contracts = int(exposure / contract_notional)  # towards zero: never rounds size up
    if max_contracts is not None:
        contracts = max(-max_contracts, min(max_contracts, contracts))
    return contracts
