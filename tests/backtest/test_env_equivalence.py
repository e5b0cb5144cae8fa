"""The backtester pays what the training env paid: replayed episodes, the direct path, batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.backtest import Backtester, Job, run_backtest
from foxhunt.backtest.strategies import ActionReplay, RandomActions
from foxhunt.env import EnvConfig, MarketTensors, TradingVecEnv

from .builders import instrument, random_table, synth

STEPS = 300


def test_replaying_env_episodes_reproduces_their_pnl_to_the_cent():
    """Random actions with trailing stops and session flattens, as in training (window 8,
    features, one episode per env); the backtester replays the decisions bar by bar."""
    m, inst = synth(3000), instrument()
    bars, n = m.bars, len(m.bars)
    cfg = EnvConfig(window=8, episode_len=STEPS, flatten_at_session_end=True, hold_cost=0.01,
                    size_fractions=(1 / 3, 2 / 3, 1.0), stop_atr_multiples=(1.0, 3.0))
    feats = np.random.default_rng(0).standard_normal((n, 5)).astype(np.float32)
    market = MarketTensors.from_bars(bars, feats, inst, cfg)
    starts = torch.tensor([100, 700, 1300, 1900, 2500])
    env = TradingVecEnv(market, cfg, n_envs=len(starts), generator=torch.Generator().manual_seed(0))
    env.reset(starts)
    g = torch.Generator().manual_seed(1)
    table = np.zeros((n, 3), dtype=np.uint8)
    money, closed, stops, flattens, position = [], [], [], [], None
    for k in range(STEPS):
        action = torch.randint(0, 3, (len(starts), 3), generator=g)
        table[starts + k] = action.numpy()
        r = env.step(action)
        money.append((r.components["pnl"] - r.components["cost"]).numpy())
        closed.append(r.trades_closed.numpy())
        stops.append(r.stop_qty.numpy() != 0)
        flattens.append(r.flatten_qty.numpy() != 0)
        position = r.position.numpy()
    money = np.stack(money, 1)
    assert np.stack(stops).sum() > 20 and np.stack(flattens).sum() >= 3

    windows = [(int(s), int(s) + STEPS + 1) for s in starts]
    results = run_backtest(bars, inst, policies={"replay": ActionReplay(table)}, windows=windows,
                           env_config=cfg, device="cpu")
    per_contract = inst.commission + cfg.slippage_ticks * inst.tick_value
    for i, r in enumerate(results):
        end_cost = abs(position[i]) * per_contract
        assert r.window == windows[i]
        np.testing.assert_allclose(r.pnl[1:-1], money[i, :-1], rtol=0, atol=0.005)
        assert r.pnl[-1] == pytest.approx(money[i, -1] - end_cost, abs=0.005)
        assert r.total_pnl == pytest.approx(money[i].sum() - end_cost, abs=0.005)
        assert len(r.trades) == np.stack(closed)[:, i].sum() + (position[i] != 0)


def _stop_free_policies():
    n = 3000
    return {
        "targets": ActionReplay(random_table(n, 5, stops=False), label="targets"),
        "sparse": ActionReplay(np.repeat(random_table(n // 50, 6, stops=False), 50, axis=0),
                               label="sparse"),
    }


@pytest.mark.parametrize("flatten", [True, False])
def test_direct_path_equals_the_env(flatten):
    """Stop-free table policies computed all at once match stepping the env, column by column."""
    m, inst = synth(3000), instrument()
    cfg = EnvConfig(flatten_at_session_end=flatten, hold_cost=0.02)
    policies = _stop_free_policies()
    windows = [(0, 1200), (1000, 1150), (2000, 3000)]
    jobs = [Job(name, p, w) for name, p in policies.items() for w in windows]
    direct = Backtester(m.bars, inst, cfg, device="cpu").run(jobs)
    stepped = Backtester(m.bars, inst, cfg, device="cpu", direct=False).run(jobs)
    for a, b in zip(direct, stepped, strict=True):
        assert (a.engine["mode"], b.engine["mode"]) == ("direct", "lockstep")
        np.testing.assert_allclose(a.pnl, b.pnl, rtol=0, atol=0.005)
        np.testing.assert_array_equal(a.position, b.position)
        np.testing.assert_array_equal(a.actions, b.actions)
        for name, v in a.components.items():
            np.testing.assert_allclose(v, b.components[name], rtol=0, atol=0.005)
        for col in ("entry_bar", "exit_bar", "side", "exit_reason", "contracts"):
            np.testing.assert_array_equal(a.trades[col], b.trades[col])
        for col in ("entry_price", "exit_price", "pnl", "costs"):
            np.testing.assert_allclose(a.trades[col], b.trades[col], rtol=0, atol=0.005)
    reasons = set(np.concatenate([r.trades["exit_reason"] for r in direct]))
    assert reasons == ({"signal", "session", "end"} if flatten else {"signal", "end"})


def test_batched_policies_and_windows_equal_each_run_alone():
    """P policies x W windows of unequal length in one lock-step env == one run per pair."""
    m, inst = synth(3000), instrument()
    cfg = EnvConfig(flatten_at_session_end=True)
    policies = {"random:3": RandomActions(3), "random:4": RandomActions(4),
                "sparse": _stop_free_policies()["sparse"]}
    windows = [(200, 500), (900, 960), (1500, 1800)]
    tester = Backtester(m.bars, inst, cfg, device="cpu", direct=False)
    batched = tester.run([Job(n, p, w) for n, p in policies.items() for w in windows])
    assert batched[0].engine["n_envs"] == len(policies) * len(windows)
    alone = [tester.run([Job(n, p, w)])[0] for n, p in policies.items() for w in windows]
    for a, b in zip(batched, alone, strict=True):
        assert (a.name, a.window) == (b.name, b.window)
        np.testing.assert_array_equal(a.pnl, b.pnl)
        np.testing.assert_array_equal(a.position, b.position)
        np.testing.assert_array_equal(a.actions, b.actions)


@pytest.mark.parametrize("policy", ["buy-and-hold", "random"])
def test_the_trainers_test_rollout_reports_what_a_backtest_of_the_window_reports(policy):
    """Walk-forward test figures and `foxhunt backtest` figures of one window are the same
    numbers: same decisions, same fills, the same flatten at the window's last close."""
    from foxhunt.backtest import BuyAndHold
    from foxhunt.training.evaluate import constant_policy, rollout
    from foxhunt.training.walkforward import Window

    m, inst = synth(2000), instrument()
    bars, n = m.bars, len(m.bars)
    cfg = EnvConfig(window=4, flatten_at_session_end=False)
    market = MarketTensors.from_bars(bars, np.zeros((n, 3), dtype=np.float32), inst, cfg)
    window = (700, 1100)
    if policy == "buy-and-hold":
        spec, act = BuyAndHold(), constant_policy((1, 2, 0))
    else:
        table = random_table(n, 4, stops=False)
        spec = ActionReplay(table)

        def act(obs, bar):
            return torch.as_tensor(table, dtype=torch.long)[bar]
    ours = rollout(act, market, cfg, Window(*window), capital=100_000.0, periods_per_year=98_280)
    theirs = run_backtest(bars, inst, policies={"p": spec}, windows=[window], env_config=cfg,
                          device="cpu", periods_per_year=98_280)[0]
    assert theirs.pnl[0] == 0  # the first decision bar: nothing has filled yet
    np.testing.assert_allclose(ours.pnl, theirs.pnl[1:], rtol=0, atol=1e-6)
    assert ours.trades == len(theirs.trades) and ours.position[-1] == 0
    # The trainer's Sharpe is per-bar annualised: the backtest's `sharpe_per_bar`.
    for ours_value, key in ((ours.sharpe, "sharpe_per_bar"),
                            (ours.total_return, "total_return"),
                            (ours.max_drawdown, "max_drawdown")):
        assert ours_value == pytest.approx(theirs.metrics[key], rel=1e-9), key
