"""Every shipped GPU profile trains on the bundled ES sample: episodes sized for long histories
are fitted to its short training windows, with one notice, instead of failing."""

from __future__ import annotations

import json

import pytest
import torch

from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.resample import resample
from foxhunt.data.sample import SAMPLE_SYMBOL, load_sample_ticks
from foxhunt.errors import ConfigError
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.profiles import shipped_profiles
from foxhunt.training.config import TrainingSpec
from foxhunt.training.trainer import WalkForwardTrainer

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def sample():
    instrument = InstrumentRegistry.load().get(SAMPLE_SYMBOL)
    bars = resample(load_sample_ticks(), "1min", point_value=instrument.point_value)
    return bars, instrument, FeaturePipeline(FeatureConfig(), instrument.session)


@pytest.mark.parametrize("name", sorted(shipped_profiles()))
def test_every_profile_fits_the_bundled_sample_or_says_which_key_to_change(sample, tmp_path, name):
    bars, instrument, pipeline = sample
    profile = shipped_profiles()[name]
    spec = TrainingSpec().sized_for(profile)
    try:
        trainer = WalkForwardTrainer(spec, bars, pipeline, instrument, tmp_path, CPU)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message and "[walkforward]" in message, message
        return
    shortest = min(len(f.train) for f in trainer.folds)
    assert trainer.spec.env.episode_len + 2 <= shortest
    # The run decides `compile = "auto"` from its updates (test_data_budget.py); the rest is
    # the spec handed in, or that with a shorter episode.
    got = trainer.spec.model_copy(update={"train": trainer.spec.train.model_copy(
        update={"performance": spec.train.performance})})
    if profile.episode_len + 2 <= shortest:
        assert trainer.notices == [] and got == spec
    else:
        [notice] = trainer.notices
        assert f"[env] episode_len = {profile.episode_len}" in notice
        assert trainer.spec.env.episode_len == shortest // 2
        assert got.model_copy(update={"env": spec.env}) == spec  # nothing else changes


def test_the_h200_profile_trains_on_the_bundled_sample(sample, tmp_path):
    """The h200 profile's 1024-bar episodes on the sample's ~790-bar training windows: every
    fold runs, and spec.json records the episode length the run used. The network and batch are
    CPU-sized; the episode length and the walk-forward split are the profile's."""
    bars, instrument, pipeline = sample
    spec = TrainingSpec().sized_for(shipped_profiles()["h200"]).with_overrides(
        {"agent": {"hidden": 32, "atoms": 11}, "replay": {"capacity": 4096},
         "train": {"epochs": 1, "updates_per_fold": 2, "replay_ratio": 2.0, "learning_starts": 0,
                   "batch_size": 32, "n_envs": 16}}, "test")
    assert spec.env.episode_len == 1024
    trainer = WalkForwardTrainer(spec, bars, pipeline, instrument, tmp_path, CPU)
    result = trainer.run()
    assert [f.fold for f in result.folds] == [0, 1, 2]
    used = json.loads((tmp_path / "spec.json").read_text())["env"]["episode_len"]
    assert used == trainer.spec.env.episode_len < 1024
