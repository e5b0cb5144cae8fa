"""Which torch device a run uses: the one rule behind every `--device auto|cpu|cuda`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from foxhunt.errors import ConfigError


def resolve_device(device: torch.device | str | None) -> torch.device:
    """`auto` (or None): CUDA when available, else the CPU. Asking for CUDA without a CUDA
    device is a configuration error, not a silent fall back to the CPU."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device {device!r} not understood; use auto, cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda: no CUDA device is available (use cpu or auto)")
    return device


@contextmanager
def float32_matmul_precision(precision: str) -> Iterator[None]:
    """torch's float32 matmul precision ('highest', 'high' = TF32, 'medium') inside the block
    only. The setting is process-wide in torch; scoping it keeps training's TF32 out of
    evaluation and backtests, which run in full float32."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
