"""Factorised Gaussian noisy linear layer (Fortunato et al. 2017, "Noisy Networks for Exploration").

Noise lives in preallocated buffers that `reset_noise` refills in place, so a CUDA graph that
captured the forward pass sees fresh noise on every replay once `reset_noise` is captured too.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _scaled_noise(eps: Tensor, generator: torch.Generator | None) -> None:
    """Fill `eps` with f(x) = sign(x) * sqrt(|x|), x ~ N(0, 1), in place."""
    eps.normal_(generator=generator)
    torch.copysign(eps.abs().sqrt(), eps, out=eps)


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

    @torch.no_grad()
    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        _scaled_noise(self.eps_in, generator)
        _scaled_noise(self.eps_out, generator)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return F.linear(x, self.weight_mu, self.bias_mu)
        weight = torch.addcmul(
            self.weight_mu, self.weight_sigma, torch.outer(self.eps_out, self.eps_in)
        )
        bias = torch.addcmul(self.bias_mu, self.bias_sigma, self.eps_out)
        return F.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, sigma0={self.sigma0}"
