"""The `[agent]` section: which learner trains (`kind`), the network's shape, and the branching
Rainbow / IQN agent's loss and optimiser knobs (PQN's own are `[pqn]`: agents/pqn/config.py;
PPO's `[ppo]`: agents/ppo/config.py)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, field_validator, model_validator

from foxhunt.configbase import StrictConfig

LAYOUT_FIELDS = (
    "hidden",
    "trunk_layers",
    "atoms",
    "v_min",
    "v_max",
    "noisy",
    "noisy_trunk",
    "dueling",
    "head",
    "iqn_embedding",
    "variable_selection",
    "branches",
)
"""Fields that change the parameters or the meaning of the outputs; a checkpoint must match them."""


Kind = Literal["dqn", "pqn", "ppo"]
KINDS: tuple[str, ...] = get_args(Kind)
"""The learners a run can train (docs/training.md, "Learners: dqn, pqn and ppo")."""


class AgentConfig(StrictConfig):
    kind: Kind = Field(
        default="dqn",
        description="the learner: 'dqn' (branching Rainbow: replay, target network, C51 or IQN) "
        "'pqn' (parallel Q(lambda): no replay, no target network; its knobs are [pqn]) or "
        "'ppo' (on-policy actor-critic, GAE, clipped surrogate, MLP or LSTM; its knobs are "
        "[ppo]); all use hidden, trunk_layers and branches (the Q-learners dueling too)",
    )
    hidden: int = Field(default=256, gt=0, description="trunk and head width; unset: the profile's")
    trunk_layers: int = Field(default=2, ge=1)
    atoms: Literal[11, 21, 51] = Field(default=51, description="C51 support atoms; as hidden")
    v_min: float = Field(
        default=-10.0, description="support low end; rewards are volatility-scaled"
    )
    v_max: float = 10.0
    support: Literal["fixed", "adaptive"] = Field(
        default="fixed",
        description="C51 support: fixed at [v_min, v_max], or adaptive: each end follows the "
        "1st/99th percentile of the bootstrap targets' values (r + gamma^m E[Z]) with a slow "
        "EMA plus a margin, on the device in every update, never inside [v_min, v_max] and at "
        "most 4 widths beyond it; it restarts from [v_min, v_max] every fold",
    )
    noisy: bool = Field(default=True, description="noisy linear layers in the heads")
    noisy_trunk: bool = Field(default=False, description="noisy linear layers in the trunk too")
    sigma0: float = Field(default=0.5, gt=0)
    dueling: bool = True
    head: Literal["c51", "iqn"] = "c51"
    iqn_taus: int = Field(default=32, gt=0, description="online tau samples N (and K for acting)")
    iqn_target_taus: int = Field(default=32, gt=0, description="target tau samples N'")
    iqn_embedding: int = Field(
        default=64, gt=0, description="cosine basis size of the tau embedding"
    )
    kappa: float = Field(default=1.0, gt=0, description="quantile Huber threshold")
    aux_weight: float = Field(default=0.1, ge=0, description="weight of the direction-head loss")
    tau: float = Field(default=0.005, gt=0, le=1, description="Polyak rate of the target network")
    lr: float = Field(default=1e-4, gt=0)
    adam_eps: float = Field(default=1.5e-4, gt=0)
    grad_clip: float = Field(default=10.0, gt=0, description="gradient clip: total L2 norm")
    grad_clip_quantile: float | None = Field(
        default=None, gt=0.5, lt=1.0,
        description="self-tuning clip: also clip at this running quantile of the run's own "
        "gradient norms (e.g. 0.99; an EMA of their log-normal fit, on the device, from the "
        "50th update on), never above grad_clip; None: grad_clip alone",
    )
    weight_decay: float = Field(
        default=0.0, ge=0,
        description="decoupled weight decay (AdamW): each step also shrinks every parameter by "
        "lr * weight_decay of itself; 0: plain Adam",
    )
    input_noise: float = Field(
        default=0.5, ge=0,
        description="std of Gaussian noise added to the sampled observations' market features "
        "(normalised units; not the position state, not the bootstrap state s') in each "
        "update: a regulariser against memorising the training window's bars; 0: none",
    )
    mirror: bool = Field(
        default=True,
        description="train on each sampled transition or, with probability 1/2, its mirror "
        "(directional features negated in the normaliser's coordinates, position and long/"
        "short swapped; features.mirror): the training window's net drift cannot be learned "
        "as a side to hold",
    )
    variable_selection: bool = False
    branches: tuple[int, ...] = Field(default=(3, 3, 3), description="actions per branch")

    @field_validator("branches")
    @classmethod
    def _equal_branches(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or min(v) < 2 or len(set(v)) != 1:
            raise ValueError(
                "must be one or more equal action counts >= 2 "
                "(the heads stack into one [batch, branch, action, ...] tensor)"
            )
        return v

    @model_validator(mode="after")
    def _support_ordered(self) -> AgentConfig:
        if not self.v_min < self.v_max:
            raise ValueError(f"v_min ({self.v_min}) must be below v_max ({self.v_max})")
        if self.support == "adaptive" and self.head != "c51":
            raise ValueError('support = "adaptive" needs head = "c51" (IQN has no support)')
        return self

    @property
    def n_branches(self) -> int:
        return len(self.branches)

    @property
    def n_actions(self) -> int:
        return self.branches[0]
