"""Adam on gradients clipped to a total norm, as one pass over the parameters.

`clip_grad_norm_` followed by `Adam.step` reads and rewrites every gradient to scale it, then
reads it again in Adam: a pass over every gradient on the critical path of an update. Here the clip coefficient scales each gradient as Adam reads it, so the gradients are
read once and never written; compiled, the whole step is the norm's reduction and one fused
kernel per parameter.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from foxhunt.training.bounds import RunningQuantile


class ClippedAdam(torch.optim.Optimizer):
    """Adam (Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization") on g * c, where
    c = min(1, max_norm / (||g|| + 1e-6)) and ||g|| is the L2 norm of all gradients laid end to
    end, as `torch.nn.utils.clip_grad_norm_` computes it.

    With `weight_decay` the step is AdamW's (Loshchilov & Hutter 2019, "Decoupled Weight Decay
    Regularization"): p <- p (1 - lr * weight_decay) before Adam's step, apart from the
    gradient's moments.

    With `adaptive` (`bounds.RunningQuantile` of the gradient norms) the clip norm is the lower
    of max_norm and that running quantile of the norms before this step: only the run's own
    outliers are clipped, whatever the network's and the rewards' scale.

    `step()` returns ||g|| before clipping as a device tensor (no host read). The state keys
    ("step", "exp_avg", "exp_avg_sq") and their meaning are `torch.optim.Adam`'s, so each
    optimiser loads the other's state_dict. The state exists from construction (not from the
    first step), so a CUDA graph can capture the first step too.

    Every parameter takes every step, so all of them share one step tensor (`state["step"]` is
    the same object for each): a step increments one scalar, where a counter per parameter was
    a multi-tensor kernel of its own on the critical path of a compiled update. `state_dict()`
    hands out a copy per parameter, as torch's Adam keeps them.
    """

    def __init__(self, params: Iterable[Tensor], lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 max_norm: float = float("inf"), adaptive: RunningQuantile | None = None,
                 weight_decay: float = 0.0):
        if not lr > 0 or not eps > 0 or not max_norm > 0:
            raise ValueError(f"ClippedAdam: lr ({lr}), eps ({eps}) and max_norm ({max_norm}) "
                             "must be positive")
        if not weight_decay >= 0:
            raise ValueError(f"ClippedAdam: weight_decay ({weight_decay}) must be >= 0")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"ClippedAdam: betas {betas} must lie in [0, 1)")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "max_norm": max_norm,
                                  "weight_decay": weight_decay})
        if len(self.param_groups) != 1:
            raise ValueError("ClippedAdam: one parameter group (the clip norm spans all of them)")
        params = self.param_groups[0]["params"]
        devices = {p.device for p in params}
        if len(devices) != 1:
            raise ValueError("ClippedAdam: parameters on one device (got "
                             f"{sorted(map(str, devices))})")
        self.adaptive = adaptive
        self._step = torch.zeros((), dtype=torch.float32, device=params[0].device)
        for p in params:
            self.state[p] = {
                "step": self._step,
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }

    def state_dict(self) -> dict:
        """As torch's, with a step tensor of its own for each parameter (torch's Adam, loading
        it, increments each)."""
        saved = super().state_dict()
        saved["state"] = {i: {**s, "step": s["step"].clone()} for i, s in saved["state"].items()}
        if self.adaptive is not None:
            saved["adaptive_clip"] = self.adaptive.state()
        return saved

    def load_state_dict(self, state_dict: dict) -> None:
        """As torch's, and then: settings the saved groups lack (a `torch.optim.Adam` state has
        no max_norm) keep this optimiser's, and the loaded values are copied into the state
        tensors this optimiser already has (torch would replace them, leaving a CUDA graph that
        captured a step reading the old ones; and it leaves a step count where it was saved, e.g.
        on the CPU of a checkpoint). A parameter without saved state starts from zero moments.
        Saved step counts that differ between parameters are an error: this optimiser steps
        every parameter every time."""
        counts = {float(s["step"]) for s in state_dict.get("state", {}).values() if "step" in s}
        if len(counts) > 1:
            raise ValueError(f"ClippedAdam.load_state_dict: the saved step counts differ between "
                             f"parameters ({sorted(counts)}); this optimiser steps all of them "
                             "together")
        params = self.param_groups[0]["params"]
        kept = {p: self.state[p] for p in params}
        state_dict = dict(state_dict)
        clip_state = state_dict.pop("adaptive_clip", None)
        if self.adaptive is not None:
            if clip_state is None:
                self.adaptive.reset()
            else:
                self.adaptive.load(clip_state)
        super().load_state_dict(state_dict)
        group = self.param_groups[0]
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        for i, p in enumerate(params):
            loaded, state = self.state[p], kept[p]
            for key in ("exp_avg", "exp_avg_sq"):
                if key not in loaded:
                    state[key].zero_()
                elif loaded[key].shape != p.shape:
                    raise ValueError(f"ClippedAdam.load_state_dict: parameter {i}'s {key} has "
                                     f"shape {tuple(loaded[key].shape)}, the parameter "
                                     f"{tuple(p.shape)}")
                else:
                    state[key].copy_(loaded[key])
            self.state[p] = state
        self._step.fill_(counts.pop() if counts else 0.0)

    @torch.no_grad()
    def step(self, closure: None = None,  # type: ignore[override]
             grads: list[Tensor | None] | None = None) -> Tensor:
        """One step on the parameters' `.grad`, or on `grads` (one per parameter, in order:
        e.g. `BranchingQNetwork.gradients()`, which derives some from working weights)."""
        if closure is not None:
            raise ValueError("ClippedAdam.step takes no closure")
        group = self.param_groups[0]
        params = group["params"]
        if grads is None:
            grads = [p.grad for p in params]
        elif len(grads) != len(params):
            raise ValueError(f"ClippedAdam.step: {len(grads)} gradients for {len(params)} "
                             "parameters")
        if any(g is None for g in grads):
            missing = [i for i, g in enumerate(grads) if g is None]
            raise RuntimeError(f"ClippedAdam.step: parameters {missing} have no gradient (every "
                               "parameter steps every time; call backward first)")
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        states = [self.state[p] for p in params]
        m, v = ([s[k] for s in states] for k in ("exp_avg", "exp_avg_sq"))
        # One norm over the gradients laid end to end (benchmarks/probe_grad_norm.py compares
        # the forms compiled).
        grad_norm = torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))
        limit = group["max_norm"]
        if self.adaptive is not None:
            limit = self.adaptive.level().clamp(max=limit)
            self.adaptive.observe(grad_norm)
        c = (limit / (grad_norm + 1e-6)).clamp(max=1.0)
        t = self._step.add_(1)
        if group["weight_decay"]:
            torch._foreach_mul_(params, 1.0 - lr * group["weight_decay"])
        adam(params, grads, m, v, c, t, lr, beta1, beta2, eps)
        return grad_norm


def adam(params: list[Tensor], grads: list[Tensor], m: list[Tensor], v: list[Tensor],
                    c: Tensor, t: Tensor, lr: float, beta1: float, beta2: float,
                    eps: float) -> None:
    """One Adam step at step count t on the gradients scaled by c, in place."""
    step_size, bias2_sqrt = lr / (1 - beta1**t), (1 - beta2**t).sqrt()
    for p, g, m_, v_ in zip(params, grads, m, v, strict=True):
        g = g * c  # g_t, clipped
        m_.lerp_(g, 1 - beta1)  # m_t = beta1 m_{t-1} + (1 - beta1) g_t
        v_.mul_(beta2).addcmul_(g, g, value=1 - beta2)  # v_t = beta2 v_{t-1} + (1 - beta2) g_t^2
        # p_t = p_{t-1} - lr / (1 - beta1^t) * m_t / (sqrt(v_t) / sqrt(1 - beta2^t) + eps)
        p.sub_(step_size * m_ / (v_.sqrt() / bias2_sqrt + eps))
