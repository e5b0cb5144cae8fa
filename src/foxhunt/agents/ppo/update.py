"""PPO's learning step, stated once: GAE(lambda) advantages over a rollout of many parallel envs,
then minibatch epochs of the clipped surrogate with a clipped value loss and an entropy bonus
(Schulman et al. 2017, "Proximal Policy Optimization Algorithms"; GAE: Schulman et al. 2016;
the details as CleanRL's ppo.py has them).

With d_t = 1 where the episode ended at step t (terminated or truncated: the next row of the
rollout belongs to a fresh episode) and V_T the value of the state after the rollout's last step:

    delta_t  = r_t + gamma (1 - d_t) V_t+1 - V_t
    A_t      = delta_t + gamma lambda (1 - d_t) A_t+1          (A_T = 0)
    R_t      = A_t + V_t                                        the value target
    ratio    = exp(log pi(a|s) - log pi_old(a|s))               log pi: summed over branches
    A        = (A - mean A) / (std A + 1e-8)                    per minibatch (norm_adv)
    L_pi     = mean max(-A ratio, -A clip(ratio, 1 - eps, 1 + eps))
    V_clip   = V_old + clip(V - V_old, -eps, eps)
    L_V      = 1/2 mean max((V - R)^2, (V_clip - R)^2)          (clip_vloss; else 1/2 (V - R)^2)
    loss     = L_pi + vf_coef L_V - ent_coef mean H[pi(.|s)]    H: summed over branches

A truncated step (cut off, not terminal) still has a future: its reward is credited with
gamma V(s'_t), the value of the state before the env's auto-reset (`truncation_bootstrap`),
before GAE treats it as an end. `training.ppo.PPOLearner` calls `ppo_update` as it is.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from foxhunt.agents.ppo.config import PPOConfig
from foxhunt.agents.ppo.network import ActorCritic, State


def gae(rewards: Tensor, values: Tensor, dones: Tensor, last_value: Tensor, gamma: float,
        lam: float) -> tuple[Tensor, Tensor]:
    """(advantages, returns) [T, N] of a rollout, backwards from its last step. `dones[t]`: the
    episode ended at step t; `last_value` [N]: V of the state after step T-1."""
    not_done = (~dones).to(values.dtype)
    advantages = torch.zeros_like(values)
    next_value, running = last_value, torch.zeros_like(last_value)
    for t in range(rewards.shape[0] - 1, -1, -1):
        delta = rewards[t] + gamma * not_done[t] * next_value - values[t]
        running = delta + gamma * lam * not_done[t] * running
        advantages[t] = running
        next_value = values[t]
    return advantages, advantages + values


def truncation_bootstrap(rewards: Tensor, truncated: Tensor, next_values: Tensor,
                         gamma: float) -> Tensor:
    """Rewards with gamma V(s'_t) added where step t was truncated (`next_values`: V of the
    state each step led to, before auto-reset)."""
    return rewards + gamma * truncated.to(rewards.dtype) * next_values


class Loss(NamedTuple):
    loss: Tensor  # 0-dim, what is minimised
    policy: Tensor  # L_pi
    value: Tensor  # L_V
    entropy: Tensor  # mean H
    approx_kl: Tensor  # mean (ratio - 1) - log ratio (Schulman's k3 estimator)
    clipfrac: Tensor  # share of ratios outside the clip range


def ppo_loss(new_logprob: Tensor, old_logprob: Tensor, advantages: Tensor, new_value: Tensor,
             old_value: Tensor, returns: Tensor, entropy: Tensor, config: PPOConfig) -> Loss:
    """The clipped PPO objective of one minibatch, every argument [M] (see the module's math)."""
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    if config.norm_adv and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    clipped = ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef)
    policy = torch.max(-advantages * ratio, -advantages * clipped).mean()
    unclipped_v = (new_value - returns).square()
    if config.clip_vloss:
        v_clipped = old_value + (new_value - old_value).clamp(-config.clip_coef, config.clip_coef)
        value = 0.5 * torch.max(unclipped_v, (v_clipped - returns).square()).mean()
    else:
        value = 0.5 * unclipped_v.mean()
    mean_entropy = entropy.mean()
    loss = policy + config.vf_coef * value - config.ent_coef * mean_entropy
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1).abs() > config.clip_coef).float().mean()
    return Loss(loss, policy, value, mean_entropy, approx_kl, clipfrac)


def log_prob_entropy(logits: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
    """(log pi(a|s), H[pi(.|s)]) of the factored policy, each summed over the branches: logits
    [..., Br, A], action [..., Br] long."""
    log_p = logits.log_softmax(-1)
    chosen = log_p.gather(-1, action.unsqueeze(-1)).squeeze(-1).sum(-1)
    entropy = -(log_p.exp() * log_p).sum(-1).sum(-1)
    return chosen, entropy


class Rollout(NamedTuple):
    obs: Tensor  # [T, N, obs_dim] at s_t
    starts: Tensor  # [T, N] bool: s_t begins an episode (the recurrent state is reset there)
    action: Tensor  # [T, N, Br] long
    logprob: Tensor  # [T, N] log pi_old(a_t|s_t)
    value: Tensor  # [T, N] V_old(s_t)
    advantage: Tensor  # [T, N] GAE
    returns: Tensor  # [T, N] value targets
    state: State | None  # the recurrent state before step 0 (before its start reset)


class UpdateResult(NamedTuple):
    loss: Tensor  # 0-dim means over the update's gradient steps
    policy: Tensor
    value: Tensor
    entropy: Tensor
    approx_kl: Tensor
    clipfrac: Tensor
    grad_norm: Tensor  # total gradient norm before clipping
    steps: int  # gradient steps taken


def ppo_update(network: ActorCritic, optimizer: torch.optim.Optimizer, rollout: Rollout,
               config: PPOConfig, generator: torch.Generator | None = None) -> UpdateResult:
    """`update_epochs` passes of `minibatches` shuffled minibatches over `rollout`, one Adam
    step each on `ppo_loss`'s gradient clipped in total norm. An MLP's minibatches are
    transitions; a recurrent policy's are envs, each replayed as its whole sequence from the
    rollout's first state. Minibatch order comes from `generator`; nothing is read on the host."""
    steps, envs = rollout.logprob.shape
    recurrent = network.lstm is not None
    units = envs if recurrent else steps * envs
    splits = min(config.minibatches, units)
    sums = torch.zeros(7, device=rollout.obs.device)
    count = 0
    for _ in range(config.update_epochs):
        order = torch.randperm(units, generator=generator, device=rollout.obs.device)
        for index in order.tensor_split(splits):
            if recurrent:  # whole sequences of the chosen envs, from the rollout's first state
                def pick(x: Tensor, index: Tensor = index) -> Tensor:
                    return x[:, index].flatten(0, 1)

                state = None if rollout.state is None else (rollout.state[0][index],
                                                            rollout.state[1][index])
                logits, value = network.sequence(rollout.obs[:, index], rollout.starts[:, index],
                                                 state)
                logits, value = logits.flatten(0, 1), value.flatten(0, 1)
            else:  # the chosen transitions
                def pick(x: Tensor, index: Tensor = index) -> Tensor:
                    return x.flatten(0, 1)[index]

                logits, value = network(pick(rollout.obs))
            logprob, entropy = log_prob_entropy(logits, pick(rollout.action))
            out = ppo_loss(logprob, pick(rollout.logprob), pick(rollout.advantage), value,
                           pick(rollout.value), pick(rollout.returns), entropy, config)
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(network.parameters(), config.max_grad_norm)
            optimizer.step()
            sums += torch.stack((*(x.detach() for x in out), grad_norm))
            count += 1
    means = sums / count
    return UpdateResult(*means.unbind(), count)
