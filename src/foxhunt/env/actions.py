"""Factored actions (docs/domain.md#actions): 3 branches x 3 choices, index 0 of each the safe
default.

Branch 0 direction {flat, long, short}; branch 1 size {size_fractions} of max_contracts;
branch 2 trailing stop {off, tight, wide}. Action (0, 0, 0) is flat. Flat ignores size and stop.

Contracts for a size choice are fraction * max_contracts rounded to the nearest whole contract
(halves up), at least 1: with max_contracts = 3 the sizes are 1, 2, 3; with 5 they are 2, 3, 5;
with 1 every size is 1 contract. Rounding (not ceil) keeps fractions written as 0.333/0.667 in
a TOML file meaning 1 and 2 of 3.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from foxhunt.env.config import EnvConfig

N_BRANCHES = 3
N_CHOICES = 3
N_ACTIONS = N_CHOICES**N_BRANCHES

FLAT, LONG, SHORT = 0, 1, 2
STOP_OFF, STOP_TIGHT, STOP_WIDE = 0, 1, 2


def contracts_for(config: EnvConfig) -> list[int]:
    m = config.max_contracts
    return [min(m, max(1, math.floor(f * m + 0.5))) for f in config.size_fractions]


class ActionTable:
    """Device-side lookup tables that turn an action [N, 3] into a target position and stop."""

    def __init__(self, config: EnvConfig, device: torch.device | str | None = None):
        f64 = {"dtype": torch.float64, "device": device}
        self.direction = torch.tensor([0.0, 1.0, -1.0], **f64)
        self.contracts = torch.tensor(contracts_for(config), **f64)
        self.stop_multiple = torch.tensor([0.0, *config.stop_atr_multiples], **f64)

    def decode(self, action: Tensor) -> tuple[Tensor, Tensor]:
        """(target signed contracts float64 [N], stop mode long [N]; 0 where flat or stop off)."""
        direction, size, stop = action.long().unbind(-1)
        side = self.direction[direction]
        target = side * self.contracts[size]
        stop_on = (side != 0) & (self.stop_multiple[stop] > 0)
        return target, torch.where(stop_on, stop, torch.zeros_like(stop))


def flatten_actions(action: Tensor) -> Tensor:
    """[..., 3] branch choices -> [...] index in 0..26 (direction * 9 + size * 3 + stop)."""
    return (action[..., 0] * N_CHOICES + action[..., 1]) * N_CHOICES + action[..., 2]


def unflatten_actions(index: Tensor) -> Tensor:
    """[...] index in 0..26 -> [..., 3] branch choices; inverse of `flatten_actions`."""
    index = index.long()
    return torch.stack(
        (index // (N_CHOICES * N_CHOICES), (index // N_CHOICES) % N_CHOICES, index % N_CHOICES),
        dim=-1,
    )
