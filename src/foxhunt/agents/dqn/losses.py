"""The pieces of the update (`update.reference_update` states it whole) as the learner runs them.

The bootstrap target and the loss at s are separate steps here so that a learner can compute
the next batch's target ahead of time and beside the current loss pass: `greedy_next_actions`
(online net at s'), `target_distributions` (target net at s'), `take_action` (a*'s rows), the
head's bootstrap target (`HEADS`: `target_operands` then `targets`), and then `online_pass`
(online net at s) and the head's loss terms (`c51_terms`, `iqn_terms`).

Every piece returns device tensors with static shapes and never synchronises with the host, so
a learner can capture it in a CUDA graph. Noise: the pieces use whatever noise the networks'
buffers hold; the learner draws it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from foxhunt.agents.dqn.c51_kernel import c51_taken_loss
from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.agents.dqn.network import BranchingQNetwork, QOutput
from foxhunt.agents.dqn.projection import project_with_weights, projection_weights


class LossOutput(NamedTuple):
    loss: Tensor
    """Scalar to backpropagate: IS-weighted Q loss + aux_weight * direction loss."""
    td_abs: Tensor
    """[B], detached, non-negative: the per-sample Q loss, for new replay priorities."""
    metrics: dict[str, Tensor]
    """0-dim detached device tensors: loss, q_loss, aux_loss, mean_q, target_q."""


def take_action(values: Tensor, actions: Tensor) -> Tensor:
    """values [B, Br, A, K], actions [B, Br] -> the chosen action's row per branch, [B, Br, K]."""
    index = actions[:, :, None, None].expand(-1, -1, 1, values.shape[-1])
    return values.gather(2, index).squeeze(2)


def online_pass(online: BranchingQNetwork, obs: Tensor, config: AgentConfig,
                generator: torch.Generator | None = None) -> QOutput:
    """The online network at s, with grad (IQN: at N = iqn_taus fresh taus from `generator`)."""
    taus = None
    if config.head == "iqn":
        taus = online.sample_taus(obs.shape[0], config.iqn_taus, obs, generator)
    return online(obs, taus)


@torch.no_grad()
def greedy_next_actions(online: BranchingQNetwork, next_obs: Tensor,
                        generator: torch.Generator | None = None) -> Tensor:
    """Double DQN's a* = argmax_a E[Z_online(s', a)] in each branch, [B, Br] long."""
    return online.q_values(next_obs, generator).argmax(dim=-1)


@torch.no_grad()
def target_distributions(target: BranchingQNetwork, next_obs: Tensor, config: AgentConfig,
                         generator: torch.Generator | None = None) -> Tensor:
    """Z_target(s', a) for every branch and action, [B, Br, A, K]: C51 log-probabilities, or
    IQN quantiles at N' = iqn_target_taus fresh taus from `generator`."""
    taus = None
    if config.head == "iqn":
        taus = target.sample_taus(next_obs.shape[0], config.iqn_target_taus, next_obs, generator)
    return target.distributions(next_obs, taus)


def direction_loss(aux_logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of the next-bar direction over rows labelled 0/1; rows labelled -1 are
    masked out by multiplication (static shapes), and a batch with no label gives 0."""
    mask = (labels >= 0).to(torch.float32)
    ce = F.cross_entropy(aux_logits.float(), labels.clamp(min=0), reduction="none")
    return (ce * mask).sum() / mask.sum().clamp(min=1.0)


def _finish(
    per_sample: Tensor,
    weights: Tensor,
    aux_logits: Tensor,
    labels: Tensor,
    config: AgentConfig,
    mean_q: Tensor,
    target_q: Tensor,
) -> LossOutput:
    q_loss = (weights * per_sample).mean()
    aux_loss = direction_loss(aux_logits, labels)
    loss = q_loss + config.aux_weight * aux_loss
    metrics = {
        "loss": loss.detach(),
        "q_loss": q_loss.detach(),
        "aux_loss": aux_loss.detach(),
        "mean_q": mean_q.detach(),
        "target_q": target_q.detach(),
    }
    return LossOutput(loss, per_sample.detach(), metrics)


@torch.no_grad()
def c51_target_operands(
    next_dist: Tensor, returns: Tensor, discounts: Tensor, support: Tensor
) -> tuple[Tensor, Tensor]:
    """(next probabilities float32 [B, ..., atoms], each sample's projection weights
    [B, atoms, atoms]) for `c51_targets`; next_dist [B, ..., atoms] are the target network's
    log-probs (a*'s rows [B, Br, atoms] for double DQN), returns and discounts [B]."""
    return next_dist.float().exp(), projection_weights(returns, discounts, support)


@torch.no_grad()
def c51_targets(next_probs: Tensor, hat: Tensor) -> Tensor:
    """The next distributions shifted to r + discount * z and projected onto the support,
    float32 [B, ..., atoms], from `c51_target_operands`."""
    return project_with_weights(next_probs, hat)


def c51_terms(
    out: QOutput,
    actions: Tensor,
    target_p: Tensor,
    weights: Tensor,
    direction_labels: Tensor,
    config: AgentConfig,
    support: Tensor,
) -> LossOutput:
    """Cross-entropy of the projected target against the online distribution of the taken
    action, averaged over branches; as in Rainbow (Hessel et al. 2018) that per-sample loss is
    also the new priority. With dueling streams it is computed from their raw outputs by
    `c51_kernel.c51_taken_loss` (one Triton kernel each way where Triton runs, its torch
    reference elsewhere)."""
    if out.value is not None:
        per_sample, q, target_q = c51_taken_loss(out.value, out.adv, actions, target_p, support)
        return _finish(per_sample, weights, out.aux_logits, direction_labels, config, q.mean(),
                       target_q.mean())
    target_q = (target_p * support).sum(dim=-1).mean()
    log_p = take_action(out.log_probs, actions)
    per_sample = -(target_p * log_p).sum(dim=-1).mean(dim=-1)
    mean_q = (log_p.detach().exp() * support).sum(dim=-1).mean()
    return _finish(per_sample, weights, out.aux_logits, direction_labels, config, mean_q, target_q)


def quantile_huber(td: Tensor, taus: Tensor, kappa: float) -> Tensor:
    """Elementwise rho^kappa_tau(td) = |tau - 1{td < 0}| * Huber_kappa(td) / kappa (IQN eq. 10)."""
    abs_td = td.abs()
    huber = torch.where(abs_td <= kappa, 0.5 * td.square(), kappa * (abs_td - 0.5 * kappa))
    return (taus - (td.detach() < 0).to(td.dtype)).abs() * huber / kappa


@torch.no_grad()
def iqn_target_operands(
    next_dist: Tensor, returns: Tensor, discounts: Tensor, support: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """(quantiles float32 [B, ..., N'], returns, discounts) for `iqn_targets`; next_dist are the
    target network's quantiles (a*'s rows [B, Br, N'] for double DQN) at its N' taus, returns
    and discounts [B] (`support` is unused: the signature matches `c51_target_operands`)."""
    return next_dist.float(), returns, discounts


@torch.no_grad()
def iqn_targets(quantiles: Tensor, returns: Tensor, discounts: Tensor) -> Tensor:
    """r + discount * Z_target(s', a), float32 [B, ..., N'], from `iqn_target_operands`."""
    per_sample = (-1,) + (1,) * (quantiles.dim() - 1)
    return returns.view(per_sample) + discounts.view(per_sample) * quantiles


def iqn_terms(
    out: QOutput,
    actions: Tensor,
    target_q: Tensor,
    weights: Tensor,
    direction_labels: Tensor,
    config: AgentConfig,
    support: Tensor | None = None,
) -> LossOutput:
    """N online quantiles against the N' target samples: the quantile Huber loss summed over N,
    averaged over N' (Dabney et al. 2018) and then over branches, per sample."""
    quantiles = take_action(out.quantiles, actions)
    td = target_q.unsqueeze(-2) - quantiles.unsqueeze(-1)
    rho = quantile_huber(td, out.taus[:, None, :, None], config.kappa)
    per_sample = rho.sum(dim=-2).mean(dim=-1).mean(dim=-1)
    return _finish(
        per_sample,
        weights,
        out.aux_logits,
        direction_labels,
        config,
        quantiles.detach().mean(),
        target_q.mean(),
    )


class Head(NamedTuple):
    """A distributional head's loss pieces. The bootstrap target is two steps so that a trainer
    can compile them apart: `target_operands` with the batch, `targets` on its stored results
    (compiled as one graph, inductor fused C51's exp and projection weights into the
    projection's reduction and recomputed them for every output atom: 2-3x the time, on SMs
    the update's own kernels need)."""

    target_operands: Callable[..., tuple[Tensor, ...]]
    """(next distributions of the chosen actions [B, ..., K], returns [B], discounts [B],
    support or None) -> operands of `targets`"""
    targets: Callable[..., Tensor]
    """operands -> bootstrap target [B, ..., K] float32"""
    terms: Callable[..., LossOutput]
    """(online pass, taken actions, target, IS weights, direction labels, config, support)"""


HEADS = {
    "c51": Head(c51_target_operands, c51_targets, c51_terms),
    "iqn": Head(iqn_target_operands, iqn_targets, iqn_terms),
}
