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
    q: Tensor
    """[B], detached: each sample's taken-action expected Q, mean over branches."""


DIAGNOSTICS = ("q_spread", "is_weight_mean", "is_weight_min", "is_weight_max", "td_p50",
               "td_p99")
"""`batch_diagnostics` of every head: the standard deviation over the batch of the taken
actions' expected Q, the batch's IS weights, and its TD errors' (per-sample losses') median and
99th percentile."""
C51_DIAGNOSTICS = ("edge_mass", "target_edge_mass")
"""C51's probability mass on the support's two end atoms, in the online distributions of the
taken actions and in their projected targets (mean over samples and branches): mass piling
there means values beyond the support, clamped onto it."""


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


def edge_mass(probs: Tensor) -> Tensor:
    """Mean probability on the first and last atom of distributions [..., atoms]."""
    return (probs[..., 0] + probs[..., -1]).float().mean()


@torch.no_grad()
def taken_edge_mass(value: Tensor, adv: Tensor, actions: Tensor) -> Tensor:
    """`edge_mass` of the taken actions' distributions, from the raw dueling streams (value
    [B, K], uncentred adv [B, Br, A, K]) as the network combines them."""
    adv = adv.float()
    logits = value.float()[:, None, :] + take_action(adv, actions) - adv.mean(dim=-2)
    return edge_mass(logits.softmax(dim=-1))


def _finish(
    per_sample: Tensor,
    weights: Tensor,
    aux_logits: Tensor,
    labels: Tensor,
    config: AgentConfig,
    q: Tensor,
    target_q: Tensor,
) -> LossOutput:
    """The loss and its metrics from each sample's loss and taken-action Q [B] (mean over
    branches)."""
    q_loss = (weights * per_sample).mean()
    aux_loss = direction_loss(aux_logits, labels)
    loss = q_loss + config.aux_weight * aux_loss
    q = q.detach().float()
    metrics = {
        "loss": loss.detach(),
        "q_loss": q_loss.detach(),
        "aux_loss": aux_loss.detach(),
        "mean_q": q.mean(),
        "target_q": target_q.detach(),
    }
    return LossOutput(loss, per_sample.detach(), metrics, q)


@torch.no_grad()
def batch_diagnostics(result: LossOutput, out: QOutput, actions: Tensor, target: Tensor,
                      weights: Tensor, head: str) -> dict[str, Tensor]:
    """`DIAGNOSTICS` (C51 also `C51_DIAGNOSTICS`) of one batch's loss terms, 0-dim device
    tensors. Not part of an update: a learner computes them on one batch per epoch."""
    q, w, td = result.q.float(), weights.float(), result.td_abs.float()
    diag = {"q_spread": q.std(correction=0), "is_weight_mean": w.mean(),
            "is_weight_min": w.amin(), "is_weight_max": w.amax(),
            "td_p50": td.quantile(0.5), "td_p99": td.quantile(0.99)}
    if head == "c51":
        diag["target_edge_mass"] = edge_mass(target)
        diag["edge_mass"] = (taken_edge_mass(out.value, out.adv, actions)
                             if out.value is not None
                             else edge_mass(take_action(out.log_probs, actions).exp()))
    return diag


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
        return _finish(per_sample, weights, out.aux_logits, direction_labels, config, q,
                       target_q.mean())
    target_q = (target_p * support).sum(dim=-1).mean()
    log_p = take_action(out.log_probs, actions)
    per_sample = -(target_p * log_p).sum(dim=-1).mean(dim=-1)
    q = (log_p.detach().exp() * support).sum(dim=-1).mean(dim=-1)
    return _finish(per_sample, weights, out.aux_logits, direction_labels, config, q, target_q)


SUPPORT_QUANTILES = (0.01, 0.99)
"""The percentiles of the bootstrap targets' values that an adaptive support covers: the
extremes of one batch are single samples, these move with the bulk of the tail."""
SUPPORT_RATE = 0.01
"""Share of the way each end of an adaptive support moves toward its goal per update: a time
constant of 100 updates, slow beside the batch-to-batch noise of the percentiles and beside the
learning rate, so the atoms' meaning drifts little between the update that stages a target and
the one that trains on it."""
SUPPORT_MARGIN = 0.1
"""Room beyond the covered percentiles, as a share of the support's current width: the EMA
approaches its goal only asymptotically, and the goal lies this far beyond the values."""
SUPPORT_MAX_WIDEN = 4.0
"""An adaptive end moves at most this many configured widths beyond the configured end: a
diverging value estimate then piles mass at the support's edge (which the health checks name)
instead of carrying the support away with it."""


@torch.no_grad()
def target_value_bounds(next_log_probs: Tensor, returns: Tensor, discounts: Tensor,
                        support: Tensor) -> Tensor:
    """[2] float32: the `SUPPORT_QUANTILES` over samples and branches of the bootstrap targets'
    values r + gamma^m E[Z_target(s', a*)], before projection clamps them to the support;
    next_log_probs [B, Br, K] (a*'s rows), returns and discounts [B]."""
    q = (next_log_probs.float().exp() * support).sum(dim=-1)
    values = (returns.float()[:, None] + discounts.float()[:, None] * q).flatten().sort().values
    last = values.numel() - 1
    return torch.stack([values[int(p * last)] for p in SUPPORT_QUANTILES])


def support_limits(config: AgentConfig, device: torch.device | str | None = None) -> Tensor:
    """[2, 2]: the innermost ends (the configured [v_min, v_max]) and the outermost ends
    (`SUPPORT_MAX_WIDEN`) an adaptive support may take."""
    widen = SUPPORT_MAX_WIDEN * (config.v_max - config.v_min)
    return torch.tensor([[config.v_min, config.v_max],
                         [config.v_min - widen, config.v_max + widen]], device=device)


@torch.no_grad()
def adapt_support(support: Tensor, bounds: Tensor, limits: Tensor) -> None:
    """One EMA step of an adaptive C51 support, in place (a CUDA graph keeps reading it): each
    end moves `SUPPORT_RATE` of the way toward the seen `bounds` [2] (`target_value_bounds`)
    widened by `SUPPORT_MARGIN` of the current width, held between `limits` (`support_limits`),
    and the atoms stay evenly spaced between the ends. An end that would move inside the
    configured support stays there, so targets within it leave the support bit for bit as it
    was."""
    ends = torch.stack((support[0], support[-1]))
    margin = SUPPORT_MARGIN * (ends[1] - ends[0])
    goal = torch.stack((bounds[0] - margin, bounds[1] + margin))
    moved = torch.lerp(ends, goal, SUPPORT_RATE)
    moved = torch.stack((moved[0].clamp(limits[1, 0], limits[0, 0]),
                         moved[1].clamp(limits[0, 1], limits[1, 1])))
    steps = torch.linspace(0.0, 1.0, support.shape[0], device=support.device)
    spaced = torch.lerp(moved[0].expand_as(support), moved[1].expand_as(support), steps)
    support.copy_(torch.where((moved == ends).all(), support, spaced))


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
        quantiles.detach().mean(dim=(-2, -1)),
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
