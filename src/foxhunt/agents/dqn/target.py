"""Target-network update and network-layout fingerprints for checkpoints."""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor, nn


def _state(model: nn.Module) -> tuple[list[Tensor], list[Tensor]]:
    """(parameters, persistent buffers) in a fixed order; noise buffers are not persistent."""
    param_names = {name for name, _ in model.named_parameters()}
    state = model.state_dict(keep_vars=True)
    params = [t for name, t in state.items() if name in param_names]
    buffers = [t for name, t in state.items() if name not in param_names]
    return params, buffers


class PolyakUpdate:
    """target <- target + tau * (online - target), in place, with one fused `_foreach_lerp_`.

    The tensor pairing is resolved once, so a call is a single foreach kernel launch that captures
    cleanly in a CUDA graph (and traces cheaply under torch.compile). Floating buffers are
    blended the same way; integer buffers (counters) are copied.
    """

    def __init__(self, target: nn.Module, online: nn.Module, tau: float):
        t_params, t_buffers = _state(target)
        o_params, o_buffers = _state(online)
        if len(t_params) != len(o_params) or len(t_buffers) != len(o_buffers):
            raise ValueError("polyak update: target and online networks differ in layout")
        self.tau = tau
        self.blend_target = t_params + [t for t in t_buffers if t.is_floating_point()]
        self.blend_online = o_params + [o for o in o_buffers if o.is_floating_point()]
        self.copy_pairs = [(t, o) for t, o in zip(t_buffers, o_buffers, strict=True)
                           if not t.is_floating_point()]  # fmt: skip

    @torch.no_grad()
    def __call__(self) -> None:
        torch._foreach_lerp_(self.blend_target, self.blend_online, self.tau)
        for t, o in self.copy_pairs:
            t.copy_(o)


def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """One `PolyakUpdate` step (resolving the pairing on every call)."""
    PolyakUpdate(target, online, tau)()


def layout_description(model: nn.Module) -> list[str]:
    """One line per stored tensor ('name: shape dtype') and layout setting ('setting key: value').

    Settings come from the model's `layout_info()` when it has one (BranchingQNetwork does).
    Saved beside a checkpoint so `describe_layout_diff` can explain a mismatch without the old code.
    """
    lines = [
        f"{name}: {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
        for name, t in model.state_dict().items()
    ]
    info = model.layout_info() if hasattr(model, "layout_info") else {}
    lines += [f"setting {key}: {value!r}" for key, value in info.items()]
    return lines


def layout_fingerprint(model: nn.Module) -> str:
    """Hex SHA-256 of `layout_description`: equal iff tensor names, shapes, dtypes and layout
    settings all match."""
    return hashlib.sha256("\n".join(layout_description(model)).encode()).hexdigest()


def _entries(x: nn.Module | list[str]) -> dict[str, str]:
    lines = layout_description(x) if isinstance(x, nn.Module) else x
    return dict(line.split(": ", 1) for line in lines)


def describe_layout_diff(
    a: nn.Module | list[str],
    b: nn.Module | list[str],
    a_name: str = "checkpoint",
    b_name: str = "model",
) -> str:
    """One line naming the first stored tensor that differs (missing, shape or dtype), plus the
    layout settings that differ; '' when the layouts match. Accepts models or saved descriptions."""
    ea, eb = _entries(a), _entries(b)
    differing = [k for k in dict.fromkeys([*ea, *eb]) if ea.get(k) != eb.get(k)]
    first = next((k for k in differing if not k.startswith("setting ")), None)
    settings = [
        f"{k.removeprefix('setting ')} {ea.get(k, 'absent')} vs {eb.get(k, 'absent')}"
        for k in differing
        if k.startswith("setting ")
    ]
    parts = []
    if first is not None:
        parts.append(
            f"parameter '{first}' is {ea.get(first, 'absent')} in the {a_name} "
            f"but {eb.get(first, 'absent')} in the {b_name}"
        )
    if settings:
        parts.append(f"settings differ ({a_name} vs {b_name}): " + ", ".join(settings))
    return "; ".join(parts)
