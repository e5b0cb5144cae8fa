"""On CUDA the replay's hot path has no host sync and replays from a captured CUDA graph."""

from __future__ import annotations

import pytest
import torch

from foxhunt.replay import PrioritizedReplay, ReplayConfig
from foxhunt.replay.prioritized import ReplayBatch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

B = 256


def filled_buffer() -> PrioritizedReplay:
    cfg = ReplayConfig(capacity=64 * 50, n_step=3, beta_anneal_steps=20)
    rb = PrioritizedReplay(cfg, n_envs=64, pos_dim=6, device="cuda")
    g, E = torch.Generator().manual_seed(0), 64
    for t in range(70):  # wraps the 50-slot ring
        step = {
            "bar": torch.full((E,), t),
            "pos_state": torch.rand(E, 6, generator=g),
            "action": torch.randint(0, 3, (E, 3), generator=g),
            "reward": torch.randn(E, generator=g),
            "terminated": torch.rand(E, generator=g) < 0.1,
            "truncated": torch.rand(E, generator=g) < 0.1,
            "next_bar": torch.full((E,), t + 1),
            "next_pos_state": torch.rand(E, 6, generator=g),
        }
        rb.add(**{k: v.cuda() for k, v in step.items()})
    return rb


def train_step(rb: PrioritizedReplay) -> ReplayBatch:
    batch = rb.sample(B)
    rb.update_priorities(batch.index, batch.ret.abs() * batch.weight)  # stands in for |delta|
    return batch


def clone(batch: ReplayBatch) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in vars(batch).items()}


def test_sample_and_update_run_without_host_sync():
    rb = filled_buffer()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            train_step(rb)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_graphed_sample_and_update_match_eager_with_the_same_seed():
    eager, graphed = filled_buffer(), filled_buffer()
    saved = [t.clone() for t in graphed._tensors()]
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up before capture, as torch.cuda.graphs recommends
        for _ in range(3):
            train_step(graphed)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = train_step(graphed)
    for t, s in zip(graphed._tensors(), saved):  # undo the warm-up, in place
        t.copy_(s)

    torch.cuda.manual_seed(1234)
    expected = [clone(train_step(eager)) for _ in range(5)]
    torch.cuda.manual_seed(1234)
    for want in expected:
        graph.replay()
        for name, value in want.items():
            assert torch.equal(getattr(static, name), value), name
    assert torch.equal(graphed.priority_alpha, eager.priority_alpha)
    assert torch.equal(graphed.sample_calls, eager.sample_calls)
    assert torch.equal(graphed.max_priority, eager.max_priority)


def test_graphed_add_writes_successive_slots():
    rb = PrioritizedReplay(ReplayConfig(capacity=4 * 5), n_envs=4, pos_dim=2, device="cuda")
    cuda, long, bool_ = "cuda", torch.long, torch.bool
    step = [  # static inputs: bar, pos_state, action, reward, terminated, truncated, next_*
        torch.zeros(4, dtype=long, device=cuda), torch.zeros(4, 2, device=cuda),
        torch.zeros(4, 3, dtype=long, device=cuda), torch.zeros(4, device=cuda),
        torch.zeros(4, dtype=bool_, device=cuda), torch.zeros(4, dtype=bool_, device=cuda),
        torch.zeros(4, dtype=long, device=cuda), torch.zeros(4, 2, device=cuda),
    ]  # fmt: skip
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        rb.add(*step)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        rb.add(*step)
    rb.reset()
    for t in range(7):  # wraps the 5-slot ring
        step[0].fill_(t)  # static inputs, filled in place
        graph.replay()
    torch.cuda.synchronize()
    assert rb.cursor.item() == 2 and rb.size.item() == 5
    assert rb.bar[:, 0].tolist() == [5, 6, 2, 3, 4]
