"""The Gymnasium faces pass gymnasium's own checks and agree with the vector env."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .env_builders import SIZES_AND_STOPS, es, random_bars

pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env

from foxhunt.env import EnvConfig, MarketTensors, flatten_actions, unflatten_actions
from foxhunt.env.gym_wrapper import TradingEnv, TradingVectorEnv

N_BARS = 200


@pytest.fixture(scope="module")
def market():
    cfg = EnvConfig(window=8, episode_len=20, **SIZES_AND_STOPS)
    feats = np.random.default_rng(0).standard_normal((N_BARS, 3)).astype(np.float32)
    return MarketTensors.from_bars(random_bars(0, N_BARS), feats, es(), cfg), cfg


@pytest.mark.filterwarnings("ignore:.*Box observation space")  # unbounded by design
def test_single_env_passes_the_gymnasium_env_checker(market):
    env = TradingEnv(*market)
    check_env(env, skip_render_check=True)
    assert env.action_space.n == 27
    assert env.observation_space.shape == (8 * 3 + 6,)


def test_single_env_runs_an_episode_to_truncation_and_reports_dollars(market):
    env = TradingEnv(*market)
    obs, _ = env.reset(seed=1, options={"start": 50})
    assert obs.dtype == np.float32 and np.array_equal(
        obs[:24], market[0].features[43:51].flatten().numpy()
    )
    rewards, money = [], 0.0
    for i in range(20):
        obs, reward, terminated, truncated, info = env.step(9)  # long 1, no stop
        rewards.append(reward)
        money += info["pnl"] - info["cost"]
        assert not terminated and truncated == (i == 19)
    assert info["position"] == 1.0 and set(info) >= {"pnl", "cost", "equity", "episode_pnl"}
    # equity is the account: capital plus the episode's PnL after costs
    assert info["episode_pnl"] == pytest.approx(money)
    assert info["equity"] == pytest.approx(env.capital + money) and env.capital == 100_000.0


def test_vector_env_same_step_autoreset_reports_final_observations(market):
    envs = TradingVectorEnv(*market, num_envs=5)
    obs, _ = envs.reset(seed=3)
    assert obs.shape == (5, 30) and envs.action_space.shape == (5,)
    for _ in range(20):
        obs, rewards, terminated, truncated, infos = envs.step(envs.action_space.sample())
    assert truncated.all() and not terminated.any()
    assert infos["_final_obs"].all() and infos["final_obs"].shape == (5, 30)
    assert np.all(obs[:, -6:] == 0)  # new episodes start flat
    assert rewards.dtype == np.float32 and infos["equity"].dtype == np.float64
    np.testing.assert_array_equal(infos["equity"], envs.capital + infos["episode_pnl"])


def test_vector_env_reset_seed_is_deterministic(market):
    a, b = TradingVectorEnv(*market, num_envs=4), TradingVectorEnv(*market, num_envs=4)
    assert np.array_equal(a.reset(seed=5)[0], b.reset(seed=5)[0])
    actions = np.arange(4)
    assert np.array_equal(a.step(actions)[1], b.step(actions)[1])
    assert not np.array_equal(a.reset(seed=6)[0], b.reset(seed=5)[0])


def test_unflattened_action_index_matches_branch_choices(market):
    env = TradingEnv(*market)
    env.reset(seed=0, options={"start": 50})
    _, _, _, _, info = env.step(2 * 9 + 2 * 3 + 0)  # short, 3/3 of 3 contracts, no stop
    assert info["position"] == -3.0 and info["cost"] == 3 * (2.25 + 12.5)


def test_flat_index_round_trips_through_branch_choices():
    index = torch.arange(27)
    choices = unflatten_actions(index)
    assert choices[0].tolist() == [0, 0, 0] and choices[26].tolist() == [2, 2, 2]
    assert torch.equal(flatten_actions(choices), index)
