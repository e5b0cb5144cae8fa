"""Working weights and tensor-core padding: how a layer's matmuls run fast in bf16, kept out
of what the layers compute (`agents.dqn.noisy`).

Working weights (`WorkingWeights`, opt-in): the matrix a layer computes with in training, for a
noisy layer mu + sigma * eps_out eps_in^T (`NoisyWeights`), for a plain one its weight
(`WorkingLinear`), can be composed ahead into a buffer in the compute dtype (bf16 under autocast)
instead of inside (or cast in) every forward pass: the low-precision model copy of
mixed-precision training (Micikevicius et al. 2018, "Mixed Precision Training"). Whoever changes
the parameters or the noise then composes it again; the learner does so inside its optimiser
step, where the new weights are in hand, and takes the masters' gradients from the working
copy's (`master_grads`): for G the working copy's, grad mu = G and grad sigma =
G * eps_out eps_in^T, or the plain layer's G in float32.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ALIGN = 8
"""Matrix widths are padded to a multiple of this many elements (16 bytes in bf16)."""

WIDE, WIDE_ALIGN = 1024, 64
"""A matmul output at least WIDE columns wide is made a multiple of WIDE_ALIGN columns (128 bytes
in bf16). Compiled, inductor pads the row stride of a wider output to 128 bytes; cuBLAS then
cannot add a bias in its epilogue (which needs a contiguous output) and copies the broadcast
bias into the output first, a pass over it before the matmul."""


def pad_to_align(width: int) -> int:
    """Zero columns to append to a matmul output `width` wide (ALIGN, or WIDE_ALIGN if wide)."""
    return -width % (WIDE_ALIGN if width >= WIDE else ALIGN)


def autocast_operands(*operands: Tensor) -> tuple[Tensor, ...]:
    """The operands cast as autocast casts a matmul's (no-ops outside autocast), for matmuls
    that autocast does not see: a fused kernel, or a custom backward."""
    device = operands[0].device.type
    if not torch.is_autocast_enabled(device):
        return operands
    dtype = torch.get_autocast_dtype(device)
    return tuple(t.to(dtype) for t in operands)


class PerGroupLinear(torch.autograd.Function):
    """y = x W^T for each group g: x [g, N, in], W [g, out, in] -> y [g, N, out], one `bmm`.

    Autograd's own `bmm` backward computes the gradient of W^T, x^T dy [g, in, out], so W's
    arrives transposed, and autograd copies it into the layout of W when W is a leaf (a pass
    over the weight at the end of every backward). Here backward computes dW = dy^T x directly
    in W's [g, out, in] layout: the same product, one matmul either way."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor) -> Tensor:
        x, weight = autocast_operands(x, weight)  # saved cast, so backward's matmuls match dy
        ctx.save_for_backward(x, weight)
        return torch.bmm(x, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, dy: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        dx = torch.bmm(dy, weight) if ctx.needs_input_grad[0] else None
        dw = torch.bmm(dy.transpose(1, 2), x) if ctx.needs_input_grad[1] else None
        return dx, dw


def linear_relu(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """relu(x W^T + b) as one matmul with a bias-and-ReLU epilogue (cuBLASLt on CUDA); no
    autograd."""
    x, weight, bias = autocast_operands(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])
    y = torch._addmm_activation(bias, flat, weight.t(), use_gelu=False)
    return y.reshape(*x.shape[:-1], weight.shape[0])


class WorkingWeights(ABC):
    """Working weights: a layer's matmul operands composed ahead into buffers in the compute
    dtype (see the module docstring).

    The layer has `out_features` outputs and `out_pad` zero rows past them in its matmul
    operands, and `in_pad` zero columns past its inputs (the input is zero-padded to match:
    tensor-core matmuls want rows of a multiple of 16 bytes). Padding lives in the working
    copies only: the parameters keep the model's own shapes. Once `enable_working` has run, training-mode forward passes read `weight_work`
    [..., out + out_pad, in] and `bias_work` [..., out + out_pad] as they stand:
    `compose_working` must follow every change of the parameters (or the noise). Subclasses say
    what the operands are made of (`_composed`) and how the working copies' gradients map to
    the parameters' (`master_params`, `_to_master_grads`).
    """

    out_features: int
    out_pad: int
    in_pad: int = 0
    weight_work: Tensor | None
    bias_work: Tensor | None

    @abstractmethod
    def _master_weight(self) -> Tensor:
        """The parameter whose shape [..., out, in] the working weight takes."""

    @abstractmethod
    def master_params(self) -> tuple[Tensor, ...]:
        """The parameters `master_grads` returns gradients for, in that order."""

    @abstractmethod
    def _composed(self) -> tuple[Tensor, Tensor]:
        """The operands (weight [..., out, in], bias [..., out]) without padding."""

    @abstractmethod
    def _to_master_grads(self, g_w: Tensor | None, g_b: Tensor | None) -> tuple[Tensor | None, ...]:
        """`master_params()`'s gradients from the working copies' (g_w, g_b)."""

    def _init_working(self: nn.Module) -> None:
        self.register_buffer("weight_work", None, persistent=False)
        self.register_buffer("bias_work", None, persistent=False)

    def enable_working(self, dtype: torch.dtype) -> None:
        """Allocate the working copies in `dtype` (zero padding rows included) and compose them.
        They take gradients when the parameters do."""
        mu = self._master_weight()
        rows = self.out_features + self.out_pad
        self.weight_work = mu.new_zeros(*mu.shape[:-2], rows, mu.shape[-1] + self.in_pad,
                                        dtype=dtype)
        self.bias_work = mu.new_zeros(*mu.shape[:-2], rows, dtype=dtype)
        self.compose_working()
        self.weight_work.requires_grad_(mu.requires_grad)
        self.bias_work.requires_grad_(mu.requires_grad)

    @torch.no_grad()
    def compose_working(self) -> None:
        """The working copies <- the operands as the parameters (and noise) now stand."""
        if self.weight_work is None:
            return
        out, cols = self.out_features, self._master_weight().shape[-1]
        weight, bias = self._composed()
        self.weight_work[..., :out, :cols].copy_(weight)
        self.bias_work[..., :out].copy_(bias)

    def master_grads(self) -> tuple[Tensor | None, ...]:
        """Gradients of `master_params()` (float32; None where the working copy has none) from
        the working copies', for the operands they were composed from."""
        out, cols = self.out_features, self._master_weight().shape[-1]
        g_w = (None if self.weight_work.grad is None
               else self.weight_work.grad[..., :out, :cols].float())
        g_b = None if self.bias_work.grad is None else self.bias_work.grad[..., :out].float()
        return self._to_master_grads(g_w, g_b)

    def clear_working_grads(self) -> None:
        for t in (self.weight_work, self.bias_work):
            if t is not None:
                t.grad = None

    def _uses_working(self: nn.Module) -> bool:
        return self.training and self.weight_work is not None

    def _padded_input(self, x: Tensor) -> Tensor:
        """x with the `in_pad` zero columns the working weight expects."""
        return F.pad(x, (0, self.in_pad)) if self.in_pad else x

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> nn.Module:
        """As nn.Module's (`.to()`, `.cuda()`, `.double()`, ...), keeping the working copies
        leaves that take gradients: a moved buffer would otherwise be the output of a copy, and
        its gradient would flow to the old tensor."""
        module = super()._apply(fn, recurse)
        for name in ("weight_work", "bias_work"):
            work = getattr(self, name, None)
            if work is not None and not work.is_leaf:
                setattr(self, name, work.detach().requires_grad_(
                    self._master_weight().requires_grad))
        return module


class WorkingLinear(WorkingWeights, nn.Linear):
    """`nn.Linear` with optional working weights: a copy of weight and bias in the compute dtype
    (bf16 under autocast), so that training passes do not cast the float32 parameters again
    each time and backward writes the gradients in the dtype it computes them in; the float32
    gradients are taken from the copy's when the optimiser reads them (`master_grads`)."""

    out_pad = 0

    def __init__(self, in_features: int, out_features: int):
        super().__init__(in_features, out_features)
        self._init_working()

    def _master_weight(self) -> Tensor:
        return self.weight

    def master_params(self) -> tuple[Tensor, ...]:
        return self.weight, self.bias

    def _composed(self) -> tuple[Tensor, Tensor]:
        return self.weight, self.bias

    def _to_master_grads(self, g_w: Tensor | None, g_b: Tensor | None) -> tuple[Tensor | None, ...]:
        return g_w, g_b

    def operands(self) -> tuple[Tensor, Tensor]:
        """(weight, bias) as a forward pass reads them: the working copies when in use."""
        if self._uses_working():
            return self.weight_work, self.bias_work
        return self.weight, self.bias

    def forward(self, x: Tensor) -> Tensor:
        if self._uses_working():
            return F.linear(self._padded_input(x), self.weight_work, self.bias_work)
        return F.linear(x, self.weight, self.bias)
