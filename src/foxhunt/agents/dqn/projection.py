"""C51 target projection (Bellemare et al. 2017, "A Distributional Perspective on RL", eq. 7).

The dense "hat" form: atom j receives p_i * max(0, 1 - |b_i - j|) from every source atom i, where
b_i = (clamp(r + discount * z_i, v_min, v_max) - v_min) / dz is the target's position in atom
units. It needs no scatter (so it captures cleanly in a CUDA graph), an integer b_i puts all of
p_i on atom b_i (no l == u special case), and clamping sends mass beyond the support to the end
atoms. Cost is O(atoms^2) per distribution, negligible at 51 atoms; written as multiply-and-sum
rather than a matmul so bf16 autocast leaves the target in the input's precision.
"""

from __future__ import annotations

import torch
from torch import Tensor


def projection_weights(returns: Tensor, discounts: Tensor, support: Tensor) -> Tensor:
    """hat[..., i, j] = max(0, 1 - |b_i - j|): the share of source atom i that lands on atom j,
    [..., atoms, atoms] for returns and discounts of shape [...]."""
    atoms = support.shape[-1]
    v_min, v_max = support[0], support[-1]
    dz = (v_max - v_min) / (atoms - 1)
    tz = returns.unsqueeze(-1) + discounts.unsqueeze(-1) * support
    b = (tz.clamp(v_min, v_max) - v_min) / dz
    j = torch.arange(atoms, device=support.device, dtype=b.dtype)
    return (1.0 - (b.unsqueeze(-1) - j).abs()).clamp(min=0.0)


def project_with_weights(next_probs: Tensor, hat: Tensor) -> Tensor:
    """next_probs [B, ..., atoms] onto the support by their sample's weights hat [B, atoms, atoms]
    (`projection_weights`): the weights are built once per sample and shared by its branches.

    Multiply-and-sum, never a matmul, so a TF32 or bf16 matmul mode cannot round the target.
    Compiled, it should read hat and the probabilities as stored tensors: computed in the same
    graph, inductor fuses them into the reduction and recomputes them for every output atom.
    """
    batch, atoms = next_probs.shape[0], next_probs.shape[-1]
    flat = next_probs.reshape(batch, -1, atoms)
    return (flat.unsqueeze(-1) * hat.unsqueeze(1)).sum(dim=-2).reshape(next_probs.shape)
