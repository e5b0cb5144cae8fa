"""Greedy C51 acting in one pass: the torch reference is what the network computes, and the
Triton kernel (interpreted on CPU, compiled on CUDA) returns what the reference does, for the
network's strided head layout, with or without dueling, in float32 or bfloat16."""

from __future__ import annotations

import pytest
import torch

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.agents.dqn.act_kernel import greedy_c51, greedy_c51_reference
from foxhunt.triton_support import triton_runs_on
from tests.interpreted import run_interpreted

OBS, BRANCHES, ACTIONS = 12, 3, 3
ATOMS = (11, 21, 51)
ATOL = {torch.float32: 1e-5, torch.bfloat16: 1e-4}
CLEAR_GAP = 1e-4
"""Actions must agree wherever the best Q beats the runner-up by more than this."""

CUDA = torch.device("cuda") if torch.cuda.is_available() else None
needs_cuda = pytest.mark.skipif(CUDA is None, reason="needs CUDA")


def heads_of(net: BranchingQNetwork, obs: torch.Tensor):
    """(value [N, K] or None, uncentred advantages [N, Br, A, K]) from the network's own heads."""
    return net.heads.logits(net.features(obs))


def head_layout(n, atoms, dtype=torch.float32, device="cpu", dueling=True, seed=0):
    """(value, adv, support) laid out as the network's GroupedLinear heads leave them: adv is a
    transpose of a [Br, N, A*K + pad] buffer sliced to A*K, value a slice of [N, K + pad]."""
    g = torch.Generator().manual_seed(seed)
    width = ACTIONS * atoms
    adv_buf = 2 * torch.randn(BRANCHES, n, width + -width % 8, generator=g)
    adv = adv_buf.to(device, dtype).transpose(0, 1)[..., :width].unflatten(-1, (ACTIONS, atoms))
    value = None
    if dueling:
        value = (2 * torch.randn(n, atoms + -atoms % 8, generator=g)).to(device, dtype)[:, :atoms]
    return value, adv, torch.linspace(-10.0, 10.0, atoms, device=device)


def assert_matches_reference(greedy, value, adv, support) -> None:
    action, q = greedy(value, adv, support)
    want_action, want_q = greedy_c51_reference(value, adv, support)
    assert q.dtype == torch.float32 and action.dtype == torch.long
    torch.testing.assert_close(q, want_q, atol=ATOL[adv.dtype], rtol=0)
    top2 = want_q.topk(2, dim=-1).values
    clear = top2[..., 0] - top2[..., 1] > CLEAR_GAP
    assert clear.any()
    assert torch.equal(action[clear], want_action[clear])


def tied_inputs(device="cpu"):
    """Every action of every branch has the same logits, so every Q is equal."""
    g = torch.Generator().manual_seed(1)
    adv = torch.randn(5, BRANCHES, 1, 51, generator=g).expand(5, BRANCHES, ACTIONS, 51)
    value = torch.randn(5, 51, generator=g)
    return value.to(device), adv.to(device), torch.linspace(-10.0, 10.0, 51, device=device)


def best_pair_tied_inputs(device="cpu"):
    """Action 0 is uniform over the atoms (Q = 0); actions 1 and 2 lean to the top, equally."""
    adv = torch.zeros(4, BRANCHES, ACTIONS, 51)
    adv[:, :, 1:] = torch.linspace(0.0, 3.0, 51)
    return None, adv.to(device), torch.linspace(-10.0, 10.0, 51, device=device)


def assert_ties_go_to_the_lowest_action(greedy) -> None:
    action, q = greedy(*tied_inputs())
    assert torch.equal(q, q[..., :1].expand_as(q))
    assert torch.equal(action, torch.zeros_like(action))
    action, q = greedy(*best_pair_tied_inputs())
    assert torch.equal(q[..., 1], q[..., 2]) and (q[..., 1] > q[..., 0]).all()
    assert torch.equal(action, torch.ones_like(action))


# The reference is the network's computation.


@pytest.mark.parametrize("dueling", [True, False], ids=["dueling", "no_value"])
def test_reference_is_the_networks_q_values_and_greedy_actions(dueling):
    torch.manual_seed(0)
    net = BranchingQNetwork(OBS, AgentConfig(hidden=32, atoms=51, dueling=dueling))
    obs = torch.randn(64, OBS)
    with torch.no_grad():
        value, adv = heads_of(net, obs)
        assert (value is None) == (not dueling)
        action, q = greedy_c51_reference(value, adv, net.support)
        torch.testing.assert_close(q, net.q_values(obs))
    assert torch.equal(action, net.act(obs))


def test_reference_computes_in_float32_from_bfloat16_inputs():
    value, adv, support = head_layout(9, 51, torch.bfloat16)
    action, q = greedy_c51_reference(value, adv, support)
    want_action, want_q = greedy_c51_reference(value.float(), adv.float(), support)
    assert q.dtype == torch.float32
    assert torch.equal(q, want_q) and torch.equal(action, want_action)


def test_equal_q_values_choose_the_lowest_action():
    assert_ties_go_to_the_lowest_action(greedy_c51_reference)


def test_where_triton_does_not_run_greedy_c51_is_the_reference():
    value, adv, support = head_layout(7, 21)
    assert not triton_runs_on(adv.device)
    for got, want in zip(
        greedy_c51(value, adv, support), greedy_c51_reference(value, adv, support)
    ):
        assert torch.equal(got, want)


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


# The kernel returns what the reference does: interpreted on CPU, compiled on CUDA.


def interpreted_checks() -> None:
    """Run by the interpreter test in a process started with TRITON_INTERPRET=1 (Triton reads
    it when the kernel is defined, so it cannot be switched on inside this process), where
    `greedy_c51` on the CPU is the kernel."""
    assert triton_runs_on("cpu")
    for atoms in ATOMS:
        for dtype in ATOL:
            for n in (1, 20):
                for dueling in (True, False):
                    layout = head_layout(n, atoms, dtype, dueling=dueling, seed=n)
                    assert_matches_reference(greedy_c51, *layout)
    assert_ties_go_to_the_lowest_action(greedy_c51)


def test_kernel_matches_reference_when_interpreted_on_cpu():
    run_interpreted("tests.agents.test_act_kernel")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("n", [1, 7, 8192, 10000])
@pytest.mark.parametrize("atoms", ATOMS)
@pytest.mark.parametrize("dtype", list(ATOL), ids=["fp32", "bf16"])
@pytest.mark.parametrize("dueling", [True, False], ids=["dueling", "no_value"])
def test_kernel_matches_reference_on_cuda(dueling, dtype, atoms, n):
    assert triton_runs_on(CUDA)
    layout = head_layout(n, atoms, dtype, CUDA, dueling=dueling, seed=n)
    assert not layout[1].is_contiguous()
    assert_matches_reference(greedy_c51, *layout)


@pytest.mark.gpu
@needs_cuda
def test_equal_q_values_choose_the_lowest_action_on_cuda():
    def on_cuda(value, adv, support):
        value = None if value is None else value.to(CUDA)
        return [t.cpu() for t in greedy_c51(value, adv.to(CUDA), support.to(CUDA))]

    assert_ties_go_to_the_lowest_action(on_cuda)


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
