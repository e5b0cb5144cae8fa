"""The learner interface the walk-forward trainer drives, and the learners behind `[agent] kind`.

A fold's learner is two objects, as the DQN has always been: a `FoldLearner` holds the fold's
state (envs, networks, optimiser, the metrics accumulated on the device) and states what its
steps compute; its `FoldSteps` runs an epoch of them on the device (for the DQN compiled and
captured as CUDA graphs, `compiled.CompiledSteps`). The trainer asks no more of either than
these protocols say: it never reaches into a replay, a target network or a rollout, so a new
learner is a new pair and a line in `start_learner`.

| kind | learner | steps | policy network (`checkpoint.POLICY_NETWORKS`) |
|---|---|---|---|
| dqn | `learner.Learner` | `compiled.CompiledSteps` | `agents.dqn.BranchingQNetwork` |
| pqn | `pqn.PQNLearner` | `pqn.PQNSteps` | `agents.pqn.QNetwork` |
| ppo | `ppo.PPOLearner` | `ppo.PPOSteps` | `agents.ppo.ActorCritic` |
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch
from torch import nn

from foxhunt.env.market import MarketTensors
from foxhunt.features.mirror import FeatureMirror
from foxhunt.training.compiled import CompiledSteps
from foxhunt.training.config import FoldBudget, TrainingSpec
from foxhunt.training.learner import EpochMetrics, Learner
from foxhunt.training.ppo import PPOLearner, PPOSteps
from foxhunt.training.pqn import PQNLearner, PQNSteps
from foxhunt.training.walkforward import Window

Timer = Callable[[str], AbstractContextManager[None]]
"""`timer(phase)` times what runs inside it as one of the trainer's phases (`trainer.PHASES`:
"experience" or "updates")."""


class FoldLearner(Protocol):
    """One fold's learning state, built fresh for every fold (`fold_state.FOLD_BOUNDARY`)."""

    online: nn.Module  # the network trained; its weights are the resume point's
    transitions: int  # env transitions collected so far in the fold

    @property
    def policy_net(self) -> nn.Module:
        """What the fold validates, tests and deploys; `act(obs)` is its greedy action."""
        ...

    def read_metrics(self) -> EpochMetrics:
        """The epoch's metrics, read from the device once; the accumulators restart."""
        ...

    def resume_state(self) -> dict[str, Any]:
        """Everything but `online`'s weights that a resumed fold needs (CPU tensors)."""
        ...

    def restore(self, state: dict[str, Any]) -> None:
        """Take back `resume_state()` (with `online`'s weights already loaded)."""
        ...


class FoldSteps(Protocol):
    """What runs a fold learner's steps on its device."""

    learner: FoldLearner

    @property
    def compiled(self) -> bool:
        """Whether its steps run compiled (timings.jsonl says so)."""
        ...

    @property
    def captured(self) -> bool:
        """Whether its updates replay captured CUDA graphs."""
        ...

    def train_epoch(self, budget: FoldBudget, epoch: int, timer: Timer) -> None:
        """Epoch `epoch`'s share of the fold's `budget`: collecting under `timer("experience")`,
        updating under `timer("updates")`."""
        ...


def start_learner(spec: TrainingSpec, market: MarketTensors, window: Window,
                  feature_groups: dict[str, list[int]] | None, device: torch.device, seed: int,
                  mirror: FeatureMirror | None) -> tuple[FoldLearner, FoldSteps]:
    """The fold's learner of `[agent] kind` on its training market, and what runs it."""
    if spec.agent.kind == "pqn":
        pqn = PQNLearner(spec, market, window, device, seed)
        return pqn, PQNSteps(pqn)
    if spec.agent.kind == "ppo":
        ppo = PPOLearner(spec, market, window, device, seed)
        return ppo, PPOSteps(ppo)
    dqn = Learner(spec, market, window, feature_groups, device, seed, mirror)
    return dqn, CompiledSteps(dqn)
