"""Replay settings (the `[replay]` section of the config)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from foxhunt.configbase import StrictConfig


class ReplayConfig(StrictConfig):
    capacity: int = Field(default=100_000, gt=0)
    """Transitions held; rounded down to a multiple of the number of envs."""
    alpha: float = Field(default=0.5, ge=0.0, le=1.0)
    """Prioritisation strength: P(i) ~ (|delta_i| + eps)^alpha; 0 is uniform sampling."""
    beta0: float = Field(default=0.4, ge=0.0, le=1.0)
    """Importance-sampling exponent at the first sample() call."""
    beta_anneal_steps: int = Field(default=100_000, ge=0)
    """sample() calls over which beta rises linearly from beta0 to 1 (0: beta is 1 at once)."""
    n_step: int = Field(default=16, ge=1, description="bars of reward summed before bootstrapping")
    n_step_sampling: Literal["fixed", "uniform"] = "fixed"
    """`fixed`: every target sums n_step rewards; `uniform`: each sampled transition sums m ~
    U{1..n_step} of them, a sample of the compound target that averages the 1- to n-step
    returns (Sutton & Barto 2018, section 12.1): short horizons' low variance beside long
    horizons' reach."""
    gamma: float = Field(default=0.99, gt=0.0, le=1.0)
    priority_eps: float = Field(default=1e-6, gt=0.0)
    state_dtype: Literal["float16", "float32"] = "float16"
    """Storage dtype of pos_state/next_pos_state; float16 keeps 1M transitions under 64 MB."""
