"""One fold's learning machinery: vectorised env, prioritised replay, online/target networks.

`run_collect(n)` takes n vectorised env steps with the noisy online policy and stores them,
through `collect()` (one step) and `collect_block()` (k of them); each step draws the next one's
noise, and `act_noise()` the first's. `update()` is one Rainbow update on the batch the previous one
staged with its bootstrap target (`prime()` stages the first of a run: `run_updates` does;
`update_block()` k of them).
They keep every metric on the device in accumulators that the trainer reads once per epoch,
and on CUDA each is captured once as a CUDA graph and replayed, its pieces compiled
(`COMPILED_STEPS`) and the independent ones run on side streams (`Learner._update`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch
from torch import Tensor

from foxhunt.agents.dqn import BranchingQNetwork, LossOutput, PolyakUpdate
from foxhunt.agents.dqn.losses import (
    HEADS,
    greedy_next_actions,
    online_pass,
    take_action,
    target_distributions,
)
from foxhunt.agents.dqn.twin import TwinPass
from foxhunt.devices import float32_matmul_precision
from foxhunt.env.market import MarketTensors
from foxhunt.env.vector_env import TradingVecEnv
from foxhunt.replay import PrioritizedReplay
from foxhunt.training.config import TrainingSpec
from foxhunt.training.graphs import CapturedStep, CompiledStep, SideStreams, check_inductor_options
from foxhunt.training.optim import ClippedAdam
from foxhunt.training.walkforward import Window

COLLECT_METRICS = ("reward", "env_steps", "flat", "trades", "terminated", "truncated")
UPDATE_METRICS = ("loss", "q_loss", "aux_loss", "mean_q", "target_q", "grad_norm", "td_p99", "updates")
COMPILED_STEPS = (
    "_act", "_draw_act_noise", "_env_step", "_store", "_loss", "_draw_next_noise",
    "_reprioritise", "_track_online", "_stage", "_stage_targets", "_adopt", "_apply_gradients",
)
"""The Learner methods that run through `torch.compile` on CUDA (each one a `CompiledStep`)."""


def direction_labels(market: MarketTensors, bar: Tensor) -> Tensor:
    """Next-bar direction for the auxiliary head: 1 up, 0 down, -1 unchanged (ignored)."""
    move = market.close[bar + 1] - market.close[bar]
    return torch.where(move > 0, 1, torch.where(move < 0, 0, -1))


class StagedBatch(NamedTuple):
    """A replay batch and its double-DQN bootstrap target, drawn and computed one update ahead
    (see `Learner._update`)."""

    index: Tensor  # [B] flat replay indices, for the new priorities
    weight: Tensor  # [B] IS weights
    action: Tensor  # [B, Br] taken actions
    obs: Tensor  # [B, obs_dim] at s
    labels: Tensor  # [B] next-bar direction labels
    target: Tensor  # [B, Br, K] the target network's value of a* at s', shifted and projected


@dataclass
class EpochMetrics:
    collect: dict[str, float]
    action_mix: list[list[float]]
    update: dict[str, float]


class Learner:
    """Built fresh for every fold (see `fold_state.FOLD_BOUNDARY`); `seed` is the fold's seed."""

    def __init__(
        self,
        spec: TrainingSpec,
        market: MarketTensors,
        train_window: Window,
        feature_groups: dict[str, list[int]] | None,
        device: torch.device,
        seed: int,
    ):
        t, a = spec.train, spec.agent
        # bf16 autocast for the network passes; CUDA only (CPU runs stay float32 and exact).
        self.autocast = device.type == "cuda" and t.autocast == "bf16"
        if self.autocast:
            # Autocast rounds observations to bf16 before the first matmul anyway; storing the
            # features in bf16 gives the same numbers and halves the bytes each gather reads.
            market = market.to(device)
            market = replace(market, features=market.features.to(torch.bfloat16))
        self.spec, self.market, self.device = spec, market, device
        graphs = device.type == "cuda" and t.cuda_graphs
        # CPU: explicit generators make a run reproducible. CUDA: graphs need the default
        # generator, which is seeded here and forked nowhere else.
        self.generator: torch.Generator | None = None
        if device.type == "cpu":
            self.generator = torch.Generator(device=device).manual_seed(seed)
        else:
            torch.cuda.manual_seed(seed)
        self.env = TradingVecEnv(
            market, spec.env, n_envs=t.n_envs, device=device, generator=self.generator,
            start_range=(train_window.start, train_window.stop),
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.online = BranchingQNetwork(
                self.env.obs_dim, a, feature_groups, spec.env.window, self.env.pos_dim
            ).to(device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        # The noisy layers' weights, composed ahead in the dtype the passes compute in (see
        # `_apply_gradients`).
        for net in (self.online, self.target):
            net.use_working_weights(torch.bfloat16 if self.autocast else torch.float32)
        # With the twin pass the staging reads both networks' paired working weights, so it
        # must not also write the target's half: `_track_online` draws the target's noise
        # instead (see `twin`).
        self._twin = TwinPass(self.online, self.target) if t.twin_target_pass else None
        self.optimizer = ClippedAdam(self.online.parameters(), lr=a.lr, eps=a.adam_eps,
                                     max_norm=a.grad_clip)
        self.replay = PrioritizedReplay(
            spec.replay, t.n_envs, self.env.pos_dim, a.n_branches, device, generator=self.generator
        )
        self._head = HEADS[a.head]
        self._support = self.online.support if a.head == "c51" else None
        self._polyak = PolyakUpdate(self.target, self.online, a.tau)
        self._streams = SideStreams(device, 2, enabled=t.side_streams, first=t.side_streams_first)
        compile_steps = device.type == "cuda" and t.compile
        if compile_steps:
            check_inductor_options(t.compile_options, "[train] compile_options")
        for name in COMPILED_STEPS:
            step = CompiledStep(getattr(self, name), compile_steps, name.lstrip("_"),
                                options=t.compile_options)
            setattr(self, name, step)
        # Per env, summed over the envs only when read: a collect step then has no reduction, so
        # the compiled env step stays one wide elementwise kernel instead of a serial reduction.
        n_mix = a.n_branches * a.n_actions
        self.collect_acc = torch.zeros(t.n_envs, len(COLLECT_METRICS) + n_mix, device=device,
                                       dtype=torch.float64)
        self.update_acc = torch.zeros(len(UPDATE_METRICS), device=device, dtype=torch.float64)
        self._action_ids = torch.arange(a.n_actions, device=device)
        self._ones = torch.ones(t.n_envs, device=device, dtype=torch.float64)
        self._p99_index = int(0.99 * (t.batch_size - 1))
        self.act_noise = CapturedStep(self._draw_act_noise, graphs)
        self.collect = CapturedStep(lambda: self._collect_steps(1), graphs)
        # k collect steps per graph replay: one launch instead of k (the last steps of an epoch
        # that do not fill a block replay the one-step graph).
        self._block = t.collect_steps_per_graph if graphs else 1
        self.collect_block = CapturedStep(lambda: self._collect_steps(self._block),
                                          graphs and self._block > 1)
        self.update = CapturedStep(self._update, graphs)
        # k updates per graph replay, as for collect (the last ones of a run of updates that do
        # not fill a block replay the one-update graph).
        self._update_block = t.updates_per_graph if graphs else 1
        self.update_block = CapturedStep(self._updates, graphs and self._update_block > 1)
        self.batch: StagedBatch | None = None  # the next update's batch (see `prime`)
        self.transitions = 0

    @property
    def compiled(self) -> bool:
        """Whether every hot-path step runs compiled (False after a fall-back to eager)."""
        return all(getattr(self, name).compiled for name in COMPILED_STEPS)

    # -- the two hot-path steps ----------------------------------------------------------------

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast)

    def _collect_steps(self, n: int) -> None:
        """n env steps. Each step acts with the noise composed before it (by the step before, or
        by `run_collect` for the first) and draws the next step's on a side stream, beside its
        env step: the noise's draw and composition stay off the path from one policy pass to the
        next. Each step's replay write and metric sums run on another, beside the next step's
        policy pass."""
        side, pending = self._streams, []
        for _ in range(n):
            acted = self._act()
            with side.branch(1):  # after the policy pass, which reads the current noise
                self._draw_act_noise()
            step = self._env_step(*acted)
            pending.append(step)  # referenced until the join (see SideStreams)
            with side.branch(0):
                self._store(*step)
            side.join(1)
        side.join()

    def _act(self) -> tuple[Tensor, Tensor, Tensor]:
        """The env's state and the noisy online policy's action in it."""
        bar, pos_state = self.env.state()
        with torch.no_grad(), self._autocast():
            action = self.online.act(self.env.observe(bar, pos_state), self.generator)
        return bar, pos_state, action

    def _draw_act_noise(self) -> None:
        """Fresh noise for the next policy pass, composed into the online working weights."""
        self.online.reset_noise(self.generator)

    def _env_step(self, bar: Tensor, pos_state: Tensor, action: Tensor) -> tuple[Tensor, ...]:
        """The env step; returns what `_store` records (plain tensors: compiled steps hand
        tensors, not objects, to each other)."""
        r = self.env.step(action)
        return (bar, pos_state, action, r.reward, r.terminated, r.truncated, r.next_bar,
                r.next_pos_state, r.position, r.trades_closed)

    def _store(self, bar: Tensor, pos_state: Tensor, action: Tensor, reward: Tensor,
               terminated: Tensor, truncated: Tensor, next_bar: Tensor, next_pos_state: Tensor,
               position: Tensor, trades_closed: Tensor) -> None:
        self.replay.add(bar, pos_state, action, reward, terminated, truncated, next_bar,
                        next_pos_state)
        chosen = (action.unsqueeze(-1) == self._action_ids).flatten(1)  # [N, Br * A] one-hot
        self.collect_acc += torch.cat((
            torch.stack((
                reward.double(),
                self._ones,
                (position == 0).double(),
                trades_closed.double(),
                terminated.double(),
                truncated.double(),
            ), dim=1),
            chosen.double(),
        ), dim=1)

    def _update(self) -> None:
        """One Rainbow update on `self.batch`, which the previous update staged; it stages the
        next. The independent chains run side by side (inline, in this order, on the CPU):

            main      loss ─ backward ─────────────┬───────┬ clip, Adam, next weights ┐
            branch 0   └ next noise, new priorities ┴ adopt │                          │
            branch 1  Polyak, next batch, a*, target ───────┘                          │
                      (the update ends when all three have) ───────────────────────────┘

        (branch 0's new priorities also wait for branch 1's next batch: see below.)

        Everything the next update needs but its loss pass moves one update ahead, beside this
        update's passes:
        - the next batch, drawn from the priorities as they stand when this update starts (this
          batch's new priorities are written after it is drawn: its transitions keep their old
          priority for one more draw, out of a replay of up to millions);
        - its bootstrap target: a* at s' picked by the online network with the weights and the
          noise this update runs with, valued by the target network after Polyak has moved it
          toward those same weights. Both see online weights one gradient step older than the
          textbook's (a* directly, the target through Polyak's tau share), a lag far below the
          target network's own of about 1 / tau updates.
        The update's critical path is then one pass at s, its loss, backward and Adam.
        """
        batch = self.batch
        if batch is None:
            raise RuntimeError("Learner.update() before prime(): stage the first batch of a run "
                               "of updates with prime() (run_updates does)")
        side = self._streams
        start = side.mark()
        loss = self._loss(batch)
        # Queued after the loss pass, so that a graph launches that first.
        with side.branch(1, after=start):
            self._track_online()
            staged = self._next_batch()
        with side.branch(0):
            self._draw_next_noise()
            # After the next batch is staged: these priorities change its draw, and `_adopt`
            # (next on this branch) copies it.
            side.wait(0, 1)
            td_p99 = self._reprioritise(batch.index, loss.td_abs)
        self.online.zero_grad(set_to_none=True)
        loss.loss.backward()
        side.join(0)  # the TD p99, long done
        with side.branch(0):  # after backward, which reads this batch
            self._adopt(*staged)
        side.join(1)  # Adam writes the weights (and working weights) Polyak and a* read
        self._apply_gradients(loss.metrics, td_p99)
        side.join()

    def _updates(self) -> None:
        for _ in range(self._update_block):
            self._update()

    def prime(self) -> None:
        """Stage the first batch of a run of updates (`run_updates` does; call it before calling
        `update()` directly). A batch staged before a collect phase is stale, so every run of
        updates starts with a fresh one."""
        with float32_matmul_precision(self.spec.train.matmul_precision):
            for net in (self.online, self.target):  # the weights may have been loaded since
                net.compose_working_weights()
            if self._twin is not None:
                self.target.reset_noise(self.generator)
            staged = self._next_batch()
            if self.batch is None:
                self.batch = StagedBatch(*(torch.empty_like(t) for t in staged))
            self._adopt(*staged)
            self.online.reset_noise(self.generator)  # the first update's noise

    # The compiled pieces of an update, in the order `_update` runs them.

    def _loss(self, batch: StagedBatch) -> LossOutput:
        """The online network at s against the staged target: the loss, per-sample TD errors
        and metrics."""
        with self._autocast():
            out = online_pass(self.online, batch.obs, self.spec.agent, self.generator)
            return self._head.terms(out, batch.action, batch.target, batch.weight, batch.labels,
                                    self.spec.agent, self._support)

    def _draw_next_noise(self) -> None:
        """The next update's online noise, drawn ahead (`BranchingQNetwork.draw_noise_ahead`);
        the optimiser step takes it."""
        self.online.draw_noise_ahead(self.generator)

    def _track_online(self) -> None:
        """Polyak: target <- (1 - tau) target + tau online, and the target's plain layers'
        working weights (its noisy layers' are composed with their fresh noise in `_stage`, or
        here with the twin pass)."""
        self._polyak()
        self.target.compose_working_weights("plain")
        if self._twin is not None:
            self.target.reset_noise(self.generator)

    def _reprioritise(self, index: Tensor, td_abs: Tensor) -> Tensor:
        """New priorities for the sampled transitions; returns the batch's TD-error p99."""
        self.replay.update_priorities(index, td_abs)
        return td_abs.float().sort().values[self._p99_index]

    def _next_batch(self) -> StagedBatch:
        fields, bootstrap = self._stage()
        return StagedBatch(*fields, self._stage_targets(*bootstrap))

    def _stage(self) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
        """The next PER batch (StagedBatch's fields but the target), its observations at s
        re-gathered, direction labels; and the operands of its target (`Head.target_operands`):
        the target network's distributions (fresh noise) of the online network's a* at s', with
        the batch's n-step returns and discounts."""
        b, env, agent = self.replay.sample(self.spec.train.batch_size), self.env, self.spec.agent
        # Both observations in one gather (one kernel, not two).
        obs, next_obs = env.observe(torch.cat((b.bar, b.next_bar)),
                                    torch.cat((b.pos_state, b.next_pos_state))).chunk(2)
        if self._twin is None:
            self.target.reset_noise(self.generator)
        with self._autocast():
            if self._twin is not None:
                log_probs = self._twin.log_probs(next_obs)  # [online, target]
                a_star = self.online.expected_q(log_probs[0]).argmax(dim=-1)
                chosen = take_action(log_probs[1], a_star)
            else:
                next_dist = target_distributions(self.target, next_obs, agent, self.generator)
                chosen = take_action(next_dist,
                                     greedy_next_actions(self.online, next_obs, self.generator))
        fields = (b.index, b.weight, b.action, obs, direction_labels(self.market, b.bar))
        return fields, self._head.target_operands(chosen, b.ret, b.discount, self._support)

    def _stage_targets(self, *operands: Tensor) -> Tensor:
        """a*'s bootstrap target, a step of its own (see `Head`)."""
        return self._head.targets(*operands)

    def _adopt(self, *staged: Tensor) -> None:
        """The staged batch becomes `self.batch` (copied: an update's graph reads fixed
        addresses)."""
        for dst, src in zip(self.batch, staged, strict=True):
            dst.copy_(src)

    def _apply_gradients(self, metrics: dict[str, Tensor], td_p99: Tensor) -> None:
        """Adam on the gradients clipped to grad_clip in total norm (`ClippedAdam`: one pass),
        the next update's online noise and working weights, and the update's metrics summed.

        The loss pass computed with the noisy layers' working weights (mu + sigma * eps in the
        pass's dtype), so their gradients arrive there; the masters' are derived from them with
        this update's noise before the next one (drawn beside backward by `_draw_next_noise`)
        takes its place. Composing the next working weights here,
        in the optimiser's own pass over the parameters, saves the update's loss pass and its
        a* pass a read of every noisy mu and sigma, and its backward pass the write of their
        gradients."""
        grads = self.online.gradients()
        self.online.take_noise_ahead()
        grad_norm = self.optimizer.step(grads=grads)
        self.online.compose_working_weights()
        self.update_acc += torch.stack((
            metrics["loss"], metrics["q_loss"], metrics["aux_loss"], metrics["mean_q"],
            metrics["target_q"], grad_norm, td_p99, torch.ones((), device=self.device),
        )).double()  # fmt: skip

    # -- epoch-level driving (host side, no device reads) -----------------------------------

    def run_collect(self, steps: int) -> None:
        """`steps` env steps with the noisy online policy, fresh noise for each (the first
        step's drawn here: the weights have changed since the last collect step)."""
        blocks, rest = divmod(steps, self._block)
        with float32_matmul_precision(self.spec.train.matmul_precision):
            self.act_noise()
            step = self.collect_block if self._block > 1 else self.collect
            for _ in range(blocks):
                step()
            for _ in range(rest):
                self.collect()
        self.transitions += steps * self.env.n_envs

    def ready_to_learn(self) -> bool:
        return self.transitions >= max(self.spec.train.learning_starts, self.spec.train.batch_size)

    def run_updates(self, n: int) -> None:
        self.online.train()
        self.prime()
        blocks, rest = divmod(n, self._update_block)
        with float32_matmul_precision(self.spec.train.matmul_precision):
            step = self.update_block if self._update_block > 1 else self.update
            for _ in range(blocks):
                step()
            for _ in range(rest):
                self.update()

    def read_metrics(self) -> EpochMetrics:
        """The one host read per epoch: both accumulators, then they restart from zero."""
        a = self.spec.agent
        collect, update = (x.tolist() for x in (self.collect_acc.sum(0), self.update_acc))
        self.collect_acc.zero_()
        self.update_acc.zero_()
        base = dict(zip(COLLECT_METRICS, collect))
        steps = max(base["env_steps"], 1.0)
        counts = collect[len(COLLECT_METRICS):]
        mix = [[c / steps for c in counts[i * a.n_actions:(i + 1) * a.n_actions]]
               for i in range(a.n_branches)]
        n_up = max(update[-1], 1.0)
        upd = {k: v / n_up for k, v in zip(UPDATE_METRICS[:-1], update[:-1])}
        upd["updates"] = update[-1]
        return EpochMetrics(
            collect={"mean_reward": base["reward"] / steps, "flat": base["flat"] / steps,
                     "trades": base["trades"], "terminated": base["terminated"],
                     "truncated": base["truncated"], "env_steps": base["env_steps"]},
            action_mix=mix,
            update=upd,
        )
