"""The prioritised draw (two-level inverse CDF and IS weights) in two Triton kernels.

Written in torch (`draw_reference`, what `draw` runs where Triton does not), a draw is about a
dozen kernels on CUDA: the block masses, their prefix sum, a search, a gather of each draw's
block, its prefix sum, a second search, the minimum mass, the weights. An update's time on a GPU
follows its kernel count more than its work (docs/benchmarks-archive.md), so `draw` where
Triton runs (`foxhunt.triton_support`) does the same in two: one program per block sums its
masses (float64) and takes its smallest positive one; one program per draw then forms the block
CDF, finds its block, forms that block's CDF, finds the transition and computes its IS weight.

Both return the same indices for the same uniforms (the float64 sums may differ in their last
bits, which moves a draw only if it falls within that distance of a boundary) and the same
weights to float32 rounding. The kernels read and write only their arguments, allocate nothing
but the outputs and never sync with the host, so they run inside `torch.compile` and CUDA-graph
capture; on the CPU they run under TRITON_INTERPRET=1 (the tests do).
"""

from __future__ import annotations

import torch
from torch import Tensor

from foxhunt.triton_support import HAS_TRITON, tl, triton, triton_runs_on


def draw_reference(mass: Tensor, block: int, u01: Tensor, newest: Tensor,
                   beta: Tensor) -> tuple[Tensor, Tensor]:
    """(flat indices [B] long, IS weights [B] float32) for uniforms u01 [B] (float64) over the
    sampling masses `mass` (float32, a whole number of blocks of `block`; 0 = never written):
    the first index whose cumulative mass exceeds u * total, found block by block, clamped to
    `newest` (the newest written flat index, a device scalar); weight (m_i / min_j m_j)^-beta
    over the positive masses."""
    blocks = mass.view(-1, block)
    block_mass = blocks.sum(1, dtype=torch.float64)
    block_cdf = block_mass.cumsum(0)
    target = u01 * block_cdf[-1]
    # right=True: the first cdf > target, so zero-mass (unwritten) entries are skipped.
    b = torch.searchsorted(block_cdf, target, right=True).clamp_(max=block_cdf.numel() - 1)
    rest = (target - (block_cdf[b] - block_mass[b])).unsqueeze(1)
    row_cdf = blocks[b].cumsum(1, dtype=torch.float64)
    within = torch.searchsorted(row_cdf, rest, right=True).squeeze(1).clamp_(max=block - 1)
    # Round-off can put a draw at or past the total: clamp to the newest written flat index.
    index = torch.minimum(b * block + within, newest).clamp_(min=0)
    min_mass = torch.where(mass > 0, mass, torch.inf).amin()
    return index, (mass[index] / min_mass).pow(-beta)


def draw(mass: Tensor, block: int, u01: Tensor, newest: Tensor,
         beta: Tensor) -> tuple[Tensor, Tensor]:
    """`draw_reference`, as two Triton kernels where `triton_runs_on` the masses' device. The
    operands are checked on both paths, so a layout the kernels refuse fails on the CPU too."""
    if mass.dtype != torch.float32 or not mass.is_contiguous() or mass.numel() % block:
        raise ValueError(f"mass must be contiguous float32 of whole blocks of {block}, got "
                         f"{mass.dtype} of {mass.numel()}")
    if block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    if not triton_runs_on(mass.device):
        return draw_reference(mass, block, u01, newest, beta)
    n_blocks, n_draws = mass.numel() // block, u01.numel()
    block_mass = torch.empty(n_blocks, dtype=torch.float64, device=mass.device)
    block_min = torch.empty(n_blocks, dtype=torch.float32, device=mass.device)
    index = torch.empty(n_draws, dtype=torch.long, device=mass.device)
    weight = torch.empty(n_draws, dtype=torch.float32, device=mass.device)
    _block_sums_kernel[(n_blocks,)](mass, block_mass, block_min, BLOCK=block)
    _draw_kernel[(n_draws,)](
        mass, block_mass, block_min, u01.to(torch.float64).contiguous(), newest.reshape(1),
        beta.reshape(1).to(torch.float32), index, weight, n_blocks,
        BLOCK=block, BLOCKS_POW2=triton.next_power_of_2(n_blocks),
    )
    return index, weight


if HAS_TRITON:

    @triton.jit
    def _block_sums_kernel(mass_ptr, block_mass_ptr, block_min_ptr, BLOCK: tl.constexpr):
        """Program b: block b's total mass (float64) and smallest positive mass (+inf if none)."""
        b = tl.program_id(0).to(tl.int64)
        m = tl.load(mass_ptr + b * BLOCK + tl.arange(0, BLOCK))
        tl.store(block_mass_ptr + b, tl.sum(m.to(tl.float64), axis=0))
        tl.store(block_min_ptr + b, tl.min(tl.where(m > 0, m, float("inf")), axis=0))

    @triton.jit
    def _draw_kernel(mass_ptr, block_mass_ptr, block_min_ptr, u_ptr, newest_ptr, beta_ptr,
                     index_ptr, weight_ptr, n_blocks, BLOCK: tl.constexpr,
                     BLOCKS_POW2: tl.constexpr):
        """Program i: draw i's block from the block CDF, its transition from that block's CDF
        (a search is the count of CDF entries <= the target, as searchsorted(right=True)), the
        clamp to the newest index, and its IS weight."""
        i = tl.program_id(0)
        blocks = tl.arange(0, BLOCKS_POW2)
        block_ok = blocks < n_blocks
        bm = tl.load(block_mass_ptr + blocks, mask=block_ok, other=0.0)
        cdf = tl.cumsum(bm, axis=0)
        target = tl.load(u_ptr + i) * tl.sum(bm, axis=0)
        b = tl.sum(((cdf <= target) & block_ok).to(tl.int32), axis=0)
        b = tl.minimum(b, n_blocks - 1)
        start = tl.sum(tl.where(blocks == b, cdf - bm, 0.0), axis=0)
        cols = tl.arange(0, BLOCK)
        row = tl.load(mass_ptr + b.to(tl.int64) * BLOCK + cols).to(tl.float64)
        row_cdf = tl.cumsum(row, axis=0)
        within = tl.sum((row_cdf <= target - start).to(tl.int32), axis=0)
        within = tl.minimum(within, BLOCK - 1)
        index = b.to(tl.int64) * BLOCK + within
        index = tl.maximum(tl.minimum(index, tl.load(newest_ptr)), 0)
        smallest = tl.min(tl.load(block_min_ptr + blocks, mask=block_ok, other=float("inf")),
                          axis=0)
        ratio = tl.load(mass_ptr + index) / smallest
        tl.store(index_ptr + i, index)
        tl.store(weight_ptr + i, tl.exp2(-tl.load(beta_ptr) * tl.log2(ratio)))
