"""One fold's PPO: the vectorised env, the actor-critic and Adam; rollouts of lock-step env steps
sampled from the policy, each trained on by `agents.ppo.ppo_update` and dropped.

A fold collects the env transitions its `[train]` budget gives (`FoldBudget.transitions`: those
the DQN would collect for the same budget), in whole rollouts of `[ppo] rollout_steps` steps of
`n_envs` envs spread evenly over the epochs (`pqn.rollout_schedule`, shared with PQN). The envs
and a recurrent policy's state run on from one rollout to the next; the state is zeroed where an
episode ends. Nothing is read on the host inside an epoch: the metrics accumulate on the device
and `read_metrics` reads them once.

Actions are drawn by the Gumbel-max trick from the fold's generator, so a CPU run is
reproducible from its seed and a CUDA one needs no host sync. On CUDA the steps run eagerly
([train.performance] is the DQN's).
"""

from __future__ import annotations

import torch
from torch import Tensor

from foxhunt.agents.ppo import ActorCritic, Rollout, gae, ppo_update, truncation_bootstrap
from foxhunt.agents.ppo.network import State
from foxhunt.agents.ppo.update import log_prob_entropy
from foxhunt.env.market import MarketTensors
from foxhunt.training.config import TrainingSpec
from foxhunt.training.learner import collect_row
from foxhunt.training.pqn import RolloutLearner, RolloutSteps
from foxhunt.training.walkforward import Window

UPDATE_METRICS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac",
                  "grad_norm", "updates")
"""Summed per rollout on the device (`updates`: gradient steps, the others weighted by them),
averaged per epoch."""


def sample(logits: Tensor, generator: torch.Generator | None) -> Tensor:
    """One draw per branch from softmax(logits) [N, Br, A] -> [N, Br]: the Gumbel-max trick,
    from `generator`'s uniforms (reproducible on the CPU, no host sync on CUDA)."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device)  # [0, 1)
    exponential = -torch.log(u.clamp_min(1e-20))  # > 0: u < 1
    return (logits - exponential.log()).argmax(dim=-1)  # -log(Exp(1)) is Gumbel(0, 1)


class RolloutBuffer:
    """A rollout's steps, [T, N] per field: states as (bar, position state), whose observations
    are gathered when the rollout is trained on, with what the policy said at them."""

    def __init__(self, steps: int, n_envs: int, pos_dim: int, branches: int, hidden: int,
                 recurrent: bool, device: torch.device):
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> Tensor:
            return torch.zeros(steps, n_envs, *shape, dtype=dtype, device=device)

        self.bar, self.next_bar = zeros(dtype=torch.long), zeros(dtype=torch.long)
        self.pos_state, self.next_pos_state = zeros(pos_dim), zeros(pos_dim)
        self.action = zeros(branches, dtype=torch.long)
        self.reward, self.logprob, self.value = zeros(), zeros(), zeros()
        self.start = zeros(dtype=torch.bool)
        self.terminated, self.truncated = zeros(dtype=torch.bool), zeros(dtype=torch.bool)
        # the recurrent state after each step: what V(s'_t) of a truncated step is computed from
        self.h = zeros(hidden) if recurrent else None
        self.c = zeros(hidden) if recurrent else None


class PPOLearner(RolloutLearner):
    """Built fresh for every fold (`fold_state.FOLD_BOUNDARY`); `seed` is the fold's seed. The
    env and a recurrent policy's state restart on resume."""

    UPDATE_METRICS = UPDATE_METRICS

    def __init__(self, spec: TrainingSpec, market: MarketTensors, train_window: Window,
                 device: torch.device, seed: int):
        t, a, p = spec.train, spec.agent, spec.ppo
        super().__init__(spec, market, train_window, device, seed,
                         lambda env: ActorCritic(env.obs_dim, a, p, spec.env.window, env.pos_dim))
        self.optimizer = torch.optim.Adam(self.online.parameters(), lr=p.lr, eps=1e-5)
        self.rollout = RolloutBuffer(p.rollout_steps, t.n_envs, self.env.pos_dim, a.n_branches,
                                     a.hidden, p.recurrent, device)
        self.recurrent_state: State | None = (self.online.initial_state(t.n_envs, device)
                                              if p.recurrent else None)
        self.first_state: State | None = None  # the recurrent state the last rollout began from
        self.episode_start = torch.ones(t.n_envs, dtype=torch.bool, device=device)

    @property
    def policy_net(self) -> ActorCritic:
        return self.online

    def rollout_steps(self) -> int:
        return self.spec.ppo.rollout_steps

    def before_rollout(self, rollouts: int) -> None:
        """With `anneal_lr`, the rate from where the fold stands in its schedule of `rollouts`."""
        config = self.spec.ppo
        if config.anneal_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = config.lr * (1.0 - self.rollouts / rollouts)

    def collect(self) -> None:
        """One rollout: `rollout_steps` env steps sampled from the policy into the buffer, the
        recurrent state carried and zeroed where an episode begins, and their metric sums."""
        buf, state = self.rollout, self.recurrent_state
        self.first_state = None if state is None else (state[0].clone(), state[1].clone())
        for t in range(self.spec.ppo.rollout_steps):
            bar, pos_state = self.env.state()
            logits, value, state = self.online.step(self.env.observe(bar, pos_state), state,
                                                    self.episode_start)
            action = sample(logits, self.generator)
            r = self.env.step(action)
            done = r.terminated | r.truncated
            for dst, src in ((buf.bar, bar), (buf.pos_state, pos_state), (buf.action, action),
                             (buf.reward, r.reward), (buf.terminated, r.terminated),
                             (buf.truncated, r.truncated), (buf.next_bar, r.next_bar),
                             (buf.next_pos_state, r.next_pos_state), (buf.value, value),
                             (buf.logprob, log_prob_entropy(logits, action)[0]),
                             (buf.start, self.episode_start)):
                dst[t].copy_(src)
            if state is not None:
                buf.h[t].copy_(state[0])
                buf.c[t].copy_(state[1])
            self.episode_start = done
            self.collect_acc += collect_row(r.reward, self._ones, r.position, r.trades_closed,
                                            r.terminated, r.truncated, action, self._action_ids)
        self.recurrent_state = state
        self.transitions += self.spec.ppo.rollout_steps * self.env.n_envs

    def prepared(self) -> Rollout:
        """The rollout just collected with its observations, GAE advantages and value targets,
        computed once with the weights that collected it."""
        buf, config, env = self.rollout, self.spec.ppo, self.env
        steps, n = buf.bar.shape

        def observe(bar: Tensor, pos_state: Tensor) -> Tensor:
            return env.observe(bar.flatten(), pos_state.flatten(0, 1)).view(steps, n, -1)

        obs, next_obs = observe(buf.bar, buf.pos_state), observe(buf.next_bar, buf.next_pos_state)
        with torch.no_grad():
            after = None if buf.h is None else (buf.h.flatten(0, 1), buf.c.flatten(0, 1))
            next_value = self.online.step(next_obs.flatten(0, 1), after)[1].view(steps, n)
            bar, pos_state = env.state()
            last_value = self.online.step(env.observe(bar, pos_state), self.recurrent_state,
                                          self.episode_start)[1]
            cut = buf.truncated & ~buf.terminated
            reward = truncation_bootstrap(buf.reward, cut, next_value, config.gamma)
            advantage, returns = gae(reward, buf.value, buf.terminated | buf.truncated,
                                     last_value, config.gamma, config.gae_lambda)
        return Rollout(obs, buf.start, buf.action, buf.logprob, buf.value, advantage, returns,
                       self.first_state)

    def update(self) -> None:
        """`ppo_update` on the rollout just collected."""
        out = ppo_update(self.online, self.optimizer, self.prepared(), self.spec.ppo,
                         self.generator)
        self.update_acc[:-1] += torch.stack(out[:-1]).double() * out.steps
        self.update_acc[-1] += out.steps
        self.rollouts += 1


class PPOSteps(RolloutSteps):
    """Runs a `PPOLearner`'s epochs: each of its rollouts collected, then trained on."""
