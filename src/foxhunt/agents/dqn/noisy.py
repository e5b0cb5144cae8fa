"""Factorised Gaussian noisy linear layers (Fortunato et al. 2017, "Noisy Networks for Exploration").

Noise lives in preallocated buffers refilled in place, so a CUDA graph that captured the forward
pass sees fresh noise on every replay once the refill is captured too. `draw_noise` refills every
noisy layer of a network from one normal draw, which is what the networks use; a layer's own
`reset_noise` is the same draw for one layer. The draw is functional (`torch.randn`, not an
in-place `normal_`): compiled, inductor generates it inside the kernel that writes the buffers
(from the one seed kernel a compiled graph with random draws has), where `normal_` stays a
library kernel of its own with a pass over its result after it.

The layers compute with working weights in training where the learner enables them
(`agents.dqn.working`: the bf16 copy of mixed precision, padded for tensor cores).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foxhunt.agents.dqn.working import (
    ALIGN,
    PerGroupLinear,
    WorkingLinear,
    WorkingWeights,
    linear_relu,
    pad_to_align,
)


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
            y = (linear_relu if fused else F.linear)(x, weight, bias)
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
