"""Factorised Gaussian noisy linear layers (Fortunato et al. 2017, "Noisy Networks for Exploration").

Noise lives in preallocated buffers refilled in place, so a CUDA graph that captured the forward
pass sees fresh noise on every replay once the refill is captured too. `draw_noise` refills every
noisy layer of a network from one normal draw (three kernels however many layers there are),
which is what the networks use; a layer's own `reset_noise` is the same draw for one layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ALIGN = 8
"""Matrix widths are padded to a multiple of this many elements (16 bytes in bf16)."""


def _scaled_noise(eps: Tensor, generator: torch.Generator | None) -> None:
    """Fill `eps` with f(x) = sign(x) * sqrt(|x|), x ~ N(0, 1), in place."""
    eps.normal_(generator=generator)
    torch.copysign(eps.abs().sqrt(), eps, out=eps)


@torch.no_grad()
def draw_noise(buffers: Sequence[Tensor], workspace: Tensor, generator: torch.Generator | None):
    """Refill `buffers` from one draw into `workspace` (numel = their total), in order."""
    _scaled_noise(workspace, generator)
    parts = workspace.split([b.numel() for b in buffers])
    torch._foreach_copy_(list(buffers), [p.view_as(b) for p, b in zip(parts, buffers, strict=True)])


def noisy_weight(mu: Tensor, sigma: Tensor, eps_out: Tensor, eps_in: Tensor) -> Tensor:
    """mu + sigma * (eps_out eps_in^T), batched over any leading (group) dimensions."""
    return torch.addcmul(mu, sigma, eps_out.unsqueeze(-1) * eps_in.unsqueeze(-2))


def _linear_relu(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """relu(x W^T + b) as one matmul with a bias-and-ReLU epilogue (cuBLASLt on CUDA); no
    autograd. Under autocast the operands are cast as `F.linear` would cast them."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        x, weight, bias = x.to(dtype), weight.to(dtype), bias.to(dtype)
    flat = x.reshape(-1, x.shape[-1])
    y = torch._addmm_activation(bias, flat, weight.t(), use_gelu=False)
    return y.reshape(*x.shape[:-1], weight.shape[0])


class NoisyLinear(nn.Module):
    """y = (mu_w + sigma_w * eps_out eps_in^T) x + mu_b + sigma_b * eps_out; eval() uses mu only."""

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5):
        super().__init__()
        self.in_features, self.out_features, self.sigma0 = in_features, out_features, sigma0
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("eps_in", torch.zeros(in_features), persistent=False)
        self.register_buffer("eps_out", torch.zeros(out_features), persistent=False)
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
        _scaled_noise(self.eps_in, generator)
        _scaled_noise(self.eps_out, generator)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return F.linear(x, self.weight_mu, self.bias_mu)
        weight = noisy_weight(self.weight_mu, self.weight_sigma, self.eps_out, self.eps_in)
        bias = torch.addcmul(self.bias_mu, self.bias_sigma, self.eps_out)
        return F.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, sigma0={self.sigma0}"


class GroupedLinear(nn.Module):
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

    def forward_with(self, x: Tensor, extra: nn.Linear,
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

    def _forward(self, x: Tensor, relu: bool,
                 extra: nn.Linear | None) -> tuple[Tensor, Tensor | None]:
        weight, bias = self.weight_and_bias()
        g, out, i = weight.shape
        if self.out_pad:
            weight, bias = F.pad(weight, (0, 0, 0, self.out_pad)), F.pad(bias, (0, self.out_pad))
        o = out + self.out_pad
        side = None
        fused = relu and self.shared_input and extra is None and not torch.is_grad_enabled()
        if self.shared_input:
            weight, bias = weight.reshape(g * o, i), bias.reshape(g * o)
            if extra is not None:
                pad = -extra.out_features % ALIGN
                weight = torch.cat((weight, F.pad(extra.weight, (0, 0, 0, pad))))
                bias = torch.cat((bias, F.pad(extra.bias, (0, pad))))
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
            y = torch.bmm(per_group, weight.transpose(1, 2))  # [g, N, o]
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
