"""Target-network update: the Polyak blend of the online network into the target."""

from __future__ import annotations

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
