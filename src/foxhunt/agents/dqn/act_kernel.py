"""Greedy C51 actions in one pass: dueling centring, softmax over atoms, expected Q and argmax.

Acting turns the head outputs into greedy actions on every environment step. Written in torch,
inductor splits that into two reduction kernels (the mean over actions, then the softmax and
expectation over atoms) plus an argmax kernel; `greedy_c51` where Triton runs
(`foxhunt.triton_support`) is one Triton kernel that reads each row's advantages once and writes
Q and the actions. `greedy_c51_reference` is the same computation in torch, used elsewhere, and
defines what the kernel must return.

Both compute in float32 whatever the input dtype. The kernel reads strided views in place (only
the atom axis must be contiguous), allocates nothing but its outputs and never syncs with the
host, so it runs inside `torch.compile` and CUDA graph capture.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from foxhunt.triton_support import HAS_TRITON, tl, triton, triton_runs_on

TILE = 2048
"""Elements of one program's padded [rows, atoms] tile per action: 16 float32 per thread at
Triton's default 4 warps (32 rows at 51 -> 64 atoms, 128 rows at 11 -> 16)."""


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
    """`greedy_c51_reference`, as one Triton kernel where `triton_runs_on` `adv`'s device. The
    kernel copies an input only if its atom axis is not contiguous."""
    if not triton_runs_on(adv.device):
        return greedy_c51_reference(value, adv, support)
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
    block_k = triton.next_power_of_2(atoms)
    block_n = max(1, TILE // block_k)
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
        BLOCK_K: tl.constexpr,
    ):
        """Program (i, b): rows i * BLOCK_N onwards of branch b, one [BLOCK_N, BLOCK_K] tile per
        action (a static loop over the few actions): a first pass sums the advantages for the
        mean, a second forms each action's logits, its softmax expectation and the running
        argmax. 64-bit arithmetic only in the program's base offsets; padding atoms are -inf
        before the softmax, padding rows are computed but never stored."""
        branch = tl.program_id(1)
        first = tl.program_id(0).to(tl.int64) * BLOCK_N
        rows = tl.arange(0, BLOCK_N)
        atoms = tl.arange(0, BLOCK_K)
        row_ok = first + rows < n_rows
        atom_ok = atoms < N_ATOMS
        ok = row_ok[:, None] & atom_ok[None, :]
        base = adv_ptr + first * stride_an + branch.to(tl.int64) * stride_ab
        tile = rows[:, None] * stride_an + atoms[None, :]
        z = tl.load(support_ptr + atoms, mask=atom_ok, other=0.0).to(tl.float32)
        if HAS_VALUE:
            total = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
            for a in tl.static_range(N_ACTIONS):
                total += tl.load(base + a * stride_aa + tile, mask=ok, other=0.0).to(tl.float32)
            mean = total / N_ACTIONS
            value_tile = rows[:, None] * stride_vn + atoms[None, :]
            value = tl.load(value_ptr + first * stride_vn + value_tile, mask=ok, other=0.0)
            value = value.to(tl.float32)
        out = (first + rows) * (N_BRANCHES * N_ACTIONS) + branch * N_ACTIONS
        best_q = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
        best_a = tl.zeros([BLOCK_N], dtype=tl.int32)
        for a in tl.static_range(N_ACTIONS):
            logits = tl.load(base + a * stride_aa + tile, mask=ok, other=0.0).to(tl.float32)
            if HAS_VALUE:
                logits = value + (logits - mean)
            logits = tl.where(atom_ok[None, :], logits, float("-inf"))
            e = tl.exp(logits - tl.max(logits, axis=1)[:, None])
            q = tl.sum(e * z[None, :], axis=1) / tl.sum(e, axis=1)
            tl.store(q_ptr + out + a, q, mask=row_ok)
            better = q > best_q  # strict: ties keep the lower action
            best_q = tl.where(better, q, best_q)
            best_a = tl.where(better, a, best_a)
        tl.store(action_ptr + (first + rows) * N_BRANCHES + branch, best_a.to(tl.int64), mask=row_ok)
