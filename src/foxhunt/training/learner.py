"""One fold's learning machinery: vectorised env, prioritised replay, online/target networks.

`collect()` takes one vectorised env step with the noisy online policy and stores it; `update()`
is one Rainbow update. Both keep every metric on the device in accumulators that the trainer
reads once per epoch, and on CUDA each is captured once as a CUDA graph and replayed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from foxhunt.agents.dqn import BranchingQNetwork, LossOutput, PolyakUpdate, c51_loss, iqn_loss
from foxhunt.devices import float32_matmul_precision
from foxhunt.env.market import MarketTensors
from foxhunt.env.vector_env import TradingVecEnv
from foxhunt.replay import PrioritizedReplay
from foxhunt.training.config import TrainingSpec
from foxhunt.training.graphs import CapturedStep, CompiledStep, check_inductor_options
from foxhunt.training.walkforward import Window

COLLECT_METRICS = ("reward", "env_steps", "flat", "trades", "terminated", "truncated")
UPDATE_METRICS = ("loss", "q_loss", "aux_loss", "mean_q", "target_q", "grad_norm", "td_p99", "updates")


def direction_labels(market: MarketTensors, bar: Tensor) -> Tensor:
    """Next-bar direction for the auxiliary head: 1 up, 0 down, -1 unchanged (ignored)."""
    move = market.close[bar + 1] - market.close[bar]
    return torch.where(move > 0, 1, torch.where(move < 0, 0, -1))


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
        self.optimizer = torch.optim.Adam(
            self.online.parameters(), lr=a.lr, eps=a.adam_eps, capturable=device.type == "cuda"
        )
        self.replay = PrioritizedReplay(
            spec.replay, t.n_envs, self.env.pos_dim, a.n_branches, device, generator=self.generator
        )
        self._loss_fn = c51_loss if a.head == "c51" else iqn_loss
        self._params = [p for p in self.online.parameters() if p.requires_grad]
        self._polyak = PolyakUpdate(self.target, self.online, a.tau)
        compile_steps = device.type == "cuda" and t.compile
        if compile_steps:
            check_inductor_options(t.compile_options, "[train] compile_options")
        opts = t.compile_options
        self._collect = CompiledStep(self._collect, compile_steps, "collect", options=opts)
        self._forward_loss = CompiledStep(self._forward_loss, compile_steps, "loss", options=opts)
        self._apply_gradients = CompiledStep(self._apply_gradients, compile_steps, "optimiser",
                                             options=opts)
        # Per env, summed over the envs only when read: a collect step then has no reduction, so
        # the compiled env step stays one wide elementwise kernel instead of a serial reduction.
        n_mix = a.n_branches * a.n_actions
        self.collect_acc = torch.zeros(t.n_envs, len(COLLECT_METRICS) + n_mix, device=device,
                                       dtype=torch.float64)
        self.update_acc = torch.zeros(len(UPDATE_METRICS), device=device, dtype=torch.float64)
        self._action_ids = torch.arange(a.n_actions, device=device)
        self._ones = torch.ones(t.n_envs, device=device, dtype=torch.float64)
        self._p99_index = int(0.99 * (t.batch_size - 1))
        self.collect = CapturedStep(self._collect, graphs)
        self.update = CapturedStep(self._update, graphs)
        self.transitions = 0

    @property
    def compiled(self) -> bool:
        """Whether every hot-path step runs compiled (False after a fall-back to eager)."""
        steps = (self._collect, self._forward_loss, self._apply_gradients)
        return all(step.compiled for step in steps)

    # -- the two hot-path steps ----------------------------------------------------------------

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast)

    def _collect(self) -> None:
        env = self.env
        bar, pos_state = env.state()
        with torch.no_grad(), self._autocast():
            self.online.reset_noise(self.generator)
            action = self.online.act(env.observe(bar, pos_state))
        r = env.step(action)
        self.replay.add(bar, pos_state, action, r.reward, r.terminated, r.truncated,
                        r.next_bar, r.next_pos_state)
        chosen = (action.unsqueeze(-1) == self._action_ids).flatten(1)  # [N, Br * A] one-hot
        self.collect_acc += torch.cat((
            torch.stack((
                r.reward.double(),
                self._ones,
                (r.position == 0).double(),
                r.trades_closed.double(),
                r.terminated.double(),
                r.truncated.double(),
            ), dim=1),
            chosen.double(),
        ), dim=1)

    def _forward_loss(self) -> tuple[Tensor, LossOutput]:
        """PER sample, observations re-gathered for it, fresh noise in both networks, the loss.
        Returns (sampled flat indices, loss output); compiled, its backward is compiled too."""
        b, env = self.replay.sample(self.spec.train.batch_size), self.env
        self.online.reset_noise(self.generator)
        self.target.reset_noise(self.generator)
        with self._autocast():
            out = self._loss_fn(
                self.online, self.target, env.observe(b.bar, b.pos_state), b.action, b.ret,
                b.discount, env.observe(b.next_bar, b.next_pos_state), b.weight,
                direction_labels(self.market, b.bar), self.spec.agent,
            )
        return b.index, out

    def _apply_gradients(self, index: Tensor, td_abs: Tensor, metrics: dict[str, Tensor],
                         grad_norm: Tensor) -> None:
        """Adam, Polyak, new priorities and the metric accumulators, after backward and clip."""
        self.optimizer.step()
        self._polyak()
        self.replay.update_priorities(index, td_abs)
        self.update_acc += torch.stack((
            metrics["loss"], metrics["q_loss"], metrics["aux_loss"], metrics["mean_q"],
            metrics["target_q"], grad_norm, td_abs.float().sort().values[self._p99_index],
            torch.ones((), device=self.device),
        )).double()  # fmt: skip

    def _update(self) -> None:
        index, out = self._forward_loss()
        self.optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        # Eager on purpose: foreach clipping is a handful of multi-tensor kernels, where the
        # compiled version launches one reduction per parameter tensor.
        grad_norm = torch.nn.utils.clip_grad_norm_(self._params, self.spec.agent.grad_clip,
                                                   foreach=True)
        self._apply_gradients(index, out.td_abs, out.metrics, grad_norm)

    # -- epoch-level driving (host side, no device reads) -----------------------------------

    def run_collect(self, steps: int) -> None:
        with float32_matmul_precision(self.spec.train.matmul_precision):
            for _ in range(steps):
                self.collect()
        self.transitions += steps * self.env.n_envs

    def ready_to_learn(self) -> bool:
        return self.transitions >= max(self.spec.train.learning_starts, self.spec.train.batch_size)

    def run_updates(self, n: int) -> None:
        self.online.train()
        with float32_matmul_precision(self.spec.train.matmul_precision):
            for _ in range(n):
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
