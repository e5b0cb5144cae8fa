"""SideStreams: parallel branches on CUDA, program order everywhere else."""

from __future__ import annotations

import pytest
import torch

from foxhunt.training.graphs import SideStreams


def test_off_cuda_the_branches_run_inline_in_program_order():
    side = SideStreams(torch.device("cpu"), 2)
    assert side.streams == []
    order = []
    x = torch.zeros(3)
    with side.branch(0):
        order.append("branch 0")
        x += 1
    with side.branch(1):
        side.wait(1, 0)
        order.append("branch 1")
        x *= 2
    order.append("main")
    side.join()
    assert order == ["branch 0", "branch 1", "main"] and torch.equal(x, torch.full((3,), 2.0))


def test_disabled_side_streams_run_inline_on_cuda_too():
    assert SideStreams(torch.device("cuda"), 2, enabled=False).streams == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_graph_that_enters_one_branch_joins_only_that_branch():
    """A capture may use fewer branches than exist (a collect step uses one of the update's
    two): waiting on a stream that took no part in the capture would invalidate it."""
    side = SideStreams(torch.device("cuda"), 2)
    x = torch.zeros(4, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        with side.branch(0):
            x.add_(1)
        side.join()
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [2.0] * 4
