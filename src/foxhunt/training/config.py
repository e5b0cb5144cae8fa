"""Training settings (`[train]`) and the bundle of sections one training run needs.

Sizes that depend on the hardware (batch, atoms, replay capacity, hidden width, parallel envs,
episode length) come from the GPU profile unless the user's config sets them explicitly;
`TrainingSpec.sized_for` applies that rule in one place.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.configbase import StrictConfig, validate_config
from foxhunt.env.config import EnvConfig
from foxhunt.errors import ConfigError
from foxhunt.profiles import GpuProfile
from foxhunt.replay.config import ReplayConfig
from foxhunt.training.walkforward import WalkForwardConfig


class TrainConfig(StrictConfig):
    epochs: int = Field(default=20, ge=1)
    collect_steps: int = Field(default=32, ge=1, description="vectorised env steps per epoch")
    updates_per_epoch: int = Field(default=64, ge=1)
    learning_starts: int = Field(
        default=2_000, ge=0, description="transitions collected before the first update"
    )
    batch_size: int | None = Field(default=None, gt=0, description="None: the GPU profile's")
    n_envs: int | None = Field(default=None, gt=0, description="None: the GPU profile's")
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    cuda_graphs: bool = Field(default=True, description="capture collect and update on CUDA")
    compile: bool = Field(
        default=True,
        description="CUDA: torch.compile the collect step (policy, env step, replay write), the "
        "loss (forward and backward) and the optimiser step: far fewer, fused kernels inside the "
        "captured graphs, at the price of about a minute of compiling per fold shape",
    )
    compile_options: dict[str, bool | int | float | str] = Field(
        default_factory=lambda: {"combo_kernels": True},
        description="torch._inductor.config options for the compiled steps; the default's "
        "combo kernels fuse the many small kernels of an update horizontally "
        "(docs/benchmarks.md); {} gives inductor's own defaults",
    )
    collect_steps_per_graph: int = Field(
        default=8, ge=1,
        description="CUDA graphs: collect steps captured in one graph (one launch per block; "
        "8 measured 49.5M vs 46.5M env-steps/s for 1 on an H200, docs/benchmarks.md)",
    )
    updates_per_graph: int = Field(
        default=4, ge=1,
        description="CUDA graphs: updates captured in one graph (one launch per block of k); "
        "an epoch's updates run as whole blocks, then single updates. 4 measured 1.5-2.9% "
        "faster per update than 1 on an H200 (docs/benchmarks.md)",
    )
    side_streams: bool = Field(
        default=True,
        description="CUDA: run the independent parts of an update (the target network's pass, "
        "the priority write-back) on side streams, in parallel with the online network's",
    )
    twin_target_pass: bool = Field(
        default=False,
        description="the online and the target network's passes at s' (double DQN's a* and "
        "its target) as one pass over paired layers (agents.dqn.twin: half the matmul "
        "launches); needs a dueling, noisy C51 head without variable selection. Off until "
        "measured on the H200",
    )
    side_streams_first: bool = Field(
        default=False,
        description="CUDA: the side streams at high priority, so that the GPU schedules their "
        "ready kernels (the next batch's staging, which the update waits on) before the main "
        "stream's; captured graphs keep the priority per kernel. Off until measured on the H200",
    )
    autocast: Literal["off", "bf16"] = Field(
        default="bf16",
        description="CUDA: run the network passes under bf16 autocast (matmuls in bf16, "
        "softmax/LayerNorm/loss in float32); 'off' keeps float32 (TF32 per matmul_precision)",
    )
    matmul_precision: Literal["highest", "high", "medium"] = Field(
        default="high",
        description="float32 matmul precision of the training steps on CUDA ('high' allows TF32 "
        "tensor cores); evaluation and backtests always run in full float32",
    )
    capital: float = Field(default=100_000.0, gt=0, description="account size for returns")
    eval_windows: int = Field(
        default=8, ge=1, description="chunks a validation/test window is split into for evaluation"
    )


class TrainingSpec(StrictConfig):
    """Everything a walk-forward training run is parameterised by."""

    env: EnvConfig = EnvConfig()
    agent: AgentConfig = AgentConfig()
    replay: ReplayConfig = ReplayConfig()
    train: TrainConfig = TrainConfig()
    walkforward: WalkForwardConfig = WalkForwardConfig()

    def with_overrides(self, updates: dict[str, dict[str, object]], source: str) -> TrainingSpec:
        """Sections with `updates` applied; overridden keys count as set explicitly."""
        sections = {}
        for name, section in self:
            if name in updates:
                data = {**section.model_dump(exclude_unset=True), **updates[name]}
                section = validate_config(type(section), data, f"{source} [{name}]")
            sections[name] = section
        unknown = set(updates) - set(sections)
        if unknown:
            raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
        return self.model_copy(update=sections)

    def sized_for(self, profile: GpuProfile) -> TrainingSpec:
        """Fill every profile-sized field the user did not set explicitly from `profile`."""

        def fill(section: StrictConfig, mapping: dict[str, object]) -> StrictConfig:
            update = {k: v for k, v in mapping.items() if k not in section.model_fields_set}
            return section.model_copy(update=update)

        train = fill(self.train, {"batch_size": profile.batch_size, "n_envs": profile.n_envs})
        return self.model_copy(
            update={
                "env": fill(self.env, {"episode_len": profile.episode_len}),
                "agent": fill(self.agent, {"hidden": profile.hidden, "atoms": profile.atoms}),
                "replay": fill(self.replay, {"capacity": profile.replay_capacity}),
                "train": train,
            }
        )
