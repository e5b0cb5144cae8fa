"""Builders for env tests: scripted ES bars and random tick-grid markets (imported by tests)."""

from __future__ import annotations

import numpy as np
import torch

from foxhunt.data.instruments import Instrument, InstrumentRegistry, Session
from foxhunt.data.series import Bars
from foxhunt.env import EnvConfig, MarketTensors, TradingVecEnv

MINUTE = 60_000_000_000
SIZES_AND_STOPS = {"size_fractions": (1 / 3, 2 / 3, 1.0), "stop_atr_multiples": (1.0, 3.0)}
"""Every choice of the size and stop branches live (the shipped config trades full size without
stops): the env's tests exercise all 27 actions."""
T0 = np.datetime64("2024-01-02T14:00", "ns").astype(np.int64)


def es(session: Session | None = None) -> Instrument:
    inst = InstrumentRegistry.load().get("ES")
    return inst.model_copy(update={"session": session or Session()})


def bars_from_rows(rows, ts=None) -> Bars:
    """rows: (open, high, low, close) per bar; 1-minute bars from T0 unless `ts` is given."""
    o, h, lo, c = (np.array(col, dtype=np.float64) for col in zip(*rows))
    ts = T0 + np.arange(len(rows)) * MINUTE if ts is None else np.asarray(ts, dtype=np.int64)
    return Bars(ts, o, h, lo, c, np.ones(len(rows)))


def scripted_env(rows, n_envs=1, ts=None, session=None, **config) -> TradingVecEnv:
    """One ES env on `rows`, window 1, starting at bar 0."""
    cfg = EnvConfig(**{"window": 1, "episode_len": len(rows) - 1, "atr_window": 3,
                       **SIZES_AND_STOPS, **config})
    bars = bars_from_rows(rows, ts)
    feats = np.arange(len(rows) * 2, dtype=np.float32).reshape(len(rows), 2)
    market = MarketTensors.from_bars(bars, feats, es(session), cfg)
    env = TradingVecEnv(market, cfg, n_envs=n_envs, generator=torch.Generator().manual_seed(0))
    env.reset(torch.zeros(n_envs, dtype=torch.long))
    return env


def random_bars(seed: int, n: int, gap_hours: bool = False) -> Bars:
    """A tick-grid random walk with gaps; with `gap_hours` bars are 1-7 hours apart."""
    rng = np.random.default_rng(seed)
    close = 4000 + np.cumsum(rng.integers(-8, 9, n)) * 0.25
    open_ = np.concatenate([[close[0]], close[:-1]]) + rng.integers(-6, 7, n) * 0.25
    high = np.maximum(open_, close) + rng.integers(0, 8, n) * 0.25
    low = np.minimum(open_, close) - rng.integers(0, 8, n) * 0.25
    step = rng.integers(1, 8, n) * 60 * MINUTE if gap_hours else np.full(n, MINUTE)
    return Bars(T0 + np.cumsum(step), open_, high, low, close, np.ones(n))


def random_actions(seed: int, steps: int, n_envs: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 3, (steps, n_envs, 3), generator=g)


CHICAGO = Session(tz="America/Chicago", open="17:00", close="16:00")
