"""Factorised Gaussian noisy linear layers (Fortunato et al. 2017, "Noisy Networks for Exploration").

Noise lives in preallocated buffers refilled in place, so a CUDA graph that captured the forward
pass sees fresh noise on every replay once the refill is captured too. `draw_noise` refills every
noisy layer of a network from one normal draw, which is what the networks use; a layer's own
`reset_noise` is the same draw for one layer. The draw is functional (`torch.randn`, not an
in-place `normal_`): compiled, inductor generates it inside the kernel that writes the buffers
(from the one seed kernel a compiled graph with random draws has), where `normal_` stays a
library kernel of its own with a pass over its result after it.

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

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

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


def _autocast_operands(*operands: Tensor) -> tuple[Tensor, ...]:
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
        x, weight = _autocast_operands(x, weight)  # saved cast, so backward's matmuls match dy
        ctx.save_for_backward(x, weight)
        return torch.bmm(x, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, dy: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        dx = torch.bmm(dy, weight) if ctx.needs_input_grad[0] else None
        dw = torch.bmm(dy.transpose(1, 2), x) if ctx.needs_input_grad[1] else None
        return dx, dw


def scaled_noise(n: int, like: Tensor, generator: torch.Generator | None) -> Tensor:
    """n values of f(x) = sign(x) * sqrt(|x|), x ~ N(0, 1), on `like`'s device and dtype."""
    x = torch.randn(n, generator=generator, device=like.device, dtype=like.dtype)
    return torch.copysign(x.abs().sqrt(), x)


@torch.no_grad()
def draw_noise(buffers: Sequence[Tensor], generator: torch.Generator | None) -> None:
    """Refill `buffers` (same device and dtype) from one draw, in order."""
    fill_noise(buffers, scaled_noise(sum(b.numel() for b in buffers), buffers[0], generator))


@torch.no_grad()
def fill_noise(buffers: Sequence[Tensor], values: Tensor) -> None:
    """Copy the flat `values` into `buffers`, in order.

    Eagerly one multi-tensor copy; compiled, one copy per buffer, which inductor fuses into the
    kernels that read the buffer next (a `_foreach_copy_` stays a kernel of its own there)."""
    parts = [p.view_as(b) for p, b in
             zip(values.split([b.numel() for b in buffers]), buffers, strict=True)]
    if torch.compiler.is_compiling():
        for b, p in zip(buffers, parts, strict=True):
            b.copy_(p)
    else:
        torch._foreach_copy_(list(buffers), parts)


def noisy_weight(mu: Tensor, sigma: Tensor, eps_out: Tensor, eps_in: Tensor) -> Tensor:
    """mu + sigma * (eps_out eps_in^T), batched over any leading (group) dimensions."""
    return torch.addcmul(mu, sigma, eps_out.unsqueeze(-1) * eps_in.unsqueeze(-2))


def _linear_relu(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """relu(x W^T + b) as one matmul with a bias-and-ReLU epilogue (cuBLASLt on CUDA); no
    autograd."""
    x, weight, bias = _autocast_operands(x, weight, bias)
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


class NoisyWeights(WorkingWeights):
    """Working weights of a factorised noisy layer: parameters weight_mu, weight_sigma
    [..., out, in], bias_mu, bias_sigma [..., out] and noise buffers eps_out [..., out], eps_in
    [..., in]; the working copy is mu + sigma * eps_out eps_in^T, and for G its gradient,
    grad mu = G and grad sigma = G * eps_out eps_in^T."""

    weight_mu: Tensor
    weight_sigma: Tensor
    bias_mu: Tensor
    bias_sigma: Tensor
    eps_out: Tensor
    eps_in: Tensor

    def _master_weight(self) -> Tensor:
        return self.weight_mu

    def master_params(self) -> tuple[Tensor, ...]:
        return self.weight_mu, self.weight_sigma, self.bias_mu, self.bias_sigma

    def _composed(self) -> tuple[Tensor, Tensor]:
        return (noisy_weight(self.weight_mu, self.weight_sigma, self.eps_out, self.eps_in),
                torch.addcmul(self.bias_mu, self.bias_sigma, self.eps_out))

    def _to_master_grads(self, g_w: Tensor | None, g_b: Tensor | None) -> tuple[Tensor | None, ...]:
        outer = self.eps_out.unsqueeze(-1) * self.eps_in.unsqueeze(-2)
        return (g_w, None if g_w is None else g_w * outer,
                g_b, None if g_b is None else g_b * self.eps_out)


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


class NoisyLinear(NoisyWeights, nn.Module):
    """y = (mu_w + sigma_w * eps_out eps_in^T) x + mu_b + sigma_b * eps_out; eval() uses mu only."""

    out_pad = 0

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5):
        super().__init__()
        self.in_features, self.out_features, self.sigma0 = in_features, out_features, sigma0
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("eps_in", torch.zeros(in_features), persistent=False)
        self.register_buffer("eps_out", torch.zeros(out_features), persistent=False)
        self._init_working()
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        nn.init.uniform_(self.weight_mu, -bound, bound)
        nn.init.uniform_(self.bias_mu, -bound, bound)
        nn.init.constant_(self.weight_sigma, self.sigma0 * bound)
        nn.init.constant_(self.bias_sigma, self.sigma0 * bound)

    def noise_buffers(self) -> tuple[Tensor, ...]:
        return self.eps_in, self.eps_out

    @torch.no_grad()
    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        draw_noise([self.eps_in], generator)
        draw_noise([self.eps_out], generator)
        self.compose_working()

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return F.linear(x, self.weight_mu, self.bias_mu)
        if self._uses_working():
            return F.linear(self._padded_input(x), self.weight_work, self.bias_work)
        weight = noisy_weight(self.weight_mu, self.weight_sigma, self.eps_out, self.eps_in)
        bias = torch.addcmul(self.bias_mu, self.bias_sigma, self.eps_out)
        return F.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, sigma0={self.sigma0}"


class GroupedLinear(NoisyWeights, nn.Module):
    """`groups` independent linear layers (plain, or factorised-noisy each with its own noise)
    evaluated as one matrix product: the parallel streams of a branching head cost one kernel,
    not one per stream.

    shared_input: x [..., in] feeds every group (one matmul with the groups' weights stacked);
    otherwise x [..., groups, in] gives each group its own input (one batched matmul).
    Output [..., groups, out]. Initialised like `NoisyLinear` (and `nn.Linear`'s bound).

    The product runs on weights zero-padded to a multiple of 8 outputs per group (e.g. 3 x 51
    atoms = 153 -> 160) and the padding is sliced off: bf16/TF32 tensor-core kernels need
    16-byte aligned rows, and an odd width drops cuBLAS to kernels several times slower.
    """

    def __init__(
        self,
        groups: int,
        in_features: int,
        out_features: int,
        *,
        shared_input: bool,
        noisy: bool,
        sigma0: float = 0.5,
    ):
        super().__init__()
        self.groups, self.in_features, self.out_features = groups, in_features, out_features
        self.shared_input, self.noisy, self.sigma0 = shared_input, noisy, sigma0
        self.out_pad = -out_features % ALIGN
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(groups, out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(groups, out_features))
        nn.init.uniform_(self.weight_mu, -bound, bound)
        nn.init.uniform_(self.bias_mu, -bound, bound)
        if noisy:
            self.weight_sigma = nn.Parameter(torch.full_like(self.weight_mu, sigma0 * bound))
            self.bias_sigma = nn.Parameter(torch.full_like(self.bias_mu, sigma0 * bound))
            self.register_buffer("eps_in", torch.zeros(groups, in_features), persistent=False)
            self.register_buffer("eps_out", torch.zeros(groups, out_features), persistent=False)
            self._init_working()

    def noise_buffers(self) -> tuple[Tensor, ...]:
        return (self.eps_in, self.eps_out) if self.noisy else ()

    def weight_and_bias(self) -> tuple[Tensor, Tensor]:
        """[groups, out, in] and [groups, out]: with this step's noise in training mode."""
        if not (self.noisy and self.training):
            return self.weight_mu, self.bias_mu
        weight = noisy_weight(self.weight_mu, self.weight_sigma, self.eps_out, self.eps_in)
        return weight, torch.addcmul(self.bias_mu, self.bias_sigma, self.eps_out)

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        """The groups' outputs, with `relu` applied when asked (fused into the matmul's epilogue
        where that is possible: a shared input without autograd)."""
        return self._forward(x, relu, None)[0]

    def forward_with(self, x: Tensor, extra: WorkingLinear,
                     relu: bool = False) -> tuple[Tensor, Tensor]:
        """(the groups' outputs, `extra(x)`): a plain linear layer on the same shared input, its
        rows appended to the groups' in one matmul. Backward then takes one matmul for the
        input's gradient instead of two and a sum, and `extra`'s few outputs do not run on the
        slow kernels an unaligned, 2-wide product gets. `relu` applies to the groups only."""
        if not self.shared_input:
            raise ValueError("GroupedLinear.forward_with: extra layers need a shared input")
        y, side = self._forward(x, relu, extra)
        assert side is not None
        return y, side

    def _operands(self) -> tuple[Tensor, Tensor]:
        """`weight_and_bias()` zero-padded to out + out_pad rows: the working copies where the
        layer has them (already padded)."""
        if self.noisy and self._uses_working():
            return self.weight_work, self.bias_work
        weight, bias = self.weight_and_bias()
        if self.out_pad:
            weight, bias = F.pad(weight, (0, 0, 0, self.out_pad)), F.pad(bias, (0, self.out_pad))
        return weight, bias

    def _forward(self, x: Tensor, relu: bool,
                 extra: WorkingLinear | None) -> tuple[Tensor, Tensor | None]:
        weight, bias = self._operands()
        g, o, i = weight.shape
        out = self.out_features
        side = None
        fused = relu and self.shared_input and extra is None and not torch.is_grad_enabled()
        if self.shared_input:
            weight, bias = weight.reshape(g * o, i), bias.reshape(g * o)
            if extra is not None:
                pad = pad_to_align(weight.shape[0] + extra.out_features)
                # In the working copy's dtype (bf16 under autocast, which would cast it anyway).
                extra_w, extra_b = (t.to(weight.dtype) for t in extra.operands())
                weight = torch.cat((weight, F.pad(extra_w, (0, 0, 0, pad))))
                bias = torch.cat((bias, F.pad(extra_b, (0, pad))))
            y = (_linear_relu if fused else F.linear)(x, weight, bias)
            if extra is not None:
                side = y[..., g * o : g * o + extra.out_features]
                y = y[..., : g * o]
            y = y.unflatten(-1, (g, o))
        else:
            # bmm, then the bias: baddbmm would first copy the broadcast bias into its output
            # (a pass over the whole output); an add fuses into whatever reads the result.
            lead = x.shape[:-2]
            per_group = x.reshape(-1, g, i).transpose(0, 1)  # [g, N, in]
            y = PerGroupLinear.apply(per_group, weight)  # [g, N, o]
            y = y + bias.unsqueeze(1).to(y.dtype)  # in bf16 under autocast, as baddbmm was
            y = y.transpose(0, 1).reshape(*lead, g, o)
        if relu and not fused:
            y = F.relu(y)
        return (y[..., :out] if self.out_pad else y), side

    def extra_repr(self) -> str:
        return (
            f"groups={self.groups}, in={self.in_features}, out={self.out_features}, "
            f"shared_input={self.shared_input}, noisy={self.noisy}"
        )
