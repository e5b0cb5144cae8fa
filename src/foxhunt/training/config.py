"""Training settings (`[train]`) and the bundle of sections one training run needs.

The keys a GPU profile sizes (`profiles.SIZED`) take its value only where the config and the
command line leave them unset; `TrainingSpec.sized_for` applies that rule in one place.

A fold's training budget is `[train] updates_per_fold` gradient updates and the env transitions
that `replay_ratio` asks for, split evenly over `epochs` rounds of (collect, update, validate);
`TrainConfig.budget` states the arithmetic. Left to the GPU profile, `updates_per_fold` is a cap
and each fold's budget follows its training window (`TrainConfig.for_fold`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from pydantic import Field, model_validator

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.agents.ppo.config import PPOConfig
from foxhunt.agents.pqn.config import PQNConfig
from foxhunt.configbase import StrictConfig, validate_config
from foxhunt.env.config import EnvConfig
from foxhunt.errors import ConfigError
from foxhunt.profiles import SIZED, GpuProfile
from foxhunt.replay.config import ReplayConfig
from foxhunt.training.walkforward import WalkForwardConfig

MOVED_TO_PERFORMANCE = {
    "cuda_graphs": "cuda_graphs", "compile": "compile", "autocast": "autocast",
    "side_streams": "side_streams", "collect_steps_per_graph": "collect_steps_per_graph",
    "updates_per_graph": "updates_per_graph", "matmul_precision": "autocast",
}
REMOVED = {
    "compile_options": "the compiled steps use inductor's combo kernels, always",
    "twin_target_pass": "it was never faster and is gone",
    "side_streams_first": "it was never faster and is gone",
}
REPLACED = {
    "updates_per_epoch": "[train] updates_per_fold (gradient updates per fold, spread evenly "
                         "over its epochs; unset: the GPU profile's)",
    "collect_steps": "[train] replay_ratio (gradient samples per collected transition; each "
                     "epoch's collect steps follow from it, batch_size and n_envs)",
}
"""Keys of the old per-epoch budget and the key that replaced each (issue 19)."""


class PerformanceConfig(StrictConfig):
    """How the learner's steps run on CUDA (`training.hotpath`): `autocast` sets the precision
    the network trains in, `compile` may change float rounding, the rest only how fast the same
    math runs. The CPU runs them eagerly in float32, reproducibly from the seed, and ignores this
    section (docs/training.md, "Performance settings")."""

    compile: bool | Literal["auto", "updates"] = Field(
        default="auto",
        description="torch.compile the learner's steps (far fewer, fused kernels inside the "
        "captured graphs, at the price of compiling once per process): true: every step of "
        "collect and update and the validation rollout; 'updates': only an update's steps, "
        "where a run's time goes (collect and the validation rollout run graphed, uncompiled); "
        "false: none; 'auto': 'updates' for a run of at least compile_min_updates updates, "
        "where compiling saves more than it costs, else false; a GPU the compiler cannot target "
        "falls back to eager with one warning",
    )
    compile_min_updates: int = Field(
        default=40_000, ge=0,
        description="compile = 'auto': the run's updates (all folds) from which it compiles",
    )
    cuda_graphs: bool = Field(default=True, description="capture collect and update as CUDA graphs")

    autocast: Literal["bf16", "tf32", "off"] = Field(
        default="bf16",
        description="the network passes' precision in training: 'bf16' autocast (matmuls in "
        "bf16; softmax, layer norm and losses in float32), 'tf32' float32 with TF32 matmuls, "
        "'off' exact float32; evaluation and backtests always run in float32",
    )
    side_streams: bool = Field(
        default=True,
        description="run the independent parts of an update (the next batch and its target, "
        "the priority write-back) on side streams beside the loss pass and backward",
    )
    collect_steps_per_graph: int = Field(
        default=8, ge=1, description="CUDA graphs: collect steps captured in one graph"
    )
    updates_per_graph: int = Field(
        default=4, ge=1, description="CUDA graphs: updates captured in one graph"
    )

    def resolved(self, run_updates: int) -> tuple[PerformanceConfig, str]:
        """This config with `compile` decided for a run of `run_updates` updates, and why."""
        if self.compile != "auto":
            return self, f"compile = {str(self.compile).lower()} (set)"
        on = run_updates >= self.compile_min_updates
        why = (f"compile {'the updates' if on else 'off'}: the run trains {run_updates:,} "
               f"updates, {'at least' if on else 'under'} compile_min_updates = "
               f"{self.compile_min_updates:,} (compiling an update takes about 30 s, a few from "
               "a warm compile cache, and saves about 1 ms an update on an H100)")
        return self.model_copy(update={"compile": "updates" if on else False}), why

    @property
    def compiles_updates(self) -> bool:
        """Whether an update's steps are compiled (`compile` true or 'updates')."""
        return self.compile is True or self.compile == "updates"

    @property
    def compiles_everything(self) -> bool:
        """Whether collect steps and the validation rollout are compiled too (`compile` true)."""
        return self.compile is True


class TrainConfig(StrictConfig):
    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: object) -> object:
        if isinstance(data, dict):
            for key in data:
                if key in MOVED_TO_PERFORMANCE:
                    raise ValueError(f"'{key}' moved to [train.performance] (as "
                                     f"'{MOVED_TO_PERFORMANCE[key]}'; see docs/training.md)")
                if key in REMOVED:
                    raise ValueError(f"'{key}' was removed: {REMOVED[key]}")
                if key in REPLACED:
                    raise ValueError(f"'{key}' was replaced by {REPLACED[key]}; see "
                                     "docs/training.md")
            if data.get("updates_per_fold") is not None:  # set: trained as is, not data-sized
                data = {"samples_per_bar": None, **data}
        return data

    epochs: int = Field(
        default=20, ge=1,
        description="validation rounds per fold: the fold's budget is split evenly over them, "
        "and the model is judged on validation after each",
    )
    updates_per_fold: int | None = Field(
        default=None, gt=0, description="gradient updates per fold, as set; None: "
        "samples_per_bar's share of the training window, at most the GPU profile's value"
    )
    samples_per_bar: int | None = Field(
        default=10_240, gt=0, description="gradient samples per training bar where the GPU "
        "profile sets updates_per_fold: a fold trains samples_per_bar x its training bars / "
        "batch_size updates, at most the profile's (all of it on 30,000 bars in 3 folds)")
    average_epochs: float = Field(
        default=0.5, ge=0,
        description="the fold validates, tests and deploys a Polyak average of the online "
        "weights over about this many epochs' updates instead of the online network itself "
        "(docs/training.md); 0: the online network",
    )
    replay_ratio: float = Field(
        default=4.0, gt=0,
        description="gradient samples per collected env transition (updates x batch_size / "
        "transitions): each epoch collects its updates x batch_size / replay_ratio "
        "transitions, in whole vectorised steps of n_envs, at least one",
    )
    learning_starts: int = Field(
        default=2_000, ge=0, description="transitions collected before the first update"
    )
    batch_size: int | None = Field(default=None, gt=0, description="None: the GPU profile's")
    n_envs: int | None = Field(default=None, gt=0, description="None: the GPU profile's")
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    performance: PerformanceConfig = Field(
        default_factory=lambda: PerformanceConfig(),
        description="how the steps run on CUDA ([train.performance]): autocast sets the "
        "precision trained in, compile may change rounding, the rest nothing learned",
    )
    capital: float = Field(default=100_000.0, gt=0, description="account size for returns")
    eval_windows: int = Field(
        default=8, ge=1, description="chunks a validation/test window is split into for evaluation"
    )

    def average_rate(self) -> float:
        """The weight average's Polyak rate, 1 / (average_epochs x updates an epoch), at most 1;
        0 without an average. Needs the fold's `updates_per_fold` (`for_fold`)."""
        if self.average_epochs == 0:
            return 0.0
        if self.updates_per_fold is None:
            raise ConfigError("[train] updates_per_fold is unset: size the spec for a GPU "
                              "profile first (TrainingSpec.sized_for)")
        return min(1.0, self.epochs / (self.average_epochs * self.updates_per_fold))

    def for_fold(self, train_bars: int) -> tuple[TrainConfig, str]:
        """This config with the `updates_per_fold` of a fold training on `train_bars` bars, and
        why: with `samples_per_bar`, that many samples a bar in whole updates an epoch (at least
        one), at most `updates_per_fold`: a short sample trains for its data, not the profile's."""
        self._require_sized()
        cap, batch, epochs = self.updates_per_fold, self.batch_size, self.epochs
        if self.samples_per_bar is None:
            return self, f"updates_per_fold = {cap:,} (set: used as is)"
        sized = epochs * -(-self.samples_per_bar * train_bars // (batch * epochs))
        arithmetic = (f"{self.samples_per_bar:,} samples per training bar x {train_bars:,} bars "
                      f"/ batch {batch}")
        why = (f", the cap ({arithmetic} would be {sized:,})" if sized >= cap else
               f" = {arithmetic} ({epochs} epochs of {sized // epochs:,}; under the cap of {cap:,})")
        return (self.model_copy(update={"updates_per_fold": min(cap, sized), "samples_per_bar": None}),
                f"updates_per_fold = {min(cap, sized):,}{why}")

    def _require_sized(self) -> None:
        unset = [k for k in ("updates_per_fold", "batch_size", "n_envs") if getattr(self, k) is None]
        if unset:
            raise ConfigError(f"[train] {', '.join(unset)} unset: size the spec with a GPU "
                              "profile (TrainingSpec.sized_for) or set them")

    def budget(self) -> FoldBudget:
        """The fold's schedule: updates and collect steps per epoch. Needs the profile-sized
        fields (`TrainingSpec.sized_for`) and, for a fold's own budget, `for_fold`'s config."""
        self._require_sized()
        return fold_budget(self.updates_per_fold, self.epochs, self.batch_size, self.n_envs,
                           self.replay_ratio, self.learning_starts)


@dataclass(frozen=True)
class FoldBudget:
    """What one fold trains: `updates[e]` gradient updates and `collect_steps[e]` vectorised
    env steps (of `n_envs` transitions each) in epoch e."""

    updates: tuple[int, ...]
    collect_steps: tuple[int, ...]
    n_envs: int
    batch_size: int

    @property
    def total_updates(self) -> int:
        return sum(self.updates)

    @property
    def transitions(self) -> int:
        return sum(self.collect_steps) * self.n_envs

    @property
    def replay_ratio(self) -> float:
        """Gradient samples per collected transition, as scheduled (rounding to whole steps,
        the warm-up and the one-step minimum make it differ from the configured one)."""
        return self.total_updates * self.batch_size / self.transitions


def fold_budget(updates: int, epochs: int, batch_size: int, n_envs: int, replay_ratio: float,
                learning_starts: int = 0) -> FoldBudget:
    """`updates` spread evenly over `epochs` (earlier epochs take one fewer where they do not
    divide); after epoch e the fold has collected ceil(updates so far x batch_size /
    replay_ratio) transitions, in whole steps of `n_envs`. Every epoch collects at least one
    step, and the first at least enough for the first update (`learning_starts` and one batch)."""
    per_epoch = tuple(updates * (e + 1) // epochs - updates * e // epochs for e in range(epochs))
    ratio = Fraction(replay_ratio).limit_denominator(1_000_000)
    warm_up = math.ceil(max(learning_starts, batch_size) / n_envs)
    steps, done, updated = [], 0, 0
    for u in per_epoch:
        updated += u
        transitions = math.ceil(updated * batch_size / ratio)
        target = max(math.ceil(transitions / n_envs), done + 1, warm_up)
        steps.append(target - done)
        done = target
    return FoldBudget(per_epoch, tuple(steps), n_envs, batch_size)


class TrainingSpec(StrictConfig):
    """Everything a walk-forward training run is parameterised by."""

    env: EnvConfig = EnvConfig()
    agent: AgentConfig = AgentConfig()
    replay: ReplayConfig = ReplayConfig()
    train: TrainConfig = TrainConfig()
    walkforward: WalkForwardConfig = WalkForwardConfig()
    pqn: PQNConfig = PQNConfig()  # read only where [agent] kind = "pqn"
    ppo: PPOConfig = PPOConfig()  # read only where [agent] kind = "ppo"

    def with_overrides(self, updates: dict[str, dict[str, object]], source: str) -> TrainingSpec:
        """Sections with `updates` applied; overridden keys count as set explicitly."""
        sections = {}
        for name, section in self:
            if name in updates:
                data = _merged(section.model_dump(exclude_unset=True), updates[name])
                section = validate_config(type(section), data, f"{source} [{name}]")
            sections[name] = section
        unknown = set(updates) - set(sections)
        if unknown:
            raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
        return self.model_copy(update=sections)

    def profile_fills(self, profile: GpuProfile) -> dict[str, object]:
        """`profile`'s value of each key it sizes (`profiles.SIZED`) that this spec leaves unset."""
        return {key: getattr(profile, field) for field, (key, _) in SIZED.items()
                if key.split(".")[1] not in getattr(self, key.split(".")[0]).model_fields_set}

    def sized_for(self, profile: GpuProfile) -> TrainingSpec:
        """This spec with `profile_fills(profile)` applied: a key the user set keeps its value;
        a filled `updates_per_fold` is the cap of `samples_per_bar`'s budget (`for_fold`)."""
        updates: dict[str, dict[str, object]] = {}
        for key, value in self.profile_fills(profile).items():
            updates.setdefault(key.split(".")[0], {})[key.split(".")[1]] = value
        if "updates_per_fold" in updates.get("train", {}):  # the profile's cap, not a set budget
            updates["train"]["samples_per_bar"] = self.train.samples_per_bar
        return self.with_overrides(updates, f"GPU profile {profile.name}")


def _merged(base: dict[str, object], update: dict[str, object]) -> dict[str, object]:
    """`update` over `base`, nested tables (e.g. [train.performance]) merged key by key."""
    out = dict(base)
    for key, value in update.items():
        old = out.get(key)
        out[key] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out
