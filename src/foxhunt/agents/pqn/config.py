"""Settings of PQN, the parallel Q-learner (the `[pqn]` section of the config).

The network's shape (`hidden`, `trunk_layers`, `branches`, `dueling`) is `[agent]`'s, as for
the DQN, so that a GPU profile sizes both learners alike; this section holds what only PQN has.
Defaults follow the paper's Atari settings (Gallici et al. 2025, table of hyperparameters),
scaled to our markets where the learning test said so (docs/training.md, "Learners").
"""

from __future__ import annotations

from pydantic import Field, model_validator

from foxhunt.configbase import StrictConfig


class PQNConfig(StrictConfig):
    rollout_steps: int = Field(
        default=32, ge=1,
        description="lock-step env steps per rollout; every rollout is trained on, then dropped",
    )
    update_epochs: int = Field(default=2, ge=1, description="passes over each rollout")
    minibatches: int = Field(
        default=32, ge=1,
        description="minibatches each pass splits a rollout's rollout_steps x n_envs "
        "transitions into (one gradient step each)",
    )
    gamma: float = Field(default=0.99, gt=0.0, le=1.0, description="discount per bar")
    q_lambda: float = Field(
        default=0.65, ge=0.0, le=1.0,
        description="Q(lambda): 0 is one-step Q-learning, 1 the rollout's Monte Carlo return "
        "bootstrapped at its end",
    )
    lr: float = Field(default=2.5e-4, gt=0)
    max_grad_norm: float = Field(default=10.0, gt=0, description="gradient clip: total L2 norm")
    eps_start: float = Field(default=1.0, ge=0, le=1, description="epsilon at the fold's start")
    eps_finish: float = Field(default=0.01, ge=0, le=1, description="epsilon after the decay")
    eps_decay: float = Field(
        default=0.25, gt=0, le=1,
        description="share of the fold's rollouts over which epsilon falls linearly from "
        "eps_start to eps_finish",
    )

    @model_validator(mode="after")
    def _decaying(self) -> PQNConfig:
        if self.eps_finish > self.eps_start:
            raise ValueError(f"eps_finish ({self.eps_finish}) must not exceed eps_start "
                             f"({self.eps_start})")
        return self

    def epsilon(self, rollout: int, rollouts: int) -> float:
        """Epsilon for rollout `rollout` (0-based) of a fold's `rollouts`."""
        span = max(1.0, self.eps_decay * rollouts)
        share = min(1.0, rollout / span)
        return self.eps_start + share * (self.eps_finish - self.eps_start)
