"""Market tensors: causal ATR and reward scale, session ends from the calendar, clear errors."""

from __future__ import annotations

import numpy as np
import pydantic
import pytest
import torch

from foxhunt.data.instruments import Session
from foxhunt.env import CostModel, EnvConfig, MarketTensors, TradingVecEnv
from foxhunt.env.market import average_true_range, dollar_volatility, session_ends
from foxhunt.errors import ConfigError, DataError

from .env_builders import CHICAGO, bars_from_rows, es, random_bars


def utc(*stamps: str) -> np.ndarray:
    return np.array([np.datetime64(s, "ns").astype(np.int64) for s in stamps])


def test_session_ends_follow_the_chicago_close_across_a_weekend_and_dst():
    ts = utc(
        "2024-03-08T21:58",
        "2024-03-08T21:59",
        "2024-03-08T22:00",  # Fri 15:58..16:00 CST
        "2024-03-10T22:01",
        "2024-03-10T22:02",  # Sun 17:01 CDT, after the DST switch
        "2024-03-11T20:59",
        "2024-03-11T21:00",  # Mon 15:59, 16:00 CDT
        "2024-03-11T22:01",  # Mon 17:01 CDT: the next session
    )
    assert session_ends(ts, CHICAGO).tolist() == [
        False,
        False,
        True,
        False,
        False,
        False,
        True,
        False,
    ]


def test_the_last_bar_ends_a_session_only_when_it_closes_on_the_session_close():
    assert session_ends(utc("2024-03-11T20:59", "2024-03-11T21:00"), CHICAGO).tolist() == [
        False,
        True,
    ]
    assert session_ends(utc("2024-03-11T20:58", "2024-03-11T20:59"), CHICAGO).tolist() == [
        False,
        False,
    ]


def test_a_round_the_clock_session_has_no_session_ends():
    ts = utc("2024-03-08T23:59", "2024-03-09T00:00", "2024-03-09T00:01")
    assert not session_ends(ts, Session(tz="UTC", open="00:00", close="00:00")).any()


def test_atr_is_a_trailing_mean_of_true_range_that_uses_gaps():
    bars = bars_from_rows(
        [
            (100.0, 101.0, 99.0, 100.0),  # TR 2
            (100.0, 101.0, 99.0, 100.5),  # TR 2
            (103.0, 104.0, 102.5, 103.0),  # gap up: TR = 104 - prev close 100.5 = 3.5
            (103.0, 103.25, 103.0, 103.0),  # TR 0.25
        ]
    )
    assert average_true_range(bars, 3, 0.25).tolist() == [2.0, 2.0, 7.5 / 3, 5.75 / 3]


def test_reward_scale_is_the_rms_dollar_change_of_past_closes_floored_at_a_tick():
    close = np.array([100.0, 101.0, 100.5, 100.5])
    got = dollar_volatility(close, 2, 50.0, 12.5)
    want = [12.5, 50.0, 50.0 * np.sqrt((1.0 + 0.25) / 2), 50.0 * np.sqrt(0.25 / 2)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_atr_and_scale_at_t_ignore_later_bars():
    bars = random_bars(0, 50)
    cfg = EnvConfig(atr_window=5, reward_vol_window=8)
    full = MarketTensors.from_bars(bars, np.zeros((50, 1), np.float32), es(), cfg)
    head = MarketTensors.from_bars(bars.slice(0, 30), np.zeros((30, 1), np.float32), es(), cfg)
    assert torch.equal(full.atr[:30], head.atr) and torch.equal(
        full.reward_scale[:30], head.reward_scale
    )


def test_features_must_have_one_row_per_bar():
    with pytest.raises(DataError, match="one row per bar"):
        MarketTensors.from_bars(random_bars(0, 10), np.zeros((9, 2), np.float32), es(), EnvConfig())


def market(n=60, feats=None, **config):
    cfg = EnvConfig(**{"window": 4, "episode_len": 10, **config})
    feats = np.zeros((n, 2), np.float32) if feats is None else feats
    return MarketTensors.from_bars(random_bars(0, n), feats, es(), cfg), cfg


def test_a_start_range_too_short_for_window_and_episode_is_refused():
    m, cfg = market()
    with pytest.raises(ConfigError, match="need bars up to 30, the range ends at 29"):
        TradingVecEnv(m, cfg, start_range=(20, 30))
    TradingVecEnv(m, cfg, start_range=(20, 31))
    with pytest.raises(ConfigError, match="from bar 3 \\(the first with a 4-bar window\\)"):
        TradingVecEnv(m, cfg, start_range=(0, 13))
    TradingVecEnv(m, cfg, start_range=(0, 14))


def test_non_finite_features_inside_the_range_are_refused_with_the_bar():
    feats = np.zeros((60, 2), np.float32)
    feats[:10] = np.nan  # warm-up rows before the range are fine
    m, cfg = market(feats=feats)
    TradingVecEnv(m, cfg, start_range=(13, 60))
    with pytest.raises(DataError, match="bar 9 "):
        TradingVecEnv(m, cfg, start_range=(12, 60))


def test_a_cost_model_for_another_instrument_is_refused():
    m, cfg = market()
    cl = CostModel(tick_size=0.01, point_value=1000.0, commission=2.5, slippage_ticks=1)
    with pytest.raises(ConfigError, match="does not match ES"):
        TradingVecEnv(m, cfg, cl)


def test_given_starts_and_actions_are_checked():
    m, cfg = market()
    env = TradingVecEnv(m, cfg, n_envs=2)
    with pytest.raises(ConfigError, match="starts must lie in \\[3, 58\\]"):
        env.reset(torch.tensor([2, 10]))
    with pytest.raises(ConfigError, match="action must have shape"):
        env.step(torch.zeros(3, 3, dtype=torch.long))


def test_env_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(pydantic.ValidationError):
        EnvConfig(windw=3)
    with pytest.raises(pydantic.ValidationError):
        EnvConfig(size_fractions=(0.0, 0.5, 1.0))
    with pytest.raises(pydantic.ValidationError):
        EnvConfig(stop_atr_multiples=(-1.0, 2.0))


def test_market_moves_between_devices_and_the_env_follows_its_device():
    m, cfg = market()
    env = TradingVecEnv(m.to("cpu"), cfg, n_envs=3, device="cpu")
    assert env.reset().device.type == "cpu" and env.market.features.dtype == torch.float32
    assert env.market.close.dtype == torch.float64
