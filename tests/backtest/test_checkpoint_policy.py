"""A checkpoint's greedy agent: rebuilt features, training's observation layout, batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.backtest import Backtester, Flat, Job, checkpoint_policy, run_backtest
from foxhunt.backtest.strategies import CheckpointPolicy, RandomActions
from foxhunt.env import EnvConfig, MarketTensors, TradingVecEnv
from foxhunt.errors import CheckpointError, ConfigError
from foxhunt.features import FeatureConfig, FeaturePipeline

from .builders import instrument, synth, write_checkpoint

N = 2500


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    m, inst = synth(N, signal=0.3), instrument()
    path = write_checkpoint(tmp_path_factory.mktemp("ckpt") / "fold0.pt", m.bars, inst)
    return m.bars, inst, path


def test_observations_match_the_training_env(setup):
    """The agent sees what the env's `observe` builds from the same features and position."""
    bars, inst, path = setup
    policy = checkpoint_policy(path, bars, inst)
    cfg = policy.env_config
    market = MarketTensors.from_bars(bars, policy.features, inst, cfg)
    env = TradingVecEnv(market, cfg, n_envs=6, generator=torch.Generator().manual_seed(0))
    agent = policy.build(market, cfg)
    bar = torch.tensor([200, 201, 777, 1500, 2000, 2400])
    pos_state = torch.randn(6, env.pos_dim, generator=torch.Generator().manual_seed(1))
    pos_state[:, 2] = torch.rand(6)
    expected = policy.network.act(env.observe(bar, pos_state))
    assert torch.equal(agent(bar, pos_state), expected)


def test_features_are_rebuilt_with_the_stored_normaliser(setup):
    bars, inst, path = setup
    policy = checkpoint_policy(path, bars, inst)
    fitted = FeaturePipeline(FeatureConfig(), inst.session).transform(bars, fit_until=1500)
    np.testing.assert_array_equal(policy.features, fitted.values)
    assert policy.first_bar() == fitted.valid_from + 3  # the first full 4-bar window


def test_a_checkpoint_saved_before_observation_specs_backtests_as_before(setup, tmp_path):
    """Checkpoints on disk from before the spec was stored get the one their settings imply."""
    bars, inst, path = setup
    old = checkpoint_policy(write_checkpoint(tmp_path / "old.pt", bars, inst, observation=False),
                            bars, inst)
    new = checkpoint_policy(path, bars, inst)
    assert old.observation == new.observation
    results = run_backtest(bars, inst, policies={"old": old, "new": new}, windows=[(0, 1200)],
                           env_config=new.env_config, device="cpu")
    np.testing.assert_array_equal(results[0].actions, results[1].actions)
    np.testing.assert_array_equal(results[0].pnl, results[1].pnl)


def test_the_first_window_bar_waits_for_the_features(setup):
    bars, inst, path = setup
    policy = checkpoint_policy(path, bars, inst)
    results = run_backtest(bars, inst, policies={"agent": policy, "flat": Flat()},
                           windows=[(0, 1000)], env_config=policy.env_config, device="cpu")
    assert {r.window for r in results} == {(policy.first_bar(), 1000)}
    assert results[0].engine["mode"] == "lockstep"


def test_a_run_on_other_features_rebuilds_them_from_its_checkpoint(setup, tmp_path):
    bars, inst, _ = setup
    light = FeatureConfig(groups=["returns", "trend"], trend_windows=[16, 64])
    path = write_checkpoint(tmp_path / "light.pt", bars, inst, features=light)
    policy = checkpoint_policy(path, bars, inst)
    assert policy.first_bar() == FeaturePipeline(light).warmup + 3
    old = write_checkpoint(tmp_path / "old.pt", bars, inst, features=light, observation=False)
    with pytest.raises(CheckpointError, match="features from bar 512 where it builds 14 "
                                              "from bar 128"):
        checkpoint_policy(old, bars, inst, features=light)  # saved without its feature config


def test_agents_and_baselines_batched_equal_each_run_alone(setup):
    bars, inst, path = setup
    agent_a = checkpoint_policy(path, bars, inst, label="a")
    other = write_checkpoint(path.with_name("fold1.pt"), bars, inst, seed=1)
    agent_b = checkpoint_policy(other, bars, inst, label="b")
    policies = {"a": agent_a, "b": agent_b, "random": RandomActions(1)}
    windows = [(300, 600), (1600, 1700), (2000, 2400)]
    tester = Backtester(bars, inst, agent_a.env_config, device="cpu")
    batched = tester.run([Job(n, p, w) for n, p in policies.items() for w in windows])
    for r in batched:
        alone = tester.run([Job(r.name, policies[r.name], r.window)])[0]
        np.testing.assert_array_equal(r.pnl, alone.pnl)
        np.testing.assert_array_equal(r.actions, alone.actions)
    assert not np.array_equal(batched[0].actions, batched[3].actions)


def test_mismatched_settings_fail_with_one_line(setup, tmp_path):
    bars, inst, path = setup
    with pytest.raises(CheckpointError, match="features config"):
        checkpoint_policy(path, bars, inst, features=FeatureConfig(groups=["returns"]))
    policy = checkpoint_policy(path, bars, inst)
    with pytest.raises(ConfigError, match="max_contracts"):
        run_backtest(bars, inst, policies={"agent": policy},
                     env_config=EnvConfig(max_contracts=5), device="cpu")
    with pytest.raises(ConfigError, match="rebuilt for"):
        run_backtest(bars.slice(0, 2000), inst, policies={"agent": policy}, device="cpu")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        checkpoint_policy(tmp_path / "missing.pt", bars, inst)
    assert isinstance(policy, CheckpointPolicy)


def test_device_auto_is_resolved_before_torch_sees_it(setup):
    bars, inst, path = setup
    policy = checkpoint_policy(path, bars, inst, "auto")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert next(policy.network.parameters()).device.type == expected
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            checkpoint_policy(path, bars, inst, "cuda")
