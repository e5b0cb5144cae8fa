"""The act kernel's own contract: what `greedy_c51` and its torch reference refuse, the
reference's float32 arithmetic on bfloat16 inputs, and the kernel inside `torch.compile` and a
CUDA graph. That its values are the network's (interpreted on the CPU, compiled on CUDA) is
tests/agents/test_forward_paths.py's, with the other forward paths."""

from __future__ import annotations

import pytest
import torch

from foxhunt.agents.dqn.act_kernel import greedy_c51, greedy_c51_reference

BRANCHES, ACTIONS = 3, 3

CUDA = torch.device("cuda") if torch.cuda.is_available() else None
needs_cuda = pytest.mark.skipif(CUDA is None, reason="needs CUDA: the compiled Triton kernel")


def head_layout(n, atoms, dtype=torch.float32, device="cpu", seed=0):
    """(value, adv, support) laid out as the network's GroupedLinear heads leave them: adv is a
    transpose of a [Br, N, A*K + pad] buffer sliced to A*K, value a slice of [N, K + pad]."""
    g = torch.Generator().manual_seed(seed)
    width = ACTIONS * atoms
    adv_buf = 2 * torch.randn(BRANCHES, n, width + -width % 8, generator=g)
    adv = adv_buf.to(device, dtype).transpose(0, 1)[..., :width].unflatten(-1, (ACTIONS, atoms))
    value = (2 * torch.randn(n, atoms + -atoms % 8, generator=g)).to(device, dtype)[:, :atoms]
    return value, adv, torch.linspace(-10.0, 10.0, atoms, device=device)


def test_reference_computes_in_float32_from_bfloat16_inputs():
    value, adv, support = head_layout(9, 51, torch.bfloat16)
    action, q = greedy_c51_reference(value, adv, support)
    want_action, want_q = greedy_c51_reference(value.float(), adv.float(), support)
    assert q.dtype == torch.float32
    assert torch.equal(q, want_q) and torch.equal(action, want_action)


@pytest.mark.parametrize(
    ("value", "adv", "support", "names"),
    [
        (None, torch.zeros(4, 3, 51), torch.zeros(51), "adv"),
        (None, torch.zeros(4, 3, 0, 51), torch.zeros(51), "adv"),
        (None, torch.zeros(4, 3, 3, 51, dtype=torch.long), torch.zeros(51), "adv"),
        (None, torch.zeros(4, 3, 3, 51), torch.zeros(21), "support"),
        (torch.zeros(4, 21), torch.zeros(4, 3, 3, 51), torch.zeros(51), "value"),
        (torch.zeros(5, 51), torch.zeros(4, 3, 3, 51), torch.zeros(51), "value"),
    ],
    ids=["adv_rank", "no_actions", "adv_dtype", "support_atoms", "value_atoms", "value_rows"],
)
def test_bad_shapes_are_refused_naming_the_argument(value, adv, support, names):
    for greedy in (greedy_c51, greedy_c51_reference):
        with pytest.raises(ValueError, match=f"^{names} "):
            greedy(value, adv, support)


@pytest.mark.gpu
@needs_cuda
def test_kernel_compiles_without_graph_breaks_and_replays_in_a_cuda_graph():
    value, adv, support = head_layout(8192, 51, torch.bfloat16, CUDA)
    compiled = torch.compile(greedy_c51, fullgraph=True, dynamic=False)
    eager = greedy_c51(value, adv, support)
    for got, want in zip(compiled(value, adv, support), eager):
        assert torch.equal(got, want)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        compiled(value, adv, support)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = compiled(value, adv, support)

    fresh_value, fresh_adv, _ = head_layout(8192, 51, torch.bfloat16, CUDA, seed=7)
    value.copy_(fresh_value)
    adv.copy_(fresh_adv)
    graph.replay()
    torch.cuda.synchronize()
    for got, want in zip(captured, greedy_c51(value, adv, support)):
        assert torch.equal(got, want)
