"""Training losses of the branching agent, one function per distributional head.

Both return the IS-weighted loss, per-sample priorities and device-side metrics, with no host
synchronisation and only static shapes, so a trainer can capture a whole update in a CUDA graph.
Noise: the trainer calls `reset_noise()` on the online and the target network before every
update (Rainbow resamples both); these functions use whatever noise the buffers hold.
Targets use double DQN per branch (van Hasselt et al. 2016, "Deep RL with Double Q-learning"):
the online network picks a* = argmax_a E[Z(s', a)] in each branch, the target network values it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.agents.dqn.network import BranchingQNetwork
from foxhunt.agents.dqn.projection import project_distribution


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


@torch.no_grad()
def double_dqn_next(
    online: BranchingQNetwork, target: BranchingQNetwork, next_obs: Tensor, taus: Tensor | None = None
) -> Tensor:
    """The target network's distribution of a* = argmax_a E[Z_online(s', a)] in each branch,
    [B, Br, K] float32 (C51: log-probabilities; IQN: quantiles at `taus`)."""
    next_actions = online.q_values(next_obs).argmax(dim=-1)
    return take_action(target.distributions(next_obs, taus), next_actions).float()


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


def c51_loss(
    online: BranchingQNetwork,
    target: BranchingQNetwork,
    obs: Tensor,
    actions: Tensor,
    returns: Tensor,
    discounts: Tensor,
    next_obs: Tensor,
    weights: Tensor,
    direction_labels: Tensor,
    config: AgentConfig,
) -> LossOutput:
    """Categorical (C51) double-DQN loss, per branch.

    obs/next_obs [B, obs_dim]; actions [B, Br] long; returns [B] (n-step discounted sum);
    discounts [B] (gamma^k, 0 after a termination); weights [B] IS weights; direction_labels [B]
    long in {0, 1, -1 = unknown}. The target distribution of a* is shifted to r + discount * z and
    projected onto the support; the per-sample loss is its cross-entropy against the online
    distribution of the taken action, averaged over branches. As in Rainbow (Hessel et al. 2018)
    that same per-sample loss is the new priority.
    """
    out = online(obs)
    log_p = take_action(out.log_probs, actions)
    with torch.no_grad():
        next_p = double_dqn_next(online, target, next_obs).exp()
        target_p = project_distribution(
            next_p, returns[:, None], discounts[:, None], online.support
        )
    per_sample = -(target_p * log_p).sum(dim=-1).mean(dim=-1)
    mean_q = (log_p.detach().exp() * online.support).sum(dim=-1).mean()
    target_q = (target_p * online.support).sum(dim=-1).mean()
    return _finish(per_sample, weights, out.aux_logits, direction_labels, config, mean_q, target_q)


def quantile_huber(td: Tensor, taus: Tensor, kappa: float) -> Tensor:
    """Elementwise rho^kappa_tau(td) = |tau - 1{td < 0}| * Huber_kappa(td) / kappa (IQN eq. 10)."""
    abs_td = td.abs()
    huber = torch.where(abs_td <= kappa, 0.5 * td.square(), kappa * (abs_td - 0.5 * kappa))
    return (taus - (td.detach() < 0).to(td.dtype)).abs() * huber / kappa


def iqn_loss(
    online: BranchingQNetwork,
    target: BranchingQNetwork,
    obs: Tensor,
    actions: Tensor,
    returns: Tensor,
    discounts: Tensor,
    next_obs: Tensor,
    weights: Tensor,
    direction_labels: Tensor,
    config: AgentConfig,
) -> LossOutput:
    """Implicit-quantile (IQN) double-DQN loss, per branch; arguments as in `c51_loss`.

    N = iqn_taus online quantiles against N' = iqn_target_taus target samples
    r + discount * Z_target(s', a*); the quantile Huber loss is summed over N, averaged over N'
    (Dabney et al. 2018) and then averaged over branches to give the per-sample loss and priority.
    """
    batch = obs.shape[0]
    out = online(obs, online.sample_taus(batch, config.iqn_taus, obs))
    quantiles = take_action(out.quantiles, actions)
    with torch.no_grad():
        next_taus = target.sample_taus(batch, config.iqn_target_taus, next_obs)
        next_q = double_dqn_next(online, target, next_obs, next_taus)
        target_q = returns[:, None, None] + discounts[:, None, None] * next_q
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
