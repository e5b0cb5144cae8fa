"""Small synthetic markets, CPU-sized training specs and an oracle policy shared by the training
tests."""

from __future__ import annotations

import torch
from torch import Tensor

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, SynthMarket, generate
from foxhunt.env.config import EnvConfig
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.replay.config import ReplayConfig
from foxhunt.training.config import PerformanceConfig, TrainConfig, TrainingSpec
from foxhunt.training.evaluate import Policy
from foxhunt.training.walkforward import WalkForwardConfig


def synth(n_bars: int, signal: float, seed: int = 7) -> SynthMarket:
    return generate(SynthConfig(n_bars=n_bars, seed=seed, signal_strength=signal))


def instrument():
    return InstrumentRegistry.load().get("SYN")


def pipeline() -> FeaturePipeline:
    return FeaturePipeline(FeatureConfig(), instrument().session)


def tiny_spec(epochs: int = 2, folds: int = 2, performance: dict | None = None,
              **train) -> TrainingSpec:
    """Seconds on CPU: for plumbing, determinism and fold-isolation tests; `performance` sets
    [train.performance] keys (compile on: the GPU tests test it), `train` other [train] keys.
    By default each epoch: 10 updates of 32 and 8 collect steps of 16 envs. The sample augmentations (mirror, input noise) are off:
    the tests built on it hold the update to `reference_update` on the replay's own batches;
    test_regularisers.py tests the augmentations."""
    train = {"updates_per_fold": 10 * epochs, "replay_ratio": 2.5, **train}
    return TrainingSpec(
        env=EnvConfig(window=4, episode_len=32, slippage_ticks=0),
        agent=AgentConfig(hidden=32, atoms=11, lr=1e-3, mirror=False, input_noise=0.0),
        replay=ReplayConfig(capacity=4096, beta_anneal_steps=200),
        train=TrainConfig(epochs=epochs, learning_starts=128, batch_size=32, n_envs=16,
                          eval_windows=8,
                          performance=PerformanceConfig(**{"compile": True,
                                                           **(performance or {})}), **train),
        walkforward=WalkForwardConfig(folds=folds, purge=8),
    )


def learning_spec() -> TrainingSpec:
    """Tens of seconds on CPU: enough updates to learn the planted signal of `synth`. Each
    epoch: 60 updates of 128 and 16 collect steps of 32 envs."""
    return TrainingSpec(
        env=EnvConfig(window=4, episode_len=64, slippage_ticks=0),
        agent=AgentConfig(hidden=64, atoms=11, lr=1e-3),
        replay=ReplayConfig(capacity=40_000, beta_anneal_steps=1_000),
        train=TrainConfig(epochs=8, updates_per_fold=480, replay_ratio=15.0, learning_starts=512,
                          batch_size=128, n_envs=32, eval_windows=16),
        walkforward=WalkForwardConfig(folds=1, purge=8),
    )


def position_policy(direction_by_bar: Tensor, size: int = 2) -> Policy:
    """Hold sign(direction_by_bar[t]) decided at bar t (e.g. an oracle's), at size index `size`."""
    side = torch.sign(direction_by_bar).long()

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        d = side.to(bar.device)[bar]
        direction = torch.where(d > 0, 1, torch.where(d < 0, 2, 0))
        return torch.stack((direction, torch.full_like(direction, size), torch.zeros_like(direction)), 1)

    return act
