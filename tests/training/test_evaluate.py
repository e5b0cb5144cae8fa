"""Greedy rollouts (`evaluate.Rollouts`): stepped eagerly on the CPU they are, bit for bit, the
plain loop of one fresh env per rollout that validation has always been (`reference_rollouts`
below, the specification); a `Rollouts` run again with changed weights is a fresh rollout with
those weights; windows with different policies stepped together are each their own rollout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.env import ObservationSpec, fills
from foxhunt.env.vector_env import TradingVecEnv
from foxhunt.training.evaluate import (
    Rollouts,
    _chunking,
    _result,
    constant_policy,
    greedy_policy,
    rollouts,
)
from foxhunt.training.trainer import FULL_LONG, WalkForwardTrainer

from .builders import instrument, pipeline, position_policy, synth, tiny_spec

CPU = torch.device("cpu")


@torch.no_grad()
def reference_rollouts(policy, market, env_config, windows, capital, chunks):
    """The eager loop, spelled out: per group of windows with equal steps, one env on the market
    handed in (time in trade counted over the training episode length), one policy pass and one
    env step per step, each piece's position closed at its last bar's close."""
    observation = ObservationSpec(env_config.window, market.n_features)
    plans = [_chunking(observation, w, chunks) for w in windows]
    out = {}
    for steps in dict.fromkeys(s for _, s in plans):
        group = [i for i, (_, s) in enumerate(plans) if s == steps]
        starts = torch.cat([plans[i][0] + torch.arange(chunks) * steps for i in group])
        lo, hi = min(plans[i][0] for i in group), max(windows[i].stop for i in group)
        cfg = env_config.model_copy(update={"episode_len": steps})
        env = TradingVecEnv(market, cfg, n_envs=starts.numel(), start_range=(lo, hi),
                            trade_clock=env_config.episode_len)
        obs = env.reset(starts)
        money, position, actions, trades = [], [], [], []
        for _ in range(steps):
            action = policy(obs, env.state()[0])
            r = env.step(action)
            money.append(r.components["pnl"] - r.components["cost"])
            position.append(r.position)
            actions.append(action)
            trades.append(r.trades_closed)
            obs = r.obs
        exit_fill = fills.close_out(r.position, market.close[starts + steps], env.cost)
        money[-1] = money[-1] - exit_fill.cost
        position[-1] = r.position + exit_fill.qty
        trades.append(exit_fill.closed_trade.long())
        money, position = torch.stack(money, 1), torch.stack(position, 1)
        actions, trades = torch.stack(actions, 1), torch.stack(trades, 1).sum(1)
        for k, i in enumerate(group):
            piece = slice(k * chunks, (k + 1) * chunks)
            out[i] = _result(market, windows[i], starts[piece].numpy(), steps,
                             money[piece].reshape(-1).numpy(),
                             position[piece].reshape(-1).numpy(),
                             actions[piece].reshape(-1, actions.shape[-1]).numpy(),
                             int(trades[piece].sum()), capital, None)
    return [out[i] for i in range(len(windows))]


def assert_identical(got, want):
    for name in ("pnl", "position", "action", "bar"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert got.summary() == want.summary() and got.trades == want.trades


@pytest.fixture(scope="module")
def fold():
    market = synth(3_000, 0.3, seed=11)
    trainer = WalkForwardTrainer(tiny_spec(), market.bars, pipeline(), instrument(),
                                 "/tmp/unused", CPU)
    ctx = trainer.start_fold(trainer.folds[0])
    ctx.learner.online.eval()
    return trainer, ctx, market


def policies(ctx, market):
    return {"greedy": greedy_policy(ctx.learner.online),
            "buy_and_hold": constant_policy(FULL_LONG),
            "oracle": position_policy(torch.as_tensor(market.signal))}


@pytest.mark.parametrize("name", ["greedy", "buy_and_hold", "oracle"])
@pytest.mark.parametrize("case", ["judge", "test", "odd_chunks"])
def test_cpu_rollouts_equal_the_plain_eager_loop_bit_for_bit(fold, name, case):
    trainer, ctx, market = fold
    f, spec = ctx.fold, trainer.spec
    windows, where, chunks = {
        "judge": ([f.val, trainer.train_slice(f)], ctx.val_market, 8),  # validation's rollout
        "test": ([f.test], ctx.test_market, 1),  # the test window, one continuous episode
        "odd_chunks": ([f.val, trainer.train_slice(f)], ctx.val_market, 3),
    }[case]
    policy = policies(ctx, market)[name]
    got = rollouts(policy, where, spec.env, windows, 1e5, chunks)
    want = reference_rollouts(policy, where, spec.env, windows, 1e5, chunks)
    for a, b in zip(got, want, strict=True):
        assert_identical(a, b)
    assert got[0].bar[0] == windows[0].start  # decision bars are the market's own


def test_running_again_is_a_fresh_rollout_with_the_weights_as_they_are_then(fold):
    trainer, ctx, _ = fold
    f, net = ctx.fold, ctx.learner.online
    windows = [f.val, trainer.train_slice(f)]
    runner = Rollouts(greedy_policy(net), ctx.val_market, trainer.spec.env, windows, 1e5, 8)
    before = runner.run()
    saved = {k: v.clone() for k, v in net.state_dict().items()}
    try:
        with torch.no_grad():
            for p in net.parameters():
                p.add_(torch.randn_like(p) * 0.5)
        after = runner.run()
        want = reference_rollouts(greedy_policy(net), ctx.val_market, trainer.spec.env,
                                  windows, 1e5, 8)
    finally:
        net.load_state_dict(saved)
    for a, b in zip(after, want, strict=True):
        assert_identical(a, b)
    assert not np.array_equal(before[0].action, after[0].action)  # the weights did change it


def test_windows_with_their_own_policies_are_each_their_own_rollout(fold):
    """The test phase's baselines, flat and buy-and-hold, stepped together in one env."""
    trainer, ctx, _ = fold
    f, env = ctx.fold, trainer.spec.env
    flat, held = constant_policy((0, 0, 0)), constant_policy(FULL_LONG)
    got = Rollouts([flat, held], ctx.test_market, env, [f.test, f.test], 1e5, 1).run()
    assert_identical(got[0], reference_rollouts(flat, ctx.test_market, env, [f.test], 1e5, 1)[0])
    assert_identical(got[1], reference_rollouts(held, ctx.test_market, env, [f.test], 1e5, 1)[0])
    assert got[0].trades == 0 and got[1].trades > 0


def test_graphs_and_compile_are_cuda_only(fold):
    trainer, ctx, _ = fold
    runner = Rollouts(constant_policy(FULL_LONG), ctx.test_market, trainer.spec.env,
                      [ctx.fold.test], 1e5, 1, graphs=True, compile=True)
    runner.run()
    assert not runner.captured and not runner.compiled
