"""On CUDA: the same numbers as on the CPU, no host synchronisation, and a capturable step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.env import EnvConfig, MarketTensors, TradingVecEnv

from .env_builders import CHICAGO, SIZES_AND_STOPS, es, random_actions, random_bars

pytestmark = pytest.mark.gpu
N_BARS, N_ENVS = 400, 64


def make_env(device: str, generator: torch.Generator | None = None, **config) -> TradingVecEnv:
    cfg = EnvConfig(**{"window": 8, "episode_len": 50, "flatten_at_session_end": True,
                       **SIZES_AND_STOPS, **config})
    feats = np.random.default_rng(0).standard_normal((N_BARS, 5)).astype(np.float32)
    market = MarketTensors.from_bars(
        random_bars(0, N_BARS, gap_hours=True), feats, es(CHICAGO), cfg, device
    )
    return TradingVecEnv(market, cfg, n_envs=N_ENVS, generator=generator)


def test_cuda_accounting_matches_the_cpu_to_the_cent():
    starts = torch.arange(N_ENVS) * 5 + 7
    actions = random_actions(0, 49, N_ENVS)
    results = []
    for device in ("cpu", "cuda"):
        env = make_env(device)
        env.reset(starts.to(device))
        results.append([env.step(a.to(device)) for a in actions])
    for cpu, gpu in zip(*results, strict=True):
        torch.testing.assert_close(gpu.equity.cpu(), cpu.equity, rtol=0, atol=1e-9)
        torch.testing.assert_close(gpu.obs.cpu(), cpu.obs)
        for name, v in cpu.components.items():
            torch.testing.assert_close(gpu.components[name].cpu(), v, rtol=0, atol=1e-9)


def test_step_and_reset_do_not_synchronise_with_the_host():
    env = make_env("cuda", torch.Generator(device="cuda").manual_seed(0), ruin_loss=500.0)
    actions = random_actions(0, 120, N_ENVS).cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        env.reset()
        for a in actions:
            r = env.step(a)
        env.observe(*env.state())
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert r.obs.shape == (N_ENVS, env.obs_dim)


def test_step_captured_in_a_cuda_graph_replays_like_eager_steps():
    actions = random_actions(1, 30, N_ENVS).cuda()
    eager_env, graph_env = make_env("cuda"), make_env("cuda")
    static_action = actions[0].clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        graph_env.step(static_action)  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = graph_env.step(static_action)
    starts = torch.arange(N_ENVS, device="cuda") * 5 + 7
    for env in (eager_env, graph_env):
        env.reset(starts)
    for a in actions:
        eager = eager_env.step(a)
        static_action.copy_(a)
        graph.replay()
        assert not bool((eager.terminated | eager.truncated).any())  # starts leave 30 steps
        torch.testing.assert_close(out.equity, eager.equity, rtol=0, atol=1e-9)
        torch.testing.assert_close(out.reward, eager.reward)
        torch.testing.assert_close(out.obs, eager.obs)
