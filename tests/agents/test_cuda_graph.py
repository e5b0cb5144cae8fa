"""On CUDA a whole reference update (noise, loss, backward, clip, Adam, Polyak) has no host sync
and, captured once as a CUDA graph, learns the known Q-values when replayed."""

from __future__ import annotations

import copy

import pytest
import torch

from foxhunt.agents.dqn import (
    AgentConfig,
    BranchingQNetwork,
    UpdateBatch,
    reference_update,
)
from foxhunt.agents.dqn.target import PolyakUpdate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

OBS, N = 4, 16


def tiny_problem():
    """As in test_update: A ends with return 1.5; B loops with reward 1 and discount 0.5."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.eye(OBS)[0], torch.eye(OBS)[1]
    obs = torch.cat([a.expand(N, OBS), b.expand(N, OBS)])
    batch = UpdateBatch(
        obs=obs,
        action=torch.randint(0, 3, (2 * N, 3), generator=g),
        ret=torch.cat([torch.full((N,), 1.5), torch.ones(N)]),
        discount=torch.cat([torch.zeros(N), torch.full((N,), 0.5)]),
        next_obs=obs.clone(),
        weight=torch.ones(2 * N),
        direction=torch.cat([torch.ones(N), torch.full((N,), -1)]).long(),
    )
    return UpdateBatch(*(t.cuda() for t in batch))


def make_update(head: str, amp: bool = False):
    torch.manual_seed(0)
    cfg = AgentConfig(hidden=64, head=head, iqn_taus=16, iqn_target_taus=16)
    online = BranchingQNetwork(OBS, cfg).cuda()
    target = copy.deepcopy(online)
    opt = torch.optim.Adam(online.parameters(), lr=3e-3, eps=cfg.adam_eps, capturable=True)
    batch = tiny_problem()

    def update():
        online.reset_noise()
        target.reset_noise()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            out = reference_update(online, target, batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(online.parameters(), cfg.grad_clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=False)
        PolyakUpdate(target, online, 0.1)()
        return out

    return online, update


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_update_runs_without_host_sync(head):
    _, update = make_update(head)
    update()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            update()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_captured_update_learns_the_known_q_values(head, amp):
    online, update = make_update(head, amp)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            update()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = update()
    graph.replay()
    first = out.metrics["q_loss"].clone()
    for _ in range(250):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(out.loss) and out.metrics["q_loss"] < first
    q = copy.deepcopy(online).eval().q_values(torch.eye(OBS, device="cuda")[:2])
    tol = 0.1 if head == "c51" else 0.2
    torch.testing.assert_close(q[0], torch.full_like(q[0], 1.5), atol=tol, rtol=0)
    torch.testing.assert_close(q[1], torch.full_like(q[1], 2.0), atol=tol, rtol=0)
