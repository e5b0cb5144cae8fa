"""On CUDA: the graphed (and compiled) lock-step loop keeps the CPU's accounting, no host syncs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.backtest import Backtester, Job, checkpoint_policy
from foxhunt.backtest.engine import StepLoop
from foxhunt.backtest.strategies import ActionReplay, RandomActions
from foxhunt.env import TradingVecEnv

from .builders import instrument, synth, write_checkpoint

pytestmark = pytest.mark.gpu
WINDOWS = [(300, 900), (1000, 1100), (1500, 2400)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    m, inst = synth(2500, signal=0.3), instrument()
    path = write_checkpoint(tmp_path_factory.mktemp("ckpt") / "fold0.pt", m.bars, inst)
    policy = checkpoint_policy(path, m.bars, inst)
    return m.bars, inst, policy


def _run(setup, device, **options):
    bars, inst, policy = setup
    tester = Backtester(bars, inst, policy.env_config, device=device, **options)
    jobs = [Job(n, p, w) for n, p in (("agent", policy), ("random", RandomActions(2)))
            for w in WINDOWS]
    return tester.run(jobs)


def test_graphed_compiled_cuda_pays_what_the_cpu_env_pays(setup):
    """Replaying the CUDA run's own decisions on the CPU gives the same money to the cent; the
    agent's decisions agree with the CPU's except where float rounding breaks a near-tie."""
    bars, inst, policy = setup
    gpu = _run(setup, "cuda")
    assert (gpu[0].engine["mode"], gpu[0].engine["graphs"], gpu[0].engine["compiled"]) == (
        "lockstep", True, True)
    cpu = _run(setup, "cpu")
    for g, c in zip(gpu, cpu, strict=True):
        table = np.zeros((len(bars), 3), dtype=np.uint8)
        table[g.window[0] : g.window[1]] = g.actions
        tester = Backtester(bars, inst, policy.env_config, device="cpu", direct=False)
        replay = tester.run([Job("replay", ActionReplay(table), g.window)])[0]
        np.testing.assert_allclose(g.pnl, replay.pnl, rtol=0, atol=0.005)
        np.testing.assert_array_equal(g.position, replay.position)
        assert (g.actions == c.actions).all(axis=1).mean() > 0.99


def test_graph_replay_equals_eager_steps(setup):
    """Same kernels, replayed: identical records. Compiled kernels round differently, so the
    agent's decisions may differ only where a near-tie flips. Every job steps lock-step (the
    random tables too, which would otherwise take the direct path)."""
    eager = _run(setup, "cuda", graphs=False, compile=False, direct=False)
    graphed = _run(setup, "cuda", graphs=True, compile=False, direct=False)
    compiled = _run(setup, "cuda", graphs=False, compile=True, direct=False)
    for a, b, c in zip(graphed, eager, compiled, strict=True):
        assert a.engine["graphs"] and c.engine["compiled"]
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_allclose(a.pnl, b.pnl, rtol=0, atol=1e-9)
        assert (c.actions == b.actions).all(axis=1).mean() > 0.99


def test_the_step_loop_never_synchronises_with_the_host(setup):
    bars, inst, policy = setup
    tester = Backtester(bars, inst, policy.env_config, device="cuda")
    env = TradingVecEnv(tester.market, tester.env_config.model_copy(update={"episode_len": 200}),
                        tester.cost, n_envs=4, device="cuda")
    agent = policy.build(tester.market, env.config)
    table = RandomActions(3).build(tester.market, env.config)
    loop = StepLoop(env, ((agent, 0, 2), (table, 2, 4)))
    starts = torch.tensor([300, 800, 300, 800], device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = loop.run(starts, 200, graphs=False)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert out.shape[:2] == (200, 4)
