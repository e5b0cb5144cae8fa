"""The C51 projection of whole distributions, as the tests' reference: the product projects per
sample (`projection_weights` once, then `project_with_weights` for every branch and action)."""

from __future__ import annotations

from torch import Tensor

from foxhunt.agents.dqn.projection import projection_weights


def project_distribution(
    next_probs: Tensor, returns: Tensor, discounts: Tensor, support: Tensor
) -> Tensor:
    """Project p(z) shifted to r + discount * z back onto the evenly spaced `support`.

    next_probs [..., atoms]; returns and discounts broadcast against next_probs[..., 0]
    (e.g. [B] with [B, atoms], or [B, 1] with [B, branches, atoms]); support [atoms].
    Returns [..., atoms], each row summing to the row sum of `next_probs`.
    """
    hat = projection_weights(returns, discounts, support)
    return (next_probs.unsqueeze(-1) * hat).sum(dim=-2)
