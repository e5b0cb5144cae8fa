"""How fast a learner's steps run: compiled, captured as CUDA graphs, side by side on CUDA
streams, under bf16 autocast (`[train.performance]`). Nothing here decides what is computed,
only in what precision: bf16 autocast and TF32 matmuls round differently from float32.

The learner (`training.learner`) states its work as steps that take and return plain tensors:
a collect step is `act`, `env_step`, `store` (and `draw_act_noise` for the next one); an update
is `loss`, `backward`, `reprioritise`, `stage_next`, `adopt`, `apply_gradients` (and
`draw_next_noise`). `training.compiled.CompiledSteps` compiles the steps; the schedules here
order the independent ones on side streams, and `captured` records runs of them as CUDA graphs.
On the CPU they run eagerly, in program order, in float32: the same calls in the same order, so
one seed reproduces a CPU run exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple, Protocol

import torch
from torch import Tensor

from foxhunt.agents.dqn.losses import LossOutput
from foxhunt.devices import float32_matmul_precision
from foxhunt.env.market import MarketTensors
from foxhunt.training.config import PerformanceConfig
from foxhunt.training.graphs import CapturedStep, SideStreams

INDUCTOR_OPTIONS = {"combo_kernels": True}
"""Inductor options of every compiled step: combo kernels fuse an update's many small kernels
horizontally (measured in docs/benchmarks-archive.md)."""


class StagedBatch(NamedTuple):
    """A replay batch and its double-DQN bootstrap target, staged one update ahead."""

    index: Tensor  # [B] flat replay indices, for the new priorities
    weight: Tensor  # [B] IS weights
    action: Tensor  # [B, Br] taken actions
    obs: Tensor  # [B, obs_dim] at s
    labels: Tensor  # [B] next-bar direction labels
    target: Tensor  # [B, Br, K] the target network's value of a* at s', shifted and projected


class CollectSteps(Protocol):
    def act(self) -> tuple[Tensor, Tensor, Tensor]: ...
    def draw_act_noise(self) -> None: ...
    def env_step(self, bar: Tensor, pos_state: Tensor, action: Tensor) -> tuple[Tensor, ...]: ...
    def store(self, *step: Tensor) -> None: ...


class UpdateSteps(Protocol):
    batch: StagedBatch | None

    def loss(self, batch: StagedBatch) -> LossOutput: ...
    def backward(self, loss: Tensor) -> None: ...
    def draw_next_noise(self) -> None: ...
    def reprioritise(self, index: Tensor, td_abs: Tensor) -> None: ...
    def stage_next(self) -> StagedBatch: ...
    def adopt(self, *staged: Tensor) -> None: ...
    def apply_gradients(self, metrics: dict[str, Tensor]) -> None: ...


class HotPath:
    """The performance settings resolved for one device, and the schedules of a collect step
    and an update on it."""

    def __init__(self, config: PerformanceConfig, device: torch.device):
        cuda = device.type == "cuda"
        self.device = device
        self.compile = cuda and config.compiles_updates
        self.compile_collect = cuda and config.compiles_everything
        self.graphs = cuda and config.cuda_graphs
        self.bf16 = cuda and config.autocast == "bf16"
        self.matmul_precision = "high" if cuda and config.autocast != "off" else "highest"
        self.collect_block = config.collect_steps_per_graph if self.graphs else 1
        self.update_block = config.updates_per_graph if self.graphs else 1
        self.streams = SideStreams(device, 2, enabled=config.side_streams)

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype the training passes' matmuls run in (working weights are kept in it)."""
        return torch.bfloat16 if self.bf16 else torch.float32

    def autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def precision(self) -> Any:
        """The float32 matmul precision of the training steps (a context manager)."""
        return float32_matmul_precision(self.matmul_precision)

    def market(self, market: MarketTensors) -> MarketTensors:
        """The market on the device; under bf16 autocast its features stored in bf16 (autocast
        rounds them to bf16 before the first matmul anyway, and a gather then reads half the
        bytes)."""
        market = market.to(self.device)
        if self.bf16:
            market = replace(market, features=market.features.to(torch.bfloat16))
        return market

    def captured(self, fn: Callable[[], None]) -> CapturedStep:
        """`fn` captured as a CUDA graph after its warm-up calls and replayed from then on (run
        eagerly when graphs are off)."""
        return CapturedStep(fn, self.graphs)

    @staticmethod
    def repeat(single: Callable[[], None], block: Callable[[], None], size: int, n: int) -> None:
        """n steps: whole blocks of `size` (one graph launch each), then single steps."""
        blocks, rest = divmod(n, size)
        for _ in range(blocks):
            (block if size > 1 else single)()
        for _ in range(rest):
            single()

    # -- schedules ---------------------------------------------------------------------------

    def collect(self, s: CollectSteps, n: int) -> None:
        """n collect steps. Each acts with the noise composed before it and draws the next
        step's on branch 1, beside its env step; its replay write and metric sums run on
        branch 0, beside the next step's policy pass."""
        side, pending = self.streams, []
        for _ in range(n):
            acted = s.act()
            with side.branch(1):  # after the policy pass, which reads the current noise
                s.draw_act_noise()
            step = s.env_step(*acted)
            pending.append(step)  # referenced until the join (see SideStreams)
            with side.branch(0):
                s.store(*step)
            side.join(1)
        side.join()

    def update(self, s: UpdateSteps) -> None:
        """One update on `s.batch`, staging the next. The independent chains run side by side
        (inline, in this order, off CUDA):

            main      loss ─ backward ─────────────┬───────┬ clip, Adam, next weights ┐
            branch 0   └ next noise, new priorities ┴ adopt │                          │
            branch 1  Polyak, next batch, a*, target ───────┘                          │
                      (the update ends when all three have) ───────────────────────────┘

        Branch 0's priorities wait for branch 1's draw of the next batch (they would change
        it), and `adopt` waits for backward (which reads this batch)."""
        batch = s.batch
        if batch is None:
            raise RuntimeError("CompiledSteps.update() before prime(): stage the first batch of "
                               "a run of updates with prime() (run_updates does)")
        side = self.streams
        start = side.mark()
        loss = s.loss(batch)
        with side.branch(1, after=start):  # queued after the loss pass: a graph launches it first
            staged = s.stage_next()
        with side.branch(0):
            s.draw_next_noise()
            side.wait(0, 1)
            s.reprioritise(batch.index, loss.td_abs)
        s.backward(loss.loss)
        side.join(0)
        with side.branch(0):
            s.adopt(*staged)
        side.join(1)  # Adam writes the weights that Polyak and a* read
        s.apply_gradients(loss.metrics)
        side.join()
