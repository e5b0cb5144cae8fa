"""C51's loss on the taken actions, from the raw dueling streams, in one Triton kernel forward and
one backward.

For each sample and branch the taken action's logits are V + A(a) - mean_a' A(a'), its
log-probabilities their log-softmax over atoms, and its loss the cross-entropy against the
projected target; the sample's loss is the mean over branches. Written in torch (the network's
log-softmax over every action, then the taken rows), inductor turns that and its gradient into
about ten kernels on the update's critical path; `c51_taken_loss` where Triton runs
(`foxhunt.triton_support`) is one kernel each way.
The backward needs no saved softmax: it recomputes the taken rows from the streams and writes

    dL/dlogits = g (p * sum_k t_k - t),   dV = sum over branches,
    dA(a) = dL/dlogits * (1[a = taken] - 1 / actions),

with g the incoming gradient over the branch count. `c51_taken_loss_reference` is the same in
torch and defines what the kernels must return. Both compute in float32 whatever the streams'
dtype and also return, for the metrics and without gradient, each sample's expected Q of the
taken actions and of its target (means over branches): the kernel reads the target and the
support anyway, and the update's critical path then has no separate reductions for them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from foxhunt.triton_support import HAS_TRITON, tl, triton, triton_runs_on


def _check(value: Tensor, adv: Tensor, action: Tensor, target: Tensor, support: Tensor) -> None:
    if adv.dim() != 4:
        raise ValueError(f"adv must be [B, branches, actions, atoms], got {tuple(adv.shape)}")
    b, branches, _, atoms = adv.shape
    for name, t, shape in (("value", value, (b, atoms)), ("action", action, (b, branches)),
                           ("target", target, (b, branches, atoms)), ("support", support, (atoms,))):
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} must be {list(shape)}, got {list(t.shape)}")


def c51_taken_loss_reference(value: Tensor, adv: Tensor, action: Tensor, target: Tensor,
                             support: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(loss [B] float32 with gradients to value and adv; expected Q of the taken actions and
    of the target, [B] float32 each, without):
    value [B, K] and uncentred advantages [B, Br, A, K] (the dueling streams' raw outputs),
    taken actions [B, Br], targets [B, Br, K], support [K]."""
    _check(value, adv, action, target, support)
    logits = value.float()[:, None, None, :] + (adv.float() - adv.float().mean(-2, keepdim=True))
    index = action[:, :, None, None].expand(-1, -1, 1, logits.shape[-1])
    log_p = F.log_softmax(logits.gather(2, index).squeeze(2), dim=-1)
    loss = -(target * log_p).sum(-1).mean(-1)
    q = (log_p.detach().exp() * support).sum(-1).mean(-1)
    target_q = (target.float() * support).sum(-1).mean(-1)
    return loss, q, target_q


def c51_taken_loss(value: Tensor, adv: Tensor, action: Tensor, target: Tensor,
                   support: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """`c51_taken_loss_reference`, as the Triton kernels (differentiable in value and adv) where
    `triton_runs_on` the streams' device."""
    if not triton_runs_on(adv.device):
        return c51_taken_loss_reference(value, adv, action, target, support)
    _check(value, adv, action, target, support)
    # The streams are read in place (the heads' outputs are views into padded rows); only the
    # atom axis must be contiguous.
    if adv.stride(-1) != 1:
        adv = adv.contiguous()
    if value.stride(-1) != 1:
        value = value.contiguous()
    return _C51TakenLoss.apply(value, adv, action.contiguous(), target.float().contiguous(),
                               support.float().contiguous())


class _C51TakenLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, value: Tensor, adv: Tensor,
                action: Tensor, target: Tensor, support: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, branches, actions, atoms = adv.shape
        loss, q, target_q = (torch.empty(b, dtype=torch.float32, device=adv.device)
                             for _ in range(3))
        _forward_kernel[(b,)](value, adv, action, target, support, loss, q, target_q,
                              value.stride(0), *adv.stride()[:3], N_BRANCHES=branches,
                              N_ACTIONS=actions, N_ATOMS=atoms,
                              BLOCK_K=triton.next_power_of_2(atoms))
        ctx.save_for_backward(value, adv, action, target)
        ctx.mark_non_differentiable(q, target_q)
        return loss, q, target_q

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_loss: Tensor,
                 _grad_q: Tensor, _grad_target_q: Tensor) -> tuple[Tensor | None, ...]:
        value, adv, action, target = ctx.saved_tensors
        b, branches, actions, atoms = adv.shape
        d_value = torch.empty(b, atoms, dtype=value.dtype, device=value.device)
        d_adv = torch.empty(b, branches, actions, atoms, dtype=adv.dtype, device=adv.device)
        _backward_kernel[(b,)](value, adv, action, target, grad_loss.float().contiguous(),
                               d_value, d_adv, value.stride(0), *adv.stride()[:3],
                               N_BRANCHES=branches, N_ACTIONS=actions, N_ATOMS=atoms,
                               BLOCK_K=triton.next_power_of_2(atoms))
        return d_value, d_adv, None, None, None


if HAS_TRITON:

    @triton.jit
    def _taken_logits(value_ptr, adv_ptr, i, branch, taken, ks, k_ok, stride_v, stride_ab,
                      stride_abr, stride_aa, N_ACTIONS: tl.constexpr):
        """The taken action's logits of sample i, branch `branch`, float32, -inf past the atoms."""
        row = adv_ptr + i.to(tl.int64) * stride_ab + branch * stride_abr
        total = tl.zeros_like(ks).to(tl.float32)
        for a in tl.static_range(N_ACTIONS):
            total += tl.load(row + a * stride_aa + ks, mask=k_ok, other=0.0).to(tl.float32)
        chosen = tl.load(row + taken * stride_aa + ks, mask=k_ok, other=0.0).to(tl.float32)
        v = tl.load(value_ptr + i.to(tl.int64) * stride_v + ks, mask=k_ok, other=0.0)
        logits = v.to(tl.float32) + chosen - total / N_ACTIONS
        return tl.where(k_ok, logits, float("-inf"))

    @triton.jit
    def _forward_kernel(value_ptr, adv_ptr, action_ptr, target_ptr, support_ptr, loss_ptr, q_ptr,
                        target_q_ptr, stride_v, stride_ab, stride_abr, stride_aa,
                        N_BRANCHES: tl.constexpr, N_ACTIONS: tl.constexpr, N_ATOMS: tl.constexpr,
                        BLOCK_K: tl.constexpr):
        """Program i: sample i's loss and the expected Q of its taken actions and of its target,
        branch by branch."""
        i = tl.program_id(0)
        ks = tl.arange(0, BLOCK_K)
        k_ok = ks < N_ATOMS
        z = tl.load(support_ptr + ks, mask=k_ok, other=0.0)
        loss = 0.0
        q = 0.0
        target_q = 0.0
        for branch in tl.static_range(N_BRANCHES):
            taken = tl.load(action_ptr + i.to(tl.int64) * N_BRANCHES + branch)
            logits = _taken_logits(value_ptr, adv_ptr, i, branch, taken, ks, k_ok, stride_v,
                                   stride_ab, stride_abr, stride_aa, N_ACTIONS)
            shifted = logits - tl.max(logits, axis=0)
            e = tl.exp(shifted)
            total = tl.sum(e, axis=0)
            log_p = tl.where(k_ok, shifted - tl.log(total), 0.0)
            t = tl.load(target_ptr + (i.to(tl.int64) * N_BRANCHES + branch) * N_ATOMS + ks,
                        mask=k_ok, other=0.0)
            loss -= tl.sum(t * log_p, axis=0)
            q += tl.sum(e * z, axis=0) / total
            target_q += tl.sum(t * z, axis=0)
        tl.store(loss_ptr + i, loss / N_BRANCHES)
        tl.store(q_ptr + i, q / N_BRANCHES)
        tl.store(target_q_ptr + i, target_q / N_BRANCHES)

    @triton.jit
    def _backward_kernel(value_ptr, adv_ptr, action_ptr, target_ptr, grad_ptr, d_value_ptr,
                         d_adv_ptr, stride_v, stride_ab, stride_abr, stride_aa,
                         N_BRANCHES: tl.constexpr, N_ACTIONS: tl.constexpr,
                         N_ATOMS: tl.constexpr, BLOCK_K: tl.constexpr):
        """Program i: sample i's gradients of value and of every action's advantages."""
        i = tl.program_id(0)
        ks = tl.arange(0, BLOCK_K)
        k_ok = ks < N_ATOMS
        g = tl.load(grad_ptr + i) / N_BRANCHES
        d_value = tl.zeros_like(ks).to(tl.float32)
        for branch in tl.static_range(N_BRANCHES):
            taken = tl.load(action_ptr + i.to(tl.int64) * N_BRANCHES + branch)
            logits = _taken_logits(value_ptr, adv_ptr, i, branch, taken, ks, k_ok, stride_v,
                                   stride_ab, stride_abr, stride_aa, N_ACTIONS)
            e = tl.exp(logits - tl.max(logits, axis=0))
            p = e / tl.sum(e, axis=0)
            t = tl.load(target_ptr + (i.to(tl.int64) * N_BRANCHES + branch) * N_ATOMS + ks,
                        mask=k_ok, other=0.0)
            d_logits = g * (p * tl.sum(t, axis=0) - t)
            d_value += d_logits
            row = d_adv_ptr + (i.to(tl.int64) * N_BRANCHES + branch) * N_ACTIONS * N_ATOMS
            for a in tl.static_range(N_ACTIONS):
                coef = tl.where(taken == a, 1.0, 0.0) - 1.0 / N_ACTIONS
                tl.store(row + a * N_ATOMS + ks, (d_logits * coef).to(d_adv_ptr.dtype.element_ty),
                         mask=k_ok)
        tl.store(d_value_ptr + i.to(tl.int64) * N_ATOMS + ks,
                 d_value.to(d_value_ptr.dtype.element_ty), mask=k_ok)
