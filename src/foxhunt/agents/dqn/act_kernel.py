"""Greedy C51 actions in one pass: dueling centring, softmax over atoms, expected Q and argmax.

Acting turns the head outputs into greedy actions on every environment step. Written in torch,
inductor splits that into two reduction kernels (the mean over actions, then the softmax and
expectation over atoms) plus an argmax kernel; `greedy_c51` on CUDA is one Triton kernel that
reads each row's advantages once and writes Q and the actions. `greedy_c51_reference` is the same
computation in torch, used on CPU and without Triton, and defines what the kernel must return.

Both compute in float32 whatever the input dtype. The kernel reads strided views in place (only
the atom axis must be contiguous), allocates nothing but its outputs and never syncs with the
host, so it runs inside `torch.compile` and CUDA graph capture.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:
    HAS_TRITON = False
else:
    HAS_TRITON = True

TILE = 4096
"""Elements of one program's padded [rows, actions, atoms] tile: 32 float32 per thread at
Triton's default 4 warps (16 rows at 3 x 51 atoms, 64 rows at 3 x 11)."""


def _check(value: Tensor | None, adv: Tensor, support: Tensor) -> None:
    if adv.dim() != 4:
        raise ValueError(f"adv must be [N, branches, actions, atoms], got shape {tuple(adv.shape)}")
    n, _, _, atoms = adv.shape
    if 0 in adv.shape[1:]:
        raise ValueError(f"adv needs a branch, an action and an atom, got shape {tuple(adv.shape)}")
    if not adv.is_floating_point():
        raise ValueError(f"adv must be floating point, got {adv.dtype}")
    if support.shape != (atoms,):
        raise ValueError(f"support must be [atoms] = [{atoms}], got shape {tuple(support.shape)}")
    if value is not None and value.shape != (n, atoms):
        raise ValueError(
            f"value must be [N, atoms] = [{n}, {atoms}] (or None), got shape {tuple(value.shape)}"
        )


def greedy_c51_reference(
    value: Tensor | None, adv: Tensor, support: Tensor
) -> tuple[Tensor, Tensor]:
    """(greedy action [N, Br] long, Q [N, Br, A] float32) from value [N, K] (None without
    dueling), uncentred advantages [N, Br, A, K] and the support [K]; the network's formulation
    in float32, ties to the lowest action."""
    _check(value, adv, support)
    logits = adv.float()
    if value is not None:
        logits = value.float()[:, None, None, :] + (logits - logits.mean(dim=-2, keepdim=True))
    q = (F.log_softmax(logits, dim=-1).exp() * support.float()).sum(dim=-1)
    return q.argmax(dim=-1), q


def greedy_c51(value: Tensor | None, adv: Tensor, support: Tensor) -> tuple[Tensor, Tensor]:
    """`greedy_c51_reference`, as one Triton kernel when `adv` is on CUDA and Triton imports."""
    if HAS_TRITON and adv.is_cuda:
        return greedy_c51_triton(value, adv, support)
    return greedy_c51_reference(value, adv, support)


def _next_pow2(x: int) -> int:
    return 1 << max(x - 1, 0).bit_length()


def greedy_c51_triton(value: Tensor | None, adv: Tensor, support: Tensor) -> tuple[Tensor, Tensor]:
    """The Triton kernel on any device Triton can launch on (CUDA, or CPU under
    TRITON_INTERPRET=1). Copies an input only if its atom axis is not contiguous."""
    if not HAS_TRITON:
        raise RuntimeError("greedy_c51_triton needs triton; use greedy_c51")
    _check(value, adv, support)
    for name, t in (("value", value), ("support", support)):
        if t is not None and t.device != adv.device:
            raise ValueError(f"{name} is on {t.device}, adv on {adv.device}; they must match")
    n, branches, actions, atoms = adv.shape
    q = torch.empty(n, branches, actions, dtype=torch.float32, device=adv.device)
    action = torch.empty(n, branches, dtype=torch.long, device=adv.device)
    if n == 0:
        return action, q
    if adv.stride(-1) != 1:
        adv = adv.contiguous()
    if value is not None and value.stride(-1) != 1:
        value = value.contiguous()
    if support.stride(-1) != 1:
        support = support.contiguous()
    block_a, block_k = _next_pow2(actions), _next_pow2(atoms)
    block_n = max(1, TILE // (block_a * block_k))
    grid = ((n + block_n - 1) // block_n, branches)
    _greedy_c51_kernel[grid](
        adv if value is None else value,
        adv,
        support,
        q,
        action,
        n,
        0 if value is None else value.stride(0),
        adv.stride(0),
        adv.stride(1),
        adv.stride(2),
        HAS_VALUE=value is not None,
        N_BRANCHES=branches,
        N_ACTIONS=actions,
        N_ATOMS=atoms,
        BLOCK_N=block_n,
        BLOCK_A=block_a,
        BLOCK_K=block_k,
    )
    return action, q


if HAS_TRITON:

    @triton.jit
    def _greedy_c51_kernel(
        value_ptr,
        adv_ptr,
        support_ptr,
        q_ptr,
        action_ptr,
        n_rows,
        stride_vn,
        stride_an,
        stride_ab,
        stride_aa,
        HAS_VALUE: tl.constexpr,
        N_BRANCHES: tl.constexpr,
        N_ACTIONS: tl.constexpr,
        N_ATOMS: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_A: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        """Program (i, b): rows i * BLOCK_N onwards of branch b, as a [BLOCK_N, BLOCK_A, BLOCK_K]
        tile. Padding lanes load 0 (so they add nothing to the action mean), padding atoms are
        -inf before the softmax and padding actions -inf before the argmax."""
        branch = tl.program_id(1)
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        acts = tl.arange(0, BLOCK_A)
        atoms = tl.arange(0, BLOCK_K)
        row_ok = rows < n_rows
        act_ok = acts < N_ACTIONS
        atom_ok = atoms < N_ATOMS
        rows64 = rows.to(tl.int64)

        adv_ptrs = (
            adv_ptr
            + branch.to(tl.int64) * stride_ab
            + rows64[:, None, None] * stride_an
            + acts[None, :, None] * stride_aa
            + atoms[None, None, :]
        )
        tile_ok = row_ok[:, None, None] & act_ok[None, :, None] & atom_ok[None, None, :]
        logits = tl.load(adv_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        if HAS_VALUE:
            mean = tl.sum(logits, axis=1) / N_ACTIONS
            value_ptrs = value_ptr + rows64[:, None] * stride_vn + atoms[None, :]
            value_ok = row_ok[:, None] & atom_ok[None, :]
            value = tl.load(value_ptrs, mask=value_ok, other=0.0).to(tl.float32)
            logits = value[:, None, :] + (logits - mean[:, None, :])
        logits = tl.where(atom_ok[None, None, :], logits, float("-inf"))

        z = tl.load(support_ptr + atoms, mask=atom_ok, other=0.0).to(tl.float32)
        e = tl.exp(logits - tl.max(logits, axis=2)[:, :, None])
        q = tl.sum(e * z[None, None, :], axis=2) / tl.sum(e, axis=2)

        out = rows64[:, None] * (N_BRANCHES * N_ACTIONS) + branch * N_ACTIONS + acts[None, :]
        tl.store(q_ptr + out, q, mask=row_ok[:, None] & act_ok[None, :])
        best = tl.argmax(tl.where(act_ok[None, :], q, float("-inf")), axis=1, tie_break_left=True)
        tl.store(action_ptr + rows64 * N_BRANCHES + branch, best.to(tl.int64), mask=row_ok)
