"""C51's taken-action loss: the Triton kernels (interpreted on the CPU, compiled on CUDA) return
the torch reference's loss, expected Q and gradients, and the reference is the network's own
loss (log-softmax over every action, then the taken rows)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from foxhunt.agents.dqn.c51_kernel import c51_taken_loss, c51_taken_loss_reference
from foxhunt.triton_support import HAS_TRITON, triton_runs_on
from tests.interpreted import run_interpreted

CUDA = torch.device("cuda") if torch.cuda.is_available() else None
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def streams(b: int, atoms: int, dtype: torch.dtype, device=None, seed: int = 0):
    """(value, adv, action, target, support) as the heads give them: adv a view into rows padded
    past branches x actions x atoms, as `GroupedLinear` leaves it (not contiguous)."""
    g = torch.Generator().manual_seed(seed)
    branches, actions = 3, 3
    value = torch.randn(b, atoms, generator=g)
    padded = torch.randn(b, branches, actions * atoms + 5, generator=g)
    adv = padded[..., : actions * atoms].unflatten(-1, (actions, atoms))
    action = torch.randint(0, actions, (b, branches), generator=g)
    target = torch.softmax(torch.randn(b, branches, atoms, generator=g), -1)
    support = torch.linspace(-10, 10, atoms)
    out = [value.to(dtype), adv.to(dtype), action, target, support]
    return [t.to(device) if device is not None else t for t in out]


def network_loss(value, adv, action, target, support):
    """What `c51_terms` computes from the network's log-probabilities of every action."""
    q_logits = value.float()[:, None, None, :] + adv.float() - adv.float().mean(-2, keepdim=True)
    log_probs = F.log_softmax(q_logits, dim=-1)
    index = action[:, :, None, None].expand(-1, -1, 1, log_probs.shape[-1])
    log_p = log_probs.gather(2, index).squeeze(2)
    return -(target * log_p).sum(-1).mean(-1)


def assert_matches_reference(fn, value, adv, action, target, support) -> None:
    tol = TOLERANCE[adv.dtype]
    results = []
    for f in (c51_taken_loss_reference, fn):
        v, a = value.clone().requires_grad_(), adv.clone().requires_grad_()
        loss, q, target_q = f(v, a, action, target, support)
        weights = torch.linspace(0.5, 1.5, loss.numel(), device=loss.device)
        (weights * loss).sum().backward()
        results.append((loss.detach(), q, target_q, v.grad, a.grad))
    for want, got in zip(*results, strict=True):
        torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


def test_the_reference_is_the_networks_loss_and_gradient():
    value, adv, action, target, support = streams(16, 11, torch.float32)
    v1, a1 = value.clone().requires_grad_(), adv.clone().requires_grad_()
    v2, a2 = value.clone().requires_grad_(), adv.clone().requires_grad_()
    loss, q, target_q = c51_taken_loss_reference(v1, a1, action, target, support)
    want = network_loss(v2, a2, action, target, support)
    torch.testing.assert_close(loss, want, rtol=1e-6, atol=1e-6)
    loss.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(v1.grad, v2.grad)
    torch.testing.assert_close(a1.grad, a2.grad)
    assert not q.requires_grad and q.shape == (16,)
    assert not target_q.requires_grad
    torch.testing.assert_close(target_q, (target * support).sum(-1).mean(-1))


def test_where_triton_does_not_run_it_is_the_reference():
    args = streams(8, 11, torch.float32)
    assert not triton_runs_on(args[1].device)
    for got, want in zip(c51_taken_loss(*args), c51_taken_loss_reference(*args), strict=True):
        assert torch.equal(got, want)


def test_wrong_shapes_are_clear_errors():
    value, adv, action, target, support = streams(8, 11, torch.float32)
    with pytest.raises(ValueError, match=r"^target must be \[8, 3, 11\]"):
        c51_taken_loss_reference(value, adv, action, target[:, :2], support)
    with pytest.raises(ValueError, match=r"^adv must be \[B, branches, actions, atoms\]"):
        c51_taken_loss_reference(value, adv[0], action, target, support)


def interpreted_checks() -> None:
    """Run by the interpreter test in a process started with TRITON_INTERPRET=1, where
    `c51_taken_loss` on the CPU is the kernels."""
    assert triton_runs_on("cpu")
    for atoms in (11, 51):
        for dtype in TOLERANCE:
            assert_matches_reference(c51_taken_loss, *streams(7, atoms, dtype, seed=atoms))


def test_kernels_match_the_reference_when_interpreted_on_cpu():
    run_interpreted("tests.agents.test_c51_kernel")


@pytest.mark.gpu
@pytest.mark.skipif(CUDA is None or not HAS_TRITON, reason="needs CUDA and triton")
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["fp32", "bf16"])
def test_kernels_match_the_reference_on_cuda_and_compile(dtype):
    args = streams(512, 51, dtype, CUDA)
    assert triton_runs_on(CUDA)
    assert_matches_reference(c51_taken_loss, *args)
    assert_matches_reference(torch.compile(c51_taken_loss, fullgraph=True), *args)
