"""Synthetic markets, instruments and checkpoints shared by the backtest tests."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.data.instruments import Instrument, InstrumentRegistry, Session
from foxhunt.data.synth import SynthConfig, SynthMarket, generate
from foxhunt.env import EnvConfig
from foxhunt.env.observation import ObservationSpec
from foxhunt.features import FeatureConfig, FeaturePipeline
from foxhunt.training.checkpoint import save_checkpoint
from foxhunt.training.config import TrainingSpec

SYNTH_SESSION = Session(tz="UTC", open="14:30", close="21:00")
"""The synthetic generator's default 390-minute session (bars close 14:31 .. 21:00 UTC)."""


def synth(n_bars: int = 3000, seed: int = 11, signal: float = 0.0) -> SynthMarket:
    return generate(SynthConfig(n_bars=n_bars, seed=seed, signal_strength=signal))


def instrument(sessions: bool = True) -> Instrument:
    inst = InstrumentRegistry.load().get("SYN")
    return inst.model_copy(update={"session": SYNTH_SESSION}) if sessions else inst


def random_table(n: int, seed: int, stops: bool = True) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    table = torch.randint(0, 3, (n, 3), generator=g, dtype=torch.uint8).numpy()
    if not stops:
        table[:, 2] = 0
    return table


def write_checkpoint(path: Path, bars, inst: Instrument, fit_until: int = 1500, window: int = 4,
                     hidden: int = 32, seed: int = 0, episode_len: int = 64,
                     observation: bool = True, features: FeatureConfig | None = None) -> Path:
    """A randomly initialised agent saved the way the walk-forward trainer saves one; without
    `observation`, as it saved one before checkpoints held their `ObservationSpec`."""
    spec = TrainingSpec(env=EnvConfig(window=window, episode_len=episode_len),
                        agent=AgentConfig(hidden=hidden, atoms=11))
    pipeline = FeaturePipeline(features or FeatureConfig(), inst.session)
    matrix = pipeline.transform(bars, fit_until=fit_until)
    obs = ObservationSpec.of(spec.env, pipeline)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = BranchingQNetwork(obs.size, spec.agent, matrix.groups, obs.window, obs.pos_dim)
    norm = matrix.normaliser
    extra = {"fold": 0, "normaliser": {"mean": norm.mean.tolist(), "std": norm.std.tolist()},
             "feature_names": list(matrix.names), "feature_groups": matrix.groups,
             "symbol": inst.symbol}
    if observation:
        extra.update(feature_config=pipeline.config.model_dump(mode="json"),
                     observation=asdict(obs))
    return save_checkpoint(path, net, spec.model_dump(mode="json"), extra)
