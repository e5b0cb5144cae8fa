"""Triton as an optional dependency: the one import and the one rule for where its kernels run.

The fused kernels (C51's taken-action loss, greedy C51 acting, the prioritised draw) each have a
torch reference; `triton_runs_on` decides between kernel and reference for every one of them.
"""

from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None
    tl = None
    HAS_TRITON = False
else:
    HAS_TRITON = True

INTERPRETED = HAS_TRITON and os.environ.get("TRITON_INTERPRET") == "1"
"""Triton's interpreter (TRITON_INTERPRET=1, read when the kernels are defined, so at import):
kernels then run on CPU tensors, which is how the tests check them without a GPU."""


def triton_runs_on(device: torch.device | str) -> bool:
    """Whether the Triton kernels run for tensors on `device`: CUDA with Triton importable, or the
    CPU under Triton's interpreter."""
    device = torch.device(device)
    if device.type == "cuda":
        return HAS_TRITON
    return INTERPRETED and device.type == "cpu"
