"""The prioritised draw's Triton kernels return what the torch reference does: the same indices
and the same IS weights (interpreted on the CPU, compiled on CUDA)."""

from __future__ import annotations

import pytest
import torch

from foxhunt.replay.draw_kernel import draw, draw_reference
from foxhunt.triton_support import HAS_TRITON, triton_runs_on
from tests.interpreted import run_interpreted

CUDA = torch.device("cuda") if torch.cuda.is_available() else None


def masses(n_blocks: int, block: int, written: int, seed: int, device=None) -> torch.Tensor:
    """Masses over six orders of magnitude for the first `written` entries, zeros after, and a
    whole block of zeros inside the written part (overwritten with priority 0 never happens, but
    the search must step over empty blocks all the same)."""
    g = torch.Generator().manual_seed(seed)
    mass = torch.zeros(n_blocks * block)
    mass[:written] = 10 ** (6 * torch.rand(written, generator=g) - 3)
    if n_blocks > 3:
        mass[block : 2 * block] = 0.0
    return mass.to(device or "cpu")


def assert_draws_match(mass: torch.Tensor, block: int, u: torch.Tensor, newest: int,
                       beta: float = 0.6) -> None:
    newest_t = torch.tensor(newest, device=mass.device)
    beta_t = torch.tensor(beta, device=mass.device)
    want_i, want_w = draw_reference(mass, block, u, newest_t, beta_t)
    got_i, got_w = draw(mass, block, u, newest_t, beta_t)
    assert torch.equal(got_i, want_i), (got_i != want_i).nonzero()[:5]
    torch.testing.assert_close(got_w, want_w, rtol=2e-6, atol=0)


def cases(device=None) -> list[tuple]:
    g = torch.Generator().manual_seed(0)
    out = []
    # Draw counts keep the interpreted test to seconds (the interpreter runs each program).
    for n_blocks, block, written, draws in ((5, 32, 150, 1_000), (37, 64, 37 * 64, 300),
                                            (300, 128, 20_000, 100)):
        u = torch.rand(draws, generator=g, dtype=torch.float64).to(device or "cpu")
        out.append((masses(n_blocks, block, written, seed=n_blocks, device=device), block, u,
                    written - 1))
    edges = torch.tensor([0.0, 0.5, 1.0 - 1e-16, 1.0, 1.0 + 1e-12], dtype=torch.float64)
    out.append((masses(5, 32, 150, seed=1, device=device), 32, edges.to(device or "cpu"), 149))
    return out


def interpreted_checks() -> None:
    """Run by the interpreter test in a process started with TRITON_INTERPRET=1 (Triton reads
    it when the kernels are defined), where `draw` on the CPU is the kernels."""
    assert triton_runs_on("cpu")
    for mass, block, u, newest in cases():
        assert_draws_match(mass, block, u, newest)
    mass, block, u, newest = cases()[-1]
    index, _ = draw(mass, block, u, torch.tensor(newest), torch.tensor(1.0))
    assert index.tolist()[-2:] == [149, 149]  # round-off past the total: the newest index


def test_kernels_match_the_reference_when_interpreted_on_cpu():
    run_interpreted("tests.replay.test_draw_kernel")


def test_triton_runs_on_cuda_with_triton_and_the_draw_is_the_reference_elsewhere():
    mass, block, u, newest = cases()[0]
    args = (mass, block, u, torch.tensor(newest), torch.tensor(0.6))
    for got, want in zip(draw(*args), draw_reference(*args), strict=True):
        assert torch.equal(got, want)
    assert not triton_runs_on(torch.device("cpu"))
    assert triton_runs_on(torch.device("cuda")) == HAS_TRITON


def test_bad_operands_are_clear_errors_on_either_path():
    mass = torch.zeros(100)
    with pytest.raises(ValueError, match="whole blocks of 32"):
        draw(mass, 32, torch.rand(4, dtype=torch.float64), torch.tensor(0), torch.tensor(1.0))
    with pytest.raises(ValueError, match="power of two"):
        draw(torch.zeros(96), 48, torch.rand(4, dtype=torch.float64), torch.tensor(0),
                    torch.tensor(1.0))


@pytest.mark.gpu
@pytest.mark.skipif(CUDA is None, reason="needs CUDA")
def test_kernels_match_the_reference_on_cuda_and_replay_in_a_cuda_graph():
    for mass, block, u, newest in cases(CUDA):
        assert_draws_match(mass, block, u, newest)
    # The replay's own sizes: ~1M masses in blocks of 1024, 512 draws, compiled and captured.
    mass = masses(977, 1024, 999_424, seed=5, device=CUDA)
    u = torch.rand(512, dtype=torch.float64, device=CUDA)
    newest, beta = torch.tensor(999_423, device=CUDA), torch.tensor(0.4, device=CUDA)
    want = draw_reference(mass, 1024, u, newest, beta)
    assert triton_runs_on(CUDA)
    compiled = torch.compile(lambda: draw(mass, 1024, u, newest, beta), fullgraph=True)
    for got, ref in zip(compiled(), want, strict=True):
        torch.testing.assert_close(got, ref, rtol=2e-6, atol=0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        compiled()  # warm-up off the capture stream, as torch.cuda.graphs asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = compiled()
    u.copy_(torch.rand(512, dtype=torch.float64, device=CUDA))
    graph.replay()
    for got, ref in zip(out, draw_reference(mass, 1024, u, newest, beta), strict=True):
        torch.testing.assert_close(got, ref, rtol=2e-6, atol=0)
