"""SideStreams: parallel branches on CUDA, program order everywhere else."""

from __future__ import annotations

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
