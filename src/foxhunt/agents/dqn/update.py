"""The whole Rainbow-BDQ learning step, stated once: the reference every fast path is tested
against.

One update on a prioritised n-step batch (Hessel et al. 2018, "Rainbow"), per action branch
(Tavakoli et al. 2018, "Action Branching Architectures"), with a C51 (Bellemare et al. 2017) or
IQN (Dabney et al. 2018) head and double-DQN targets (van Hasselt et al. 2016):

    a*_b     = argmax_a E[Z_online(s', a)]_b                      per branch b
    C51:     m_b  = Phi(r + gamma^m z, p_target(s', a*_b))         projected onto the support
             L_b  = -sum_j m_b,j log p_online(s, a_b)_j            cross-entropy
    IQN:     T_b  = r + gamma^m Z_target(s', a*_b; tau')           N' target samples
             L_b  = sum_i mean_j rho^kappa_tau_i(T_b,j - Z_online(s, a_b; tau_i))
    loss_i   = mean_b L_b                                          the new priority of sample i
    loss     = mean_i w_i loss_i + aux_weight * CE(direction head)  w_i: IS weights

r = sum_k gamma^k r_{t+k} and gamma^m (0 after a termination) come from the replay, which builds
the n-step return at sample time. Noise: the networks compute with whatever noise their noisy
layers hold; IQN's taus are drawn from `generator` in the order target (N'), a* (K = N), online
(N). The optimiser step (Adam on the gradients clipped in total norm) and Polyak's target update
follow the loss and are not part of it.

`training.learner.Learner` runs this math split into pieces, pipelined one batch ahead; its
tests hold it equal to `reference_update` on the first update of a run and bound the pipelining's
one-update lag after that (docs/training.md, "The update").
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from foxhunt.agents.dqn.network import BranchingQNetwork


class UpdateBatch(NamedTuple):
    obs: Tensor  # [B, obs_dim] at s
    action: Tensor  # [B, Br] long, the actions taken
    ret: Tensor  # [B] the n-step discounted return
    discount: Tensor  # [B] gamma^m, 0 when the window ends in a termination
    next_obs: Tensor  # [B, obs_dim] at the bootstrap state s'
    weight: Tensor  # [B] importance-sampling weights
    direction: Tensor  # [B] long: next bar 1 up, 0 down, -1 unknown (masked out)


class UpdateResult(NamedTuple):
    loss: Tensor  # scalar, to backpropagate
    priority: Tensor  # [B] detached per-sample loss: the new replay priorities
    metrics: dict[str, Tensor]  # 0-dim detached: loss, q_loss, aux_loss, mean_q, target_q


def _taken(values: Tensor, action: Tensor) -> Tensor:
    """values [B, Br, A, K] at the actions [B, Br] -> [B, Br, K]."""
    return values.gather(2, action[:, :, None, None].expand(-1, -1, 1, values.shape[-1])).squeeze(2)


@torch.no_grad()
def bootstrap_target(online: BranchingQNetwork, target: BranchingQNetwork, batch: UpdateBatch,
                     generator: torch.Generator | None = None) -> Tensor:
    """Double DQN's target per branch: C51's projected distribution m_b [B, Br, K], or IQN's
    N' samples T_b [B, Br, N']."""
    c, ret, discount = online.config, batch.ret[:, None], batch.discount[:, None]
    if c.head == "c51":
        next_p = target.distributions(batch.next_obs).exp()  # [B, Br, A, K]
    else:
        taus = torch.rand(len(ret), c.iqn_target_taus, generator=generator, device=ret.device)
        next_p = target.distributions(batch.next_obs, taus)  # quantiles [B, Br, A, N']
    a_star = online.q_values(batch.next_obs, generator).argmax(-1)  # [B, Br]
    next_z = _taken(next_p, a_star)  # [B, Br, K or N']
    if c.head == "iqn":
        return ret[:, :, None] + discount[:, :, None] * next_z
    z = online.support  # evenly spaced; an adaptive support has moved its ends
    dz = (z[-1] - z[0]) / (c.atoms - 1)
    b = ((ret + discount * z).clamp(z[0], z[-1]) - z[0]) / dz  # [B, K]
    atoms = torch.arange(c.atoms, device=b.device)
    hat = (1 - (b[:, :, None] - atoms).abs()).clamp(min=0)  # share of atom i landing on j
    return torch.einsum("bri,bij->brj", next_z, hat)


def reference_update(online: BranchingQNetwork, target: BranchingQNetwork, batch: UpdateBatch,
                     generator: torch.Generator | None = None) -> UpdateResult:
    c = online.config
    target_z = bootstrap_target(online, target, batch, generator)
    taus = None
    if c.head == "iqn":
        taus = torch.rand(len(batch.ret), c.iqn_taus, generator=generator, device=batch.ret.device)
    out = online(batch.obs, taus)
    if c.head == "c51":
        log_p = _taken(out.log_probs, batch.action)  # [B, Br, K]
        per_sample = -(target_z * log_p).sum(-1).mean(-1)
        mean_q = (log_p.detach().exp() * online.support).sum(-1).mean()
        target_q = (target_z * online.support).sum(-1).mean()
    else:
        quantiles = _taken(out.quantiles, batch.action)  # [B, Br, N]
        td = target_z[:, :, None, :] - quantiles[:, :, :, None]  # [B, Br, N, N']
        huber = torch.where(td.abs() <= c.kappa, 0.5 * td**2, c.kappa * (td.abs() - 0.5 * c.kappa))
        rho = (out.taus[:, None, :, None] - (td.detach() < 0).float()).abs() * huber / c.kappa
        per_sample = rho.sum(-2).mean(-1).mean(-1)
        mean_q, target_q = quantiles.detach().mean(), target_z.mean()
    q_loss = (batch.weight * per_sample).mean()
    known = (batch.direction >= 0).float()
    ce = F.cross_entropy(out.aux_logits.float(), batch.direction.clamp(min=0), reduction="none")
    aux_loss = (ce * known).sum() / known.sum().clamp(min=1.0)
    loss = q_loss + c.aux_weight * aux_loss
    metrics = {"loss": loss, "q_loss": q_loss, "aux_loss": aux_loss, "mean_q": mean_q,
               "target_q": target_q}
    return UpdateResult(loss, per_sample.detach(), {k: v.detach() for k, v in metrics.items()})
