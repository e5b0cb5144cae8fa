"""Properties of the lock-step env over random markets and random actions."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data.series import Bars
from foxhunt.env import EnvConfig, MarketTensors, StepResult, TradingVecEnv

from .env_builders import CHICAGO, SIZES_AND_STOPS, es, random_actions, random_bars

PV, COMMISSION = 50.0, 2.25
N_BARS, N_ENVS, N_STEPS = 64, 4, 48


def make_env(bars: Bars, feats: np.ndarray, seed: int, n_envs=N_ENVS, **config) -> TradingVecEnv:
    cfg = EnvConfig(**{"window": 3, "episode_len": 12, "atr_window": 4, **SIZES_AND_STOPS,
                       **config})
    market = MarketTensors.from_bars(bars, feats, es(CHICAGO), cfg)
    return TradingVecEnv(market, cfg, n_envs=n_envs, generator=torch.Generator().manual_seed(seed))


def outcome(r: StepResult) -> dict[str, torch.Tensor]:
    """Everything a step produces about its own bar (all fields but the next observation)."""
    out = {k: v for k, v in dataclasses.asdict(r).items() if k not in ("obs", "components")}
    return out | {f"component.{k}": v for k, v in r.components.items()}


def replace_bar(bars: Bars, feats: np.ndarray, u: int, seed: int) -> tuple[Bars, np.ndarray]:
    rng = np.random.default_rng(seed)
    cols = {k: v.copy() for k, v in bars.columns().items() if v is not None}
    o, c = (cols[k][u] + rng.integers(-80, 81) * 0.25 for k in ("open", "close"))
    cols["open"][u], cols["close"][u] = o, c
    cols["high"][u] = max(o, c) + rng.integers(0, 40) * 0.25
    cols["low"][u] = min(o, c) - rng.integers(0, 40) * 0.25
    feats = feats.copy()
    feats[u] = rng.standard_normal(feats.shape[1])
    return Bars(**cols), feats


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31), u=st.integers(4, N_BARS - 1), stops=st.booleans())
def test_changing_bar_u_changes_nothing_decided_before_bar_u_minus_1(seed, u, stops):
    """Causality, tight form.

    A step decided at the close of bar t fills at open[t+1], may stop out inside bar t+1 and is
    marked at close[t+1]; its next observation is the window ending at bar t+1. So it reads bars
    <= t+1 and nothing later: changing bar u (prices or features) leaves every output of steps
    decided at t <= u-2 unchanged, and every observation at a bar <= u-1. The step decided at
    u-1 may change (its reward reads bar u); `test_the_step_decided_at_u_minus_1_does_see_bar_u`
    shows the bound is tight. Timestamps (the calendar, hence session ends) stay fixed.

    An env is compared until the two runs disagree on an episode end (a ruin that bar u caused):
    from then on its episodes differ in time, not by look-ahead.
    """
    bars = random_bars(seed, N_BARS, gap_hours=True)
    feats = np.random.default_rng(seed).standard_normal((N_BARS, 5)).astype(np.float32)
    bars2, feats2 = replace_bar(bars, feats, u, seed + 1)
    n_envs = 16
    actions = random_actions(seed, N_STEPS, n_envs)
    if not stops:
        actions[..., 2] = 0
    runs = []
    for b, f in ((bars, feats), (bars2, feats2)):
        env = make_env(b, f, seed, n_envs, flatten_at_session_end=True, ruin_loss=300.0)
        env.reset(torch.linspace(2, min(u, N_BARS - 2), n_envs).long())
        steps = []
        for a in actions:
            decided_at = env.state()[0]
            r = env.step(a)
            steps.append((decided_at, env.state()[0], r))
        runs.append(steps)
    in_sync = torch.ones(n_envs, dtype=torch.bool)
    compared = 0
    for (t, obs_bar, r1), (t2, _, r2) in zip(*runs, strict=True):
        assert torch.equal(t[in_sync], t2[in_sync])
        early = in_sync & (t <= u - 2)
        out2 = outcome(r2)
        for name, v1 in outcome(r1).items():
            assert torch.equal(v1[early], out2[name][early]), name
        compared += int(early.sum())
        in_sync &= (r1.terminated == r2.terminated) & (r1.truncated == r2.truncated)
        seen = in_sync & (obs_bar <= u - 1)
        assert torch.equal(r1.obs[seen], r2.obs[seen])
    assert compared > 0


def test_the_step_decided_at_u_minus_1_does_see_bar_u():
    bars = random_bars(0, N_BARS)
    feats = np.zeros((N_BARS, 2), dtype=np.float32)
    u = 20
    cols = {k: v.copy() for k, v in bars.columns().items() if v is not None}
    cols["close"][u] += 5.0
    cols["high"][u] += 5.0
    results = []
    for b in (bars, Bars(**cols)):
        env = make_env(b, feats, 0)
        env.reset(torch.full((N_ENVS,), u - 1))
        results.append(env.step(torch.tensor([[1, 0, 0]] * N_ENVS)))
    assert not torch.equal(results[0].components["pnl"], results[1].components["pnl"])


def run_and_reconcile(seed: int, ruin_loss: float) -> dict[str, int]:
    """Step random actions; check equity against the money components and a ledger of fills."""
    bars = random_bars(seed, N_BARS, gap_hours=True)
    feats = np.zeros((N_BARS, 2), dtype=np.float32)
    env = make_env(bars, feats, seed, flatten_at_session_end=True, ruin_loss=ruin_loss)
    close = env.market.close
    components_sum = torch.zeros(N_ENVS, dtype=torch.float64)
    cash = torch.zeros(N_ENVS, dtype=torch.float64)
    position = torch.zeros(N_ENVS, dtype=torch.float64)
    counts = {"stops": 0, "flattens": 0, "terminated": 0, "truncated": 0}
    for a in random_actions(seed, N_STEPS, N_ENVS):
        r = env.step(a)
        components_sum += r.components["pnl"] - r.components["cost"]
        for qty, price in (
            (r.order_qty, r.order_price),
            (r.stop_qty, r.stop_price),
            (r.flatten_qty, r.flatten_price),
        ):
            cash -= qty * price * PV + qty.abs() * COMMISSION
            position += qty
        ledger_equity = cash + position * close[r.next_bar] * PV
        assert torch.allclose(r.equity, components_sum, rtol=0, atol=1e-6)
        assert torch.allclose(r.equity, ledger_equity, rtol=0, atol=1e-6)
        assert torch.equal(position, r.position)
        assert bool((r.position.abs() <= env.config.max_contracts).all())
        counts["stops"] += int((r.stop_qty != 0).sum())
        counts["flattens"] += int((r.flatten_qty != 0).sum())
        counts["terminated"] += int(r.terminated.sum())
        counts["truncated"] += int(r.truncated.sum())
        assert not bool((r.terminated & r.truncated).any())
        done = r.terminated | r.truncated
        for buf in (components_sum, cash, position):
            buf.masked_fill_(done, 0.0)
    return counts


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), ruin_loss=st.sampled_from([400.0, 1e9]))
def test_equity_reconciles_with_money_components_and_fills(seed, ruin_loss):
    """Conservation: equity (cash + position at the close) = sum of (pnl - cost) since the
    episode start = a ledger rebuilt from the reported fills, to 1e-6 dollars, every step."""
    run_and_reconcile(seed, ruin_loss)


def test_reconciliation_scenario_exercises_stops_flattens_and_both_episode_ends():
    totals = {"stops": 0, "flattens": 0, "terminated": 0, "truncated": 0}
    for seed in range(4):
        for k, v in run_and_reconcile(seed, 400.0).items():
            totals[k] += v
    assert all(v > 0 for v in totals.values()), totals


def test_same_seed_same_episodes_and_different_seed_different_starts():
    bars = random_bars(3, N_BARS)
    feats = np.random.default_rng(3).standard_normal((N_BARS, 4)).astype(np.float32)
    runs = []
    for seed in (7, 7, 8):
        env = make_env(bars, feats, seed)
        obs = [env.reset()]
        for a in random_actions(1, N_STEPS, N_ENVS):
            obs.append(env.step(a).obs)
        runs.append(torch.stack(obs))
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])


def test_observe_gathers_the_window_ending_at_the_bar_and_appends_pos_state():
    feats = np.arange(N_BARS * 4, dtype=np.float32).reshape(N_BARS, 4)
    env = make_env(random_bars(0, N_BARS), feats, 0)
    bar = torch.tensor([2, 40])
    pos_state = torch.arange(12, dtype=torch.float16).reshape(2, 6)
    obs = env.observe(bar.int(), pos_state)
    assert obs.shape == (2, env.obs_dim) and env.obs_dim == 3 * 4 + 6
    assert obs.dtype == torch.float32
    assert torch.equal(obs[1, :12], torch.from_numpy(feats[38:41].reshape(-1)))
    assert torch.equal(obs[0, 12:], pos_state[0].float())


def test_random_starts_stay_inside_the_start_range():
    cfg = EnvConfig(window=8, episode_len=10)
    market = MarketTensors.from_bars(
        random_bars(0, N_BARS), np.zeros((N_BARS, 1), np.float32), es(), cfg
    )
    env = TradingVecEnv(
        market, cfg, n_envs=512, generator=torch.Generator().manual_seed(0), start_range=(5, 40)
    )
    bar, _ = env.state()
    assert int(bar.min()) == 7 and int(bar.max()) == 40 - 10 - 1


def test_outputs_have_fixed_shapes_whether_or_not_episodes_end():
    env = make_env(random_bars(0, N_BARS), np.zeros((N_BARS, 2), np.float32), 0, episode_len=3)
    env.reset(torch.tensor([10, 10, N_BARS - 3, N_BARS - 3]))
    env.step(torch.zeros(N_ENVS, 3, dtype=torch.long))
    r = env.step(torch.zeros(N_ENVS, 3, dtype=torch.long))  # envs 2 and 3 reach the last bar
    assert r.truncated.tolist() == [False, False, True, True]
    for name, v in outcome(r).items():
        assert v.shape[0] == N_ENVS, name
    assert r.obs.shape == (N_ENVS, env.obs_dim) and r.next_pos_state.shape == (N_ENVS, env.pos_dim)


class HostSync(AssertionError):
    pass


@contextlib.contextmanager
def forbid_host_sync():
    """Make every way of reading a tensor value on the host, or of data-dependent shapes, raise.

    On CUDA these synchronise and break graph capture; the GPU test checks the same with
    torch.cuda.set_sync_debug_mode("error").
    """

    def refuse(name):
        def raiser(*args, **kwargs):
            raise HostSync(f"{name} called inside the env loop")

        return raiser

    getitem = torch.Tensor.__getitem__

    def checked_getitem(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
            raise HostSync("boolean-mask indexing inside the env loop")
        return getitem(self, index)

    methods = (
        "item",
        "tolist",
        "numpy",
        "cpu",
        "nonzero",
        "masked_select",
        "__bool__",
        "__int__",
        "__float__",
        "__index__",
    )
    with pytest.MonkeyPatch.context() as mp:
        for name in methods:
            mp.setattr(torch.Tensor, name, refuse(f"Tensor.{name}"))
        for name in ("nonzero", "masked_select", "unique"):
            mp.setattr(torch, name, refuse(f"torch.{name}"))
        mp.setattr(torch.Tensor, "__getitem__", checked_getitem)
        yield


def test_reset_and_step_never_read_tensor_values_on_the_host():
    env = make_env(
        random_bars(0, N_BARS, gap_hours=True),
        np.zeros((N_BARS, 2), np.float32),
        0,
        flatten_at_session_end=True,
        ruin_loss=300.0,
    )
    actions = random_actions(0, N_STEPS, N_ENVS)
    with forbid_host_sync():
        env.reset()
        for a in actions:
            env.step(a)
        env.observe(*env.state())
    with pytest.raises(HostSync), forbid_host_sync():
        bool(torch.ones(1))
