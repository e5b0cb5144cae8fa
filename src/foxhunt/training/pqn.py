"""One fold's PQN: the vectorised env, the Q-network and Adam; rollouts of lock-step env steps
with the epsilon-greedy policy, each trained on by `agents.pqn.pqn_update` and dropped.

A fold collects the env transitions its `[train]` budget gives (`FoldBudget.transitions`: those
the DQN would collect for the same budget), in whole rollouts of `[pqn] rollout_steps` steps of
`n_envs` envs, spread evenly over the epochs (`rollout_schedule`). Epsilon falls linearly over
the first `eps_decay` of the fold's rollouts (`PQNConfig.epsilon`). Nothing is read on the host
inside an epoch: the metrics accumulate on the device and `read_metrics` reads them once.

On CUDA the steps run eagerly ([train.performance] is the DQN's; compiling and graphing PQN's
is left to come). On the CPU a run is reproducible from its seed.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor, nn

from foxhunt.agents.pqn import QNetwork, Rollout, pqn_update
from foxhunt.env.market import MarketTensors
from foxhunt.env.vector_env import TradingVecEnv
from foxhunt.training.config import FoldBudget, TrainingSpec
from foxhunt.training.learner import (
    EpochMetrics,
    collect_accumulator,
    collect_row,
    collect_summary,
    cpu_tree,
    fold_generator,
    seeded_init,
)
from foxhunt.training.walkforward import Window

UPDATE_METRICS = ("loss", "mean_q", "target_q", "grad_norm", "epsilon", "updates")
"""Summed per rollout on the device (`updates`: gradient steps, the others weighted by them),
averaged per epoch."""


def rollout_schedule(budget: FoldBudget, rollout_steps: int) -> tuple[int, ...]:
    """Rollouts per epoch: the budget's transitions in whole rollouts of rollout_steps x n_envs,
    spread evenly over its epochs (earlier ones take one fewer where they do not divide), at
    least one an epoch."""
    epochs = len(budget.updates)
    total = max(epochs, math.ceil(budget.transitions / (rollout_steps * budget.n_envs)))
    return tuple(total * (e + 1) // epochs - total * e // epochs for e in range(epochs))


class RolloutBuffer:
    """A rollout's steps as the env gave them, [T, N] per field: states as (bar, position
    state), whose observations are gathered from the features when the rollout is trained on,
    as the DQN's replay stores them."""

    def __init__(self, steps: int, n_envs: int, pos_dim: int, branches: int,
                 device: torch.device):
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> Tensor:
            return torch.zeros(steps, n_envs, *shape, dtype=dtype, device=device)

        self.bar, self.next_bar = zeros(dtype=torch.long), zeros(dtype=torch.long)
        self.pos_state, self.next_pos_state = zeros(pos_dim), zeros(pos_dim)
        self.action = zeros(branches, dtype=torch.long)
        self.reward = zeros()
        self.terminated, self.truncated = zeros(dtype=torch.bool), zeros(dtype=torch.bool)

    def record(self, t: int, bar: Tensor, pos_state: Tensor, action: Tensor, reward: Tensor,
               terminated: Tensor, truncated: Tensor, next_bar: Tensor,
               next_pos_state: Tensor) -> None:
        for dst, src in ((self.bar, bar), (self.pos_state, pos_state), (self.action, action),
                         (self.reward, reward), (self.terminated, terminated),
                         (self.truncated, truncated), (self.next_bar, next_bar),
                         (self.next_pos_state, next_pos_state)):
            dst[t].copy_(src)

    def rollout(self, env: TradingVecEnv) -> Rollout:
        """The steps with their observations at s_t and s'_t."""
        steps, n = self.bar.shape

        def observe(bar: Tensor, pos_state: Tensor) -> Tensor:
            return env.observe(bar.flatten(), pos_state.flatten(0, 1)).view(steps, n, -1)

        return Rollout(observe(self.bar, self.pos_state), self.action, self.reward,
                       self.terminated, self.truncated,
                       observe(self.next_bar, self.next_pos_state))


class RolloutLearner(ABC):
    """What the rollout learners (PQN here, PPO in `training.ppo`) share: the epoch's metrics
    read once, and a resume point of Adam's state and where the fold stands. A subclass
    collects and trains one rollout at a time (`collect`, `update`), sets its schedule before
    each (`before_rollout`), and sums its `UPDATE_METRICS` into `update_acc` on the device."""

    UPDATE_METRICS: tuple[str, ...]
    optimizer: torch.optim.Optimizer

    def __init__(self, spec: TrainingSpec, market: MarketTensors, train_window: Window,
                 device: torch.device, seed: int, network: Callable[[TradingVecEnv], nn.Module]):
        """The fold's generator, its envs on the training window, `network(env)` built from
        the fold's seed, and zeroed metric sums."""
        self.spec, self.market, self.device = spec, market, device
        self.generator = fold_generator(device, seed)
        self.env = TradingVecEnv(market, spec.env, n_envs=spec.train.n_envs, device=device,
                                 generator=self.generator,
                                 start_range=(train_window.start, train_window.stop))
        with seeded_init(seed):
            self.online = network(self.env).to(device)
        self.collect_acc, self._action_ids, self._ones = collect_accumulator(
            spec.train.n_envs, spec.agent, device)
        self.update_acc = torch.zeros(len(self.UPDATE_METRICS), device=device,
                                      dtype=torch.float64)
        self.transitions = 0
        self.rollouts = 0  # trained on so far in the fold: where its schedule stands

    @abstractmethod
    def rollout_steps(self) -> int:
        """Env steps a rollout collects."""

    def before_rollout(self, rollouts: int) -> None:
        """Set what the fold's schedule says for its next rollout, of `rollouts` in all."""

    @abstractmethod
    def collect(self) -> None:
        """One rollout of the current policy into the fold's buffer."""

    @abstractmethod
    def update(self) -> None:
        """The algorithm's update on the rollout just collected."""

    def read_metrics(self) -> EpochMetrics:
        """The one host read per epoch; the accumulators restart from zero."""
        a = self.spec.agent
        n_collect = self.collect_acc.shape[1]
        flat = torch.cat((self.collect_acc.sum(0), self.update_acc)).tolist()
        self.collect_acc.zero_()
        self.update_acc.zero_()
        collect, mix = collect_summary(flat[:n_collect], a.n_branches, a.n_actions)
        sums = dict(zip(self.UPDATE_METRICS, flat[n_collect:], strict=True))
        steps = max(sums["updates"], 1.0)
        update = {k: v / steps for k, v in sums.items() if k != "updates"}
        update["updates"] = sums["updates"]
        return EpochMetrics(collect=collect, action_mix=mix, update=update)

    def resume_state(self) -> dict[str, Any]:
        """Adam's state and where the fold stands (transitions, rollouts); the env restarts."""
        return {"optimizer": cpu_tree(self.optimizer.state_dict()),
                "transitions": self.transitions, "rollouts": self.rollouts}

    def restore(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.transitions, self.rollouts = state["transitions"], state["rollouts"]


class RolloutSteps:
    """Runs a `RolloutLearner`'s epochs eagerly: each of its rollouts collected, then trained on."""

    compiled = False
    captured = False

    def __init__(self, learner: RolloutLearner):
        self.learner = learner

    def train_epoch(self, budget: FoldBudget, epoch: int,
                    timer: Callable[[str], AbstractContextManager[None]]) -> None:
        """Epoch `epoch`'s rollouts (`rollout_schedule` of the fold's budget), the learner's
        schedule set before each from where the fold stands in it."""
        learner = self.learner
        schedule = rollout_schedule(budget, learner.rollout_steps())
        for _ in range(schedule[epoch]):
            learner.before_rollout(sum(schedule))
            with torch.no_grad(), timer("experience"):
                learner.collect()
            with timer("updates"):
                learner.update()


class PQNLearner(RolloutLearner):
    """Built fresh for every fold (`fold_state.FOLD_BOUNDARY`); `seed` is the fold's seed."""

    UPDATE_METRICS = UPDATE_METRICS

    def __init__(self, spec: TrainingSpec, market: MarketTensors, train_window: Window,
                 device: torch.device, seed: int):
        t, a, p = spec.train, spec.agent, spec.pqn
        super().__init__(spec, market, train_window, device, seed,
                         lambda env: QNetwork(env.obs_dim, a, spec.env.window, env.pos_dim))
        self.optimizer = torch.optim.Adam(self.online.parameters(), lr=p.lr)
        self.rollout = RolloutBuffer(p.rollout_steps, t.n_envs, self.env.pos_dim,
                                     a.n_branches, device)
        self.epsilon = torch.ones((), device=device)  # set before each rollout (`before_rollout`)

    @property
    def policy_net(self) -> QNetwork:
        return self.online

    def rollout_steps(self) -> int:
        return self.spec.pqn.rollout_steps

    def before_rollout(self, rollouts: int) -> None:
        """Epsilon from where the fold stands in its schedule of `rollouts`."""
        self.epsilon.fill_(self.spec.pqn.epsilon(self.rollouts, rollouts))

    def act(self) -> tuple[Tensor, Tensor, Tensor]:
        """The env's state and the epsilon-greedy action in it: with probability epsilon an env
        takes a uniformly random choice in every branch, else the greedy one."""
        bar, pos_state = self.env.state()
        greedy = self.online.act(self.env.observe(bar, pos_state))
        n, branches = greedy.shape
        explore = torch.rand(n, generator=self.generator, device=self.device) < self.epsilon
        random = torch.randint(self.spec.agent.n_actions, (n, branches),
                               generator=self.generator, device=self.device)
        return bar, pos_state, torch.where(explore[:, None], random, greedy)

    def collect(self) -> None:
        """One rollout: `rollout_steps` env steps into the buffer, and their metric sums."""
        for t in range(self.spec.pqn.rollout_steps):
            bar, pos_state, action = self.act()
            r = self.env.step(action)
            self.rollout.record(t, bar, pos_state, action, r.reward, r.terminated, r.truncated,
                                r.next_bar, r.next_pos_state)
            self.collect_acc += collect_row(r.reward, self._ones, r.position, r.trades_closed,
                                            r.terminated, r.truncated, action, self._action_ids)
        self.transitions += self.spec.pqn.rollout_steps * self.env.n_envs

    def update(self) -> None:
        """`pqn_update` on the rollout just collected."""
        out = pqn_update(self.online, self.optimizer, self.rollout.rollout(self.env),
                         self.spec.pqn, self.generator)
        weighted = torch.stack((out.loss, out.mean_q, out.target_q, out.grad_norm,
                                self.epsilon)).double() * out.steps
        self.update_acc[:-1] += weighted
        self.update_acc[-1] += out.steps
        self.rollouts += 1


class PQNSteps(RolloutSteps):
    """Runs a `PQNLearner`'s epochs: each of its rollouts collected, then trained on."""
