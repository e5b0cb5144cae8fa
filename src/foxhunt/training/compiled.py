"""A learner's steps as they run on its device: the learner's steps in, compiled steps out.

`training.learner.Learner` states what each step of a collect and an update computes, as plain
methods that are never replaced. `CompiledSteps` is what runs them: each step compiled on its
own (`CompiledStep`: inductor on CUDA, eager elsewhere or after a compiler failure), the
schedules of `HotPath` (side streams) calling those compiled steps, and runs of them captured
as CUDA graphs. The trainer holds one per fold beside its learner.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch

from foxhunt.training.config import FoldBudget
from foxhunt.training.graphs import CompiledStep
from foxhunt.training.hotpath import INDUCTOR_OPTIONS, StagedBatch
from foxhunt.training.learner import Learner


class CompiledSteps:
    """`learner`'s `Learner.STEPS` compiled, and the collect steps and updates built from them
    (single ones, and blocks of `[train.performance]`'s sizes captured as one graph each).
    `compiler` (tests) compiles every step with it, on any device, in place of inductor."""

    def __init__(self, learner: Learner, compiler: Callable[..., Callable] | None = None):
        self.learner = learner
        fast = self.fast = learner.fast
        for name in Learner.STEPS:
            wanted = fast.compile_collect if name in Learner.COLLECT_STEPS else fast.compile
            setattr(self, name, CompiledStep(getattr(learner, name), wanted or bool(compiler),
                                             name, compiler, INDUCTOR_OPTIONS))
        self._compiling = tuple(n for n in Learner.STEPS if getattr(self, n).compiled)
        self.backward = learner.backward
        self.act_noise = fast.captured(self.draw_act_noise)
        self.collect = fast.captured(lambda: fast.collect(self, 1))
        self.collect_block = fast.captured(lambda: fast.collect(self, fast.collect_block))
        self.update = fast.captured(lambda: fast.update(self))
        self.update_block = fast.captured(self._updates)

    @property
    def batch(self) -> StagedBatch | None:
        """The next update's batch (staged by `prime`, then by every update)."""
        return self.learner.batch

    @property
    def compiled(self) -> bool:
        """Whether the steps meant to compile run compiled (False after a fall-back to eager,
        and where none was meant to)."""
        return bool(self._compiling) and all(getattr(self, n).compiled for n in self._compiling)

    @property
    def captured(self) -> bool:
        """Whether the updates run as replays of a captured CUDA graph."""
        return self.update.captured or self.update_block.captured

    def stage_next(self, polyak: bool = True) -> StagedBatch:
        """Polyak's step of the target network, then the next batch and its bootstrap target."""
        if polyak:
            self.track_online()
        fields, bootstrap = self.stage()
        return StagedBatch(*fields, self.stage_targets(*bootstrap))

    def prime(self) -> None:
        """Draw the first update's online noise and stage its batch, so that the first update
        is `reference_update` exactly (`run_updates` calls it; call it before `update()`). A
        batch staged before a collect phase would be stale: every run of updates starts here."""
        learner = self.learner
        with self.fast.precision():
            for net in (learner.online, learner.target):  # the weights may have been loaded
                net.compose_working_weights()
            learner.online.reset_noise(learner.generator)
            staged = self.stage_next(polyak=False)
            if learner.batch is None:
                learner.batch = StagedBatch(*(torch.empty_like(t) for t in staged))
            self.adopt(*staged)

    def _updates(self) -> None:
        for _ in range(self.fast.update_block):
            self.fast.update(self)

    def train_epoch(self, budget: FoldBudget, epoch: int,
                    timer: Callable[[str], AbstractContextManager[None]]) -> None:
        """Epoch `epoch` of the fold's `budget`: its collect steps, or more where the replay
        holds fewer transitions than the first update needs (a resumed fold refills it), then
        its updates once the replay is ready (`learning_starts`)."""
        learner, train = self.learner, self.learner.spec.train
        short = max(train.learning_starts, train.batch_size) - learner.transitions
        steps = max(budget.collect_steps[epoch], -(-short // learner.env.n_envs))
        with timer("experience"):
            self.run_collect(steps)
        with timer("updates"):
            if learner.ready_to_learn():
                self.run_updates(budget.updates[epoch])

    def run_collect(self, steps: int) -> None:
        """`steps` env steps with the noisy online policy, fresh noise for each (the first
        step's drawn here: the weights have changed since the last collect step)."""
        fast = self.fast
        with fast.precision():
            self.act_noise()
            fast.repeat(self.collect, self.collect_block, fast.collect_block, steps)
        self.learner.transitions += steps * self.learner.env.n_envs

    def run_updates(self, n: int) -> None:
        fast = self.fast
        self.learner.online.train()
        self.prime()
        with fast.precision():
            fast.repeat(self.update, self.update_block, fast.update_block, n)
