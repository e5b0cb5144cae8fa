"""PQN's learning step, stated once: Q(lambda) returns over a rollout of many parallel envs,
then minibatch epochs of TD regression on them, with no replay buffer and no target network
(Gallici et al. 2025, "Simplifying Deep Temporal Difference Learning", ICLR; algorithm 1).

Per action branch b (the branches of `env.actions`, as the DQN's heads have them):

    q'_t,b   = max_a Q(s'_t, a)_b                  s'_t: the state step t led to
    G_T-1,b  = r_T-1 + gamma (1 - term_T-1) q'_T-1,b
    G_t,b    = r_t + gamma (1 - term_t) [q'_t,b + lambda c_t (G_t+1,b - q'_t,b)]
    loss     = mean_b,i 1/2 (Q(s_i, a_i)_b - G_i,b)^2   over a minibatch, G held fixed

c_t is 0 where the episode ended at step t (terminated or truncated: the next row of the
rollout belongs to a fresh episode) and 1 otherwise. A truncated step still bootstraps from
its own s'_t, the state before the env's auto-reset; a terminated one does not. lambda = 0 is
one-step Q-learning, lambda = 1 the discounted return to the rollout's end (or the episode's),
bootstrapped there.

The returns are computed once per rollout with the weights that collected it; then
`update_epochs` passes over the rollout's transitions in `minibatches` shuffled minibatches,
each one Adam step on the gradient clipped in total norm. `training.pqn.PQNLearner` calls
`pqn_update` as it is: there is no other implementation of it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from foxhunt.agents.pqn.config import PQNConfig


class Rollout(NamedTuple):
    obs: Tensor  # [T, N, obs_dim] at s_t
    action: Tensor  # [T, N, Br] long, the actions taken
    reward: Tensor  # [T, N]
    terminated: Tensor  # [T, N] bool: the episode ended in a terminal state; no bootstrap
    truncated: Tensor  # [T, N] bool: the episode was cut off; bootstrap from next_obs
    next_obs: Tensor  # [T, N, obs_dim] at s'_t, before the env's auto-reset


def lambda_returns(reward: Tensor, next_q: Tensor, terminated: Tensor, truncated: Tensor,
                   gamma: float, lam: float) -> Tensor:
    """Q(lambda) returns G [T, N, ...] of a rollout, backwards from its last step. `next_q`
    [T, N, ...] is max_a Q(s'_t, a) (per branch in its trailing dims); `reward`, `terminated`
    and `truncated` are [T, N] and broadcast over them."""
    extra = (1,) * (next_q.dim() - reward.dim())
    reward = reward.reshape(*reward.shape, *extra).to(next_q.dtype)
    alive = (~terminated).reshape(*terminated.shape, *extra).to(next_q.dtype)
    going_on = (~(terminated | truncated)).reshape(*terminated.shape, *extra).to(next_q.dtype)
    returns = torch.empty_like(next_q)
    last = reward.shape[0] - 1
    returns[last] = reward[last] + gamma * alive[last] * next_q[last]
    for t in range(last - 1, -1, -1):
        ahead = lam * going_on[t] * (returns[t + 1] - next_q[t])
        returns[t] = reward[t] + gamma * alive[t] * (next_q[t] + ahead)
    return returns


class UpdateResult(NamedTuple):
    loss: Tensor  # 0-dim: mean over the update's gradient steps
    mean_q: Tensor  # 0-dim: mean Q(s, a) of the trained transitions
    target_q: Tensor  # 0-dim: mean lambda-return
    grad_norm: Tensor  # 0-dim: mean total gradient norm before clipping
    steps: int  # gradient steps taken


def pqn_update(network: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout,
               config: PQNConfig, generator: torch.Generator | None = None) -> UpdateResult:
    """One PQN update on `rollout`: its lambda-returns, then `update_epochs` x `minibatches`
    gradient steps. Minibatch order comes from `generator` (one permutation per epoch).
    Everything stays on the device: the result's tensors are read when the caller wants."""
    steps, envs, branches = rollout.action.shape
    with torch.no_grad():
        next_q = network(rollout.next_obs.flatten(0, 1)).amax(dim=-1).view(steps, envs, branches)
        returns = lambda_returns(rollout.reward, next_q, rollout.terminated, rollout.truncated,
                                 config.gamma, config.q_lambda)
    obs, action, target = rollout.obs.flatten(0, 1), rollout.action.flatten(0, 1), returns.flatten(0, 1)
    sums = torch.zeros(3, device=obs.device)
    count = 0
    for _ in range(config.update_epochs):
        order = torch.randperm(len(obs), generator=generator, device=obs.device)
        for index in order.tensor_split(config.minibatches):
            q = network(obs[index]).gather(-1, action[index].unsqueeze(-1)).squeeze(-1)
            loss = 0.5 * (q - target[index]).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(network.parameters(), config.max_grad_norm)
            optimizer.step()
            sums += torch.stack((loss.detach(), q.detach().mean(), grad_norm))
            count += 1
    loss, mean_q, grad_norm = sums / count
    return UpdateResult(loss, mean_q, returns.mean(), grad_norm, count)
