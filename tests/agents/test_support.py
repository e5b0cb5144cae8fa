"""The adaptive C51 support: it widens to cover bootstrap targets beyond it within a known
number of updates, and leaves a support that covers them as it was, bit for bit."""

from __future__ import annotations

import math

import pydantic
import pytest
import torch

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.agents.dqn.losses import (
    SUPPORT_MARGIN,
    SUPPORT_MAX_WIDEN,
    SUPPORT_RATE,
    adapt_support,
    support_limits,
    target_value_bounds,
)

CFG = AgentConfig(atoms=11, v_min=-1.0, v_max=1.0, support="adaptive")


def support() -> torch.Tensor:
    return torch.linspace(CFG.v_min, CFG.v_max, CFG.atoms)


def targets(returns: torch.Tensor, discount: float = 0.0) -> torch.Tensor:
    """`target_value_bounds` of a batch of n-step returns over uniform next distributions."""
    next_log_p = torch.full((len(returns), 3, CFG.atoms), -math.log(CFG.atoms))
    return target_value_bounds(next_log_p, returns, torch.full_like(returns, discount), support())


def updates_to_cover(goal: float) -> int:
    """Updates until the upper end, moving SUPPORT_RATE of the way toward goal plus the margin of
    the configured width each update, reaches goal (its margin only grows as the support
    widens, so this bounds the count from above)."""
    margin = SUPPORT_MARGIN * (CFG.v_max - CFG.v_min)
    gap = goal + margin - CFG.v_max
    return math.ceil(math.log(margin / gap) / math.log(1 - SUPPORT_RATE))


def test_the_bounds_are_percentiles_of_the_targets_values_before_clamping():
    returns = torch.linspace(-5.0, 5.0, 101)
    torch.testing.assert_close(targets(returns), torch.tensor([-5.0, 5.0]) * 0.98)
    # with a discount, r + gamma^m E[Z]: the uniform distribution's mean is 0
    torch.testing.assert_close(targets(returns, discount=0.9), torch.tensor([-4.9, 4.9]))


def test_returns_beyond_the_support_are_covered_within_a_known_number_of_updates():
    z, limits = support(), support_limits(CFG)
    seen = targets(torch.full((64,), 3.0))
    n = updates_to_cover(3.0)
    for k in range(n):
        adapt_support(z, seen, limits)
        if k < n // 4:
            assert z[-1] < 3.0
    assert z[-1] >= 3.0 and z[0] == CFG.v_min  # the low end had no reason to move
    torch.testing.assert_close(z, torch.linspace(z[0].item(), z[-1].item(), CFG.atoms))


def test_returns_inside_the_support_leave_it_as_it_was():
    z, limits = support(), support_limits(CFG)
    seen = targets(torch.linspace(-0.5, 0.5, 64))
    for _ in range(500):
        adapt_support(z, seen, limits)
    assert torch.equal(z, support())


def test_the_support_widens_at_most_max_widen_configured_widths():
    z, limits = support(), support_limits(CFG)
    seen = targets(torch.linspace(-1e6, 1e6, 64))
    for _ in range(2_000):
        adapt_support(z, seen, limits)
    widen = SUPPORT_MAX_WIDEN * (CFG.v_max - CFG.v_min)
    torch.testing.assert_close(z[[0, -1]], torch.tensor([CFG.v_min - widen, CFG.v_max + widen]))


def test_an_adaptive_support_needs_a_c51_head():
    with pytest.raises(pydantic.ValidationError, match="needs head"):
        AgentConfig(head="iqn", support="adaptive")
