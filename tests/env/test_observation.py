"""The observation contract: which bars an observation reads, from which bar one exists, and
its layout; the env builds its observations from it."""

from __future__ import annotations

import numpy as np
import torch

from foxhunt.env import POS_STATE, EnvConfig, MarketTensors, ObservationSpec, TradingVecEnv
from foxhunt.features import FeaturePipeline

from .env_builders import es, random_bars

SPEC = ObservationSpec(window=4, n_features=3, valid_from=10)


def test_the_first_decision_waits_for_a_window_of_defined_features():
    assert SPEC.lookback == 3
    assert SPEC.first_decision() == 13 and SPEC.first_decision(20) == 20
    assert ObservationSpec(window=1, n_features=3).first_decision() == 0


def test_an_observation_reads_back_lookback_bars_never_before_the_first():
    assert SPEC.reads_from(13) == 10 and SPEC.reads_from(2) == 0


def test_layout_is_window_rows_then_the_position_state():
    assert (SPEC.market_size, SPEC.pos_dim, SPEC.size) == (12, len(POS_STATE), 12 + len(POS_STATE))
    features = torch.arange(40 * 3, dtype=torch.float32).view(40, 3)
    bar = torch.tensor([13, 39])
    pos_state = torch.rand(2, SPEC.pos_dim, dtype=torch.float64)
    obs = SPEC.observe(SPEC.market_rows(features), bar, pos_state)
    for i, t in enumerate(bar.tolist()):
        assert torch.equal(obs[i, :12], features[t - 3:t + 1].reshape(-1))
    assert torch.equal(obs[:, 12:], pos_state.float()) and obs.dtype == torch.float32


def test_a_runs_spec_is_its_window_over_the_fitted_features():
    pipeline = FeaturePipeline()
    spec = ObservationSpec.of(EnvConfig(window=8), pipeline)
    assert (spec.window, spec.n_features, spec.valid_from) == (8, pipeline.n_features,
                                                                pipeline.warmup)


def test_the_env_observes_and_starts_as_its_spec_says():
    cfg = EnvConfig(window=5, episode_len=10)
    feats = np.random.default_rng(0).standard_normal((60, 2)).astype(np.float32)
    market = MarketTensors.from_bars(random_bars(0, 60), feats, es(), cfg)
    env = TradingVecEnv(market, cfg, n_envs=4, generator=torch.Generator().manual_seed(0),
                        start_range=(1, 60))
    assert env.observation == ObservationSpec(window=5, n_features=2)
    assert env.obs_dim == env.observation.size and env.first_start == 4
    bar, pos_state = env.state()
    expected = env.observation.observe(env.observation.market_rows(market.features), bar,
                                       pos_state)
    assert torch.equal(env.observe(bar, pos_state), expected)
