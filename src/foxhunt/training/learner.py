"""One fold's learning: vectorised env, prioritised replay, online and target networks, and the
steps of Rainbow-BDQ's collect and update.

The update is `agents.dqn.update.reference_update` split into steps so that the next batch and
its bootstrap target are computed one update ahead, beside the current loss pass:
`CompiledSteps.prime()` stages the first batch of a run of updates, and each update trains on
the batch staged before it and stages the next. That pipelining is the one way this learner differs from the
reference, and it is bounded by tests (tests/training/test_reference_update.py):
- the next batch is drawn from the priorities as they stand when the update starts (this
  batch's new priorities are written after it: its transitions keep their old priority for
  one more draw);
- its a* is picked by the online network with the weights and the noise of the update that
  stages it, one gradient step older than the textbook's, and its target network has taken
  Polyak's step toward those same weights.
The first update after `prime()` equals the reference exactly (CPU, float32).

This module states what the steps compute (`Learner.STEPS`, plain methods, never replaced);
`training.compiled.CompiledSteps` is what runs them (compiled, captured as CUDA graphs, on the
side streams of `training.hotpath`'s schedules). Every metric stays on the
device in accumulators that the trainer reads once per epoch.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork, LossOutput, PolyakUpdate
from foxhunt.agents.dqn.losses import (
    DIAGNOSTICS,
    HEADS,
    adapt_support,
    batch_diagnostics,
    greedy_next_actions,
    online_pass,
    support_limits,
    take_action,
    target_distributions,
    target_value_bounds,
)
from foxhunt.env.actions import FLAT, LONG, SHORT
from foxhunt.env.market import MarketTensors
from foxhunt.env.vector_env import TradingVecEnv
from foxhunt.errors import ConfigError
from foxhunt.features.mirror import FeatureMirror
from foxhunt.replay import PrioritizedReplay
from foxhunt.training.bounds import RunningQuantile
from foxhunt.training.config import TrainingSpec
from foxhunt.training.hotpath import HotPath, StagedBatch
from foxhunt.training.optim import ClippedAdam
from foxhunt.training.walkforward import Window

_SEEDED_INIT = threading.Lock()
"""Held while a network is initialised from torch's global CPU generator (seeded, then restored):
learners built at once in threads (`foxhunt tune --backend thread`) would otherwise interleave
their draws, and a trial would not reproduce from its seed."""


@contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    """Networks built inside draw their initial weights from torch's global CPU generator
    seeded with `seed`, which is restored after (`_SEEDED_INIT`)."""
    with _SEEDED_INIT, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def fold_generator(device: torch.device, seed: int) -> torch.Generator | None:
    """The generator of a fold's random draws. CPU: an explicit one, which makes a run
    reproducible. CUDA: None, the default generator, which graphs need: seeded here and forked
    nowhere else."""
    if device.type == "cpu":
        return torch.Generator(device=device).manual_seed(seed)
    torch.cuda.manual_seed(seed)
    return None


def cpu_tree(obj: Any) -> Any:
    """`obj` (tensors in dicts and lists) with every tensor detached and on the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: cpu_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [cpu_tree(v) for v in obj]
    return obj

COLLECT_METRICS = ("reward", "env_steps", "flat", "trades", "terminated", "truncated")
LOSS_METRICS = ("loss", "q_loss", "aux_loss", "mean_q", "target_q")
UPDATE_METRICS = (*LOSS_METRICS, "grad_norm", "updates")
"""Every update's metrics, summed on the device and averaged per epoch; `updates` is their
count."""
PROBE_METRICS = (*DIAGNOSTICS, "priority_max")
"""`Learner.probe`'s diagnostics of one batch per epoch (C51 also `C51_DIAGNOSTICS`), beside
the replay's running max priority."""


def direction_labels(market: MarketTensors, bar: Tensor) -> Tensor:
    """Next-bar direction for the auxiliary head: 1 up, 0 down, -1 unchanged (ignored)."""
    move = market.close[bar + 1] - market.close[bar]
    return torch.where(move > 0, 1, torch.where(move < 0, 0, -1))


@dataclass
class EpochMetrics:
    collect: dict[str, float]
    action_mix: list[list[float]]
    update: dict[str, float]


def collect_accumulator(n_envs: int, agent: AgentConfig,
                        device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """(the collect sums [N, COLLECT_METRICS + Br * A], zeros; the action ids; ones [N]): what
    `collect_row` adds to and reads. Per env, summed over the envs only when read: a collect step
    then has no reduction, so the compiled env step stays one wide elementwise kernel instead of
    a serial reduction."""
    width = len(COLLECT_METRICS) + agent.n_branches * agent.n_actions
    return (torch.zeros(n_envs, width, device=device, dtype=torch.float64),
            torch.arange(agent.n_actions, device=device),
            torch.ones(n_envs, device=device, dtype=torch.float64))


def collect_row(reward: Tensor, ones: Tensor, position: Tensor, trades_closed: Tensor,
                terminated: Tensor, truncated: Tensor, action: Tensor,
                action_ids: Tensor) -> Tensor:
    """A collect step's per-env counts [N, COLLECT_METRICS + Br * A] (float64), summed over the
    envs only when read: a collect step then has no reduction."""
    chosen = (action.unsqueeze(-1) == action_ids).flatten(1)  # [N, Br * A] one-hot
    return torch.cat((
        torch.stack((
            reward.double(),
            ones,
            (position == 0).double(),
            trades_closed.double(),
            terminated.double(),
            truncated.double(),
        ), dim=1),
        chosen.double(),
    ), dim=1)


def collect_summary(sums: list[float], n_branches: int,
                    n_actions: int) -> tuple[dict[str, float], list[list[float]]]:
    """`collect_row`'s sums over an epoch as run.jsonl's collect metrics and action mix."""
    base = dict(zip(COLLECT_METRICS, sums))
    steps = max(base["env_steps"], 1.0)
    counts = sums[len(COLLECT_METRICS):]
    mix = [[c / steps for c in counts[i * n_actions:(i + 1) * n_actions]]
           for i in range(n_branches)]
    return ({"mean_reward": base["reward"] / steps, "flat": base["flat"] / steps,
             "trades": base["trades"], "terminated": base["terminated"],
             "truncated": base["truncated"], "env_steps": base["env_steps"]}, mix)


class Learner:
    """Built fresh for every fold (see `fold_state.FOLD_BOUNDARY`); `seed` is the fold's seed."""

    STEPS = ("act", "draw_act_noise", "env_step", "store", "loss", "draw_next_noise",
             "reprioritise", "track_online", "stage", "stage_targets", "adopt", "apply_gradients")
    """The steps a collect step and an update are made of, each compiled on its own by
    `CompiledSteps` (`backward`, autograd's, runs as it is)."""
    COLLECT_STEPS = ("act", "draw_act_noise", "env_step", "store")
    """The steps of a collect step (the rest are an update's)."""

    def __init__(
        self,
        spec: TrainingSpec,
        market: MarketTensors,
        train_window: Window,
        feature_groups: dict[str, list[int]] | None,
        device: torch.device,
        seed: int,
        mirror: FeatureMirror | None = None,
    ):
        t, a = spec.train, spec.agent
        self.fast = HotPath(t.performance, device)
        market = self.fast.market(market)
        self.spec, self.market, self.device = spec, market, device
        self.generator = fold_generator(device, seed)
        self.env = TradingVecEnv(
            market, spec.env, n_envs=t.n_envs, device=device, generator=self.generator,
            start_range=(train_window.start, train_window.stop),
        )
        with seeded_init(seed):
            self.online = BranchingQNetwork(
                self.env.obs_dim, a, feature_groups, spec.env.window, self.env.pos_dim
            ).to(device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        average_rate = t.average_rate()
        self.averaged: BranchingQNetwork | None = None  # see `policy_net`
        if average_rate > 0:
            self.averaged = copy.deepcopy(self.online).requires_grad_(False)
        for net in (self.online, self.target):  # see `apply_gradients`
            net.use_working_weights(self.fast.compute_dtype)
        self.clip_bound = (None if a.grad_clip_quantile is None
                           else RunningQuantile(a.grad_clip_quantile, device))
        self.optimizer = ClippedAdam(self.online.parameters(), lr=a.lr, eps=a.adam_eps,
                                     max_norm=a.grad_clip, adaptive=self.clip_bound,
                                     weight_decay=a.weight_decay)
        self.replay = PrioritizedReplay(
            spec.replay, t.n_envs, self.env.pos_dim, a.n_branches, device, generator=self.generator
        )
        self._head = HEADS[a.head]
        self._mirror: tuple[Tensor, Tensor, float] | None = None  # see `_mirrored`
        if a.mirror:
            if mirror is None:
                raise ConfigError("[agent] mirror needs the features' mirror (FeatureMirror)")
            window = spec.env.window
            self._mirror = (torch.tensor(np.tile(mirror.sign, window), dtype=torch.float32,
                                         device=device),
                            torch.tensor(np.tile(mirror.offset, window), dtype=torch.float32,
                                         device=device), mirror.clip)
            self._mirror_direction = torch.tensor((FLAT, SHORT, LONG), device=device)
        # One support tensor for both networks (C51): an adaptive one moves them together.
        self.support: Tensor | None = None
        self.support_seen: Tensor | None = None  # see `stage`
        if a.head == "c51":
            self.support = self.target.support = self.online.support
            if self.averaged is not None:
                self.averaged.support = self.support
            self._support_limits = support_limits(a, device)
            if a.support == "adaptive":
                self.support_seen = self._support_limits[0].clone()
        self._polyak = PolyakUpdate(self.target, self.online, a.tau)
        self._average = (None if self.averaged is None
                         else PolyakUpdate(self.averaged, self.online, average_rate))
        self.collect_acc, self._action_ids, self._ones = collect_accumulator(t.n_envs, a, device)
        self.update_acc = torch.zeros(len(UPDATE_METRICS), device=device, dtype=torch.float64)
        self.batch: StagedBatch | None = None  # the next update's (`CompiledSteps.prime`)
        self.transitions = 0

    @property
    def policy_net(self) -> BranchingQNetwork:
        """The network the fold validates, tests and deploys: the running average of the online
        weights where `[train] average_epochs` > 0, else the online network. Averaging damps the
        epoch-to-epoch swings of a policy fitted to noisy returns (Polyak & Juditsky, 1992)."""
        return self.online if self.averaged is None else self.averaged

    # -- collect: one vectorised env step with the noisy online policy ----------------------

    def act(self) -> tuple[Tensor, Tensor, Tensor]:
        """The env's state and the noisy online policy's action in it."""
        bar, pos_state = self.env.state()
        with torch.no_grad(), self.fast.autocast():
            action = self.online.act(self.env.observe(bar, pos_state), self.generator)
        return bar, pos_state, action

    def draw_act_noise(self) -> None:
        """Fresh noise for the next policy pass (each step acts with noise of its own)."""
        self.online.reset_noise(self.generator)

    def env_step(self, bar: Tensor, pos_state: Tensor, action: Tensor) -> tuple[Tensor, ...]:
        """The env step; returns what `store` records."""
        r = self.env.step(action)
        return (bar, pos_state, action, r.reward, r.terminated, r.truncated, r.next_bar,
                r.next_pos_state, r.position, r.trades_closed)

    def store(self, bar: Tensor, pos_state: Tensor, action: Tensor, reward: Tensor,
              terminated: Tensor, truncated: Tensor, next_bar: Tensor, next_pos_state: Tensor,
              position: Tensor, trades_closed: Tensor) -> None:
        """The transitions into the replay (at max priority), and the step's metric sums."""
        self.replay.add(bar, pos_state, action, reward, terminated, truncated, next_bar,
                        next_pos_state)
        self.collect_acc += collect_row(reward, self._ones, position, trades_closed, terminated,
                                        truncated, action, self._action_ids)

    # -- update: reference_update's math, its bootstrap target staged one update ahead -------

    def loss(self, batch: StagedBatch) -> LossOutput:
        """The online network at s against the staged target: the loss, per-sample TD errors
        (the new priorities) and metrics."""
        with self.fast.autocast():
            out = online_pass(self.online, batch.obs, self.spec.agent, self.generator)
            return self._head.terms(out, batch.action, batch.target, batch.weight, batch.labels,
                                    self.spec.agent, self.support)

    def backward(self, loss: Tensor) -> None:
        self.online.zero_grad(set_to_none=True)
        loss.backward()

    def draw_next_noise(self) -> None:
        """The next update's online noise, drawn ahead (`BranchingQNetwork.draw_noise_ahead`);
        `apply_gradients` takes it."""
        self.online.draw_noise_ahead(self.generator)

    def reprioritise(self, index: Tensor, td_abs: Tensor) -> None:
        """New priorities for the sampled transitions."""
        self.replay.update_priorities(index, td_abs)

    def track_online(self) -> None:
        """Polyak: target <- (1 - tau) target + tau online, and the target's plain layers'
        working weights (its noisy layers' are composed with their fresh noise in `stage`);
        the weight average's step likewise, at its own rate."""
        self._polyak()
        self.target.compose_working_weights("plain")
        if self._average is not None:
            self._average()

    def stage(self) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
        """The next PER batch (StagedBatch's fields but the target) with its observations and
        direction labels; and the operands of its target (`Head.target_operands`): the target
        network's distributions (fresh noise) of the online network's a* at s', with the batch's
        n-step returns and discounts. Random draws: the batch, the target's noise, then the
        taus in `reference_update`'s order (the target's, a*'s). An adaptive support records
        the percentiles of the targets' values here (`support_seen`); `apply_gradients` moves
        the support once the update's passes are done with it."""
        agent = self.spec.agent
        b = self.replay.sample(self.spec.train.batch_size)
        self.target.reset_noise(self.generator)
        # Both observations in one gather (one kernel, not two).
        obs, next_obs = self.env.observe(torch.cat((b.bar, b.next_bar)),
                                         torch.cat((b.pos_state, b.next_pos_state))).chunk(2)
        action, labels = b.action, direction_labels(self.market, b.bar)
        if self._mirror is not None:
            obs, next_obs, action, labels = self._mirrored(obs, next_obs, action, labels)
        with self.fast.autocast():
            next_dist = target_distributions(self.target, next_obs, agent, self.generator)
            a_star = greedy_next_actions(self.online, next_obs, self.generator)
            chosen = take_action(next_dist, a_star)
        if self.support_seen is not None:
            self.support_seen.copy_(target_value_bounds(chosen, b.ret, b.discount, self.support))
        if agent.input_noise > 0:
            obs = self._noisy_features(obs, agent.input_noise)
        fields = (b.index, b.weight, action, obs, labels)
        return fields, self._head.target_operands(chosen, b.ret, b.discount, self.support)

    def _mirrored(self, obs: Tensor, next_obs: Tensor, action: Tensor,
                  labels: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Each transition, with probability 1/2, as the mirrored market would have given it
        (`features.mirror`): directional features mapped, the position negated, long and short
        swapped in the action's direction and in the next bar's direction label. The reward,
        return and discount are the mirror's too: the mirrored trade earns what the trade did."""
        sign, offset, clip = self._mirror
        flip = torch.rand(len(obs), generator=self.generator, device=obs.device) < 0.5
        features = sign.numel()
        out = []
        for x in (obs, next_obs):
            seen = (x[:, :features] * sign + offset).clamp(-clip, clip)
            pos = torch.cat((-x[:, features:features + 1], x[:, features + 1:]), dim=1)
            out.append(torch.where(flip[:, None], torch.cat((seen, pos), dim=1), x))
        turned = torch.cat((self._mirror_direction[action[:, :1]], action[:, 1:]), dim=1)
        action = torch.where(flip[:, None], turned, action)
        labels = torch.where(flip & (labels >= 0), 1 - labels, labels)
        return out[0], out[1], action, labels

    def _noisy_features(self, obs: Tensor, std: float) -> Tensor:
        """`obs` with N(0, std^2) added to its market features (the position state, which the
        env knows exactly, untouched), drawn after every other draw of the batch."""
        features = obs.shape[1] - self.env.pos_dim
        noise = torch.randn(obs.shape[0], features, generator=self.generator, device=obs.device)
        return torch.cat((obs[:, :features] + std * noise, obs[:, features:]), dim=1)

    def stage_targets(self, *operands: Tensor) -> Tensor:
        """a*'s bootstrap target, a step of its own (see `losses.Head`)."""
        return self._head.targets(*operands)

    def adopt(self, *staged: Tensor) -> None:
        """The staged batch becomes `self.batch` (copied: an update's graph reads fixed
        addresses)."""
        for dst, src in zip(self.batch, staged, strict=True):
            dst.copy_(src)

    def apply_gradients(self, metrics: dict[str, Tensor]) -> None:
        """Adam on the gradients clipped to grad_clip in total norm (`ClippedAdam`), the next
        update's noise and working weights, an adaptive support's step, and the update's
        metrics summed.

        The passes compute with working weights (`working.WorkingWeights`: mu + sigma * eps in
        the pass's dtype), so the gradients arrive there; the parameters' are derived from them
        with this update's noise, before the noise drawn ahead replaces it. The next working
        weights are composed here, where the new parameters are in hand."""
        grads = self.online.gradients()
        self.online.take_noise_ahead()
        grad_norm = self.optimizer.step(grads=grads)
        self.online.compose_working_weights()
        if self.support_seen is not None:
            adapt_support(self.support, self.support_seen, self._support_limits)
        self.update_acc += torch.stack(
            [metrics[k].float() for k in LOSS_METRICS] + [grad_norm.float(),
                                                          torch.ones((), device=self.device)]
        ).double()

    # -- epoch-level driving (host side, no device reads) -----------------------------------

    def resume_state(self) -> dict[str, Any]:
        """The resume point beside the online weights: target, weight average, Adam's state and
        the transitions collected. The replay is not saved; a resumed fold refills it."""
        return {"target": {k: v.cpu() for k, v in self.target.state_dict().items()},
                "averaged": None if self.averaged is None
                else {k: v.cpu() for k, v in self.averaged.state_dict().items()},
                "optimizer": cpu_tree(self.optimizer.state_dict()),
                "transitions": self.transitions}

    def restore(self, state: dict[str, Any]) -> None:
        self.target.load_state_dict(state["target"])
        if self.averaged is not None:  # the run's settings are checked equal by the trainer
            self.averaged.load_state_dict(state["averaged"])
        self.optimizer.load_state_dict(state["optimizer"])

    def ready_to_learn(self) -> bool:
        return self.transitions >= max(self.spec.train.learning_starts, self.spec.train.batch_size)

    @torch.no_grad()
    def probe(self) -> dict[str, Tensor]:
        """`PROBE_METRICS` of the batch staged for the next update (`prime` restages before any
        update uses it), through the loss pass as an update runs it: diagnostics read once per
        epoch instead of adding work to every update. Empty before the first update."""
        batch = self.batch
        if batch is None:
            return {}
        generator = None  # CPU: IQN's taus from a copy, leaving the run's own draws untouched
        if self.generator is not None:
            generator = torch.Generator(self.device).set_state(self.generator.get_state())
        with self.fast.precision(), self.fast.autocast():
            out = online_pass(self.online, batch.obs, self.spec.agent, generator)
            terms = self._head.terms(out, batch.action, batch.target, batch.weight,
                                     batch.labels, self.spec.agent, self.support)
        diag = batch_diagnostics(terms, out, batch.action, batch.target, batch.weight,
                                 self.spec.agent.head)
        return {**diag, "priority_max": self.replay.max_priority.float()}

    def state_metrics(self) -> dict[str, Tensor]:
        """0-dim device tensors of the learner's state as it stands: `probe`'s diagnostics,
        the online network's mean |sigma| over its noisy weights, and the C51 support's ends."""
        out = self.probe()
        layers = self.online.noisy_layers()
        if layers:
            out["noisy_sigma"] = (sum(m.weight_sigma.detach().abs().sum() for m in layers)
                                  / sum(m.weight_sigma.numel() for m in layers))
        if self.support is not None:
            out["v_min"], out["v_max"] = self.support[0], self.support[-1]
        if self.clip_bound is not None:
            out["grad_clip_level"] = self.clip_bound.level().clamp(max=self.spec.agent.grad_clip)
        return out

    def read_metrics(self) -> EpochMetrics:
        """The one host read per epoch: both accumulators and `state_metrics`, then the
        accumulators restart from zero."""
        a = self.spec.agent
        state = self.state_metrics()
        n_collect, n_update = self.collect_acc.shape[1], len(UPDATE_METRICS)
        flat = torch.cat((self.collect_acc.sum(0), self.update_acc,
                          torch.stack(list(state.values())).double() if state
                          else self.update_acc[:0])).tolist()
        collect, update = flat[:n_collect], flat[n_collect:n_collect + n_update]
        self.collect_acc.zero_()
        self.update_acc.zero_()
        summary, mix = collect_summary(collect, a.n_branches, a.n_actions)
        n_up = max(update[-1], 1.0)
        upd = {k: v / n_up for k, v in zip(UPDATE_METRICS[:-1], update[:-1], strict=True)}
        upd["updates"] = update[-1]
        upd.update(zip(state, flat[n_collect + n_update:], strict=True))
        return EpochMetrics(collect=summary, action_mix=mix, update=upd)
