"""Bounds that tune themselves from what the run observes, on the device (the original system's
"self-tuning bounds").

A hand-set bound (a gradient-clip norm of 10) is either never reached or always reached,
depending on the network, the reward scale and the market; a bound at a running high quantile
of the quantity it bounds clips only the rare outliers of *this* run. `RunningQuantile` tracks
such a quantile of a positive scalar stream with device tensors only (no host reads, so a CUDA
graph can capture it). The learner uses it for the gradient clip (`[agent] grad_clip_quantile`);
the C51 support has its own percentile tracker (`losses.adapt_support`).
"""

from __future__ import annotations

from statistics import NormalDist

import torch
from torch import Tensor


class RunningQuantile:
    """A running upper quantile q of a positive scalar stream x_1, x_2, ...

    Model: log x is locally normal; m and s2 are exponential moving averages of log x and of its
    squared deviation, and the bound is exp(m + z_q sqrt(s2)) (z_0.99 = 2.33). The rate of
    observation n is max(1/n, rate): the first observation bootstraps the average, the next
    ones form a plain running mean until n = 1/rate, and from then on an EMA with a memory of
    about 1/rate observations follows a level that drifts as training goes on.

    `level()` is the bound from the observations so far (+inf before `warmup` of them, where
    the estimate means little); `observe(x)` adds x winsorised at that level, so one outlier
    moves the estimate by at most one bound's width, never to the outlier. A caller clips the
    current value at `level()` first, then observes it.
    """

    def __init__(self, quantile: float, device: torch.device, rate: float = 0.01,
                 warmup: int = 50):
        if not 0.5 < quantile < 1.0:
            raise ValueError(f"RunningQuantile: quantile {quantile} must lie in (0.5, 1)")
        if not 0.0 < rate < 1.0 or warmup < 1:
            raise ValueError(f"RunningQuantile: rate {rate} must lie in (0, 1) and warmup "
                             f"{warmup} be >= 1")
        self.z = NormalDist().inv_cdf(quantile)
        self.rate, self.warmup = rate, warmup
        zero = {"dtype": torch.float32, "device": device}
        self.n = torch.zeros((), **zero)
        self.mean = torch.zeros((), **zero)
        self.var = torch.zeros((), **zero)

    def level(self) -> Tensor:
        bound = torch.exp(self.mean + self.z * self.var.sqrt())
        return torch.where(self.n >= self.warmup, bound, torch.full_like(bound, float("inf")))

    def observe(self, x: Tensor) -> None:
        log_x = torch.log(torch.minimum(x.float(), self.level()).clamp_min(1e-12))
        self.n.add_(1)
        rate = torch.clamp(1.0 / self.n, min=self.rate)
        delta = log_x - self.mean
        self.mean.add_(rate * delta)
        # West's weighted update: with rate 1/n it is the exact running (population) variance.
        self.var.copy_((1 - rate) * (self.var + rate * delta * delta))

    def reset(self) -> None:
        for t in (self.n, self.mean, self.var):
            t.zero_()

    def state(self) -> dict[str, Tensor]:
        return {"n": self.n.clone(), "mean": self.mean.clone(), "var": self.var.clone()}

    def load(self, state: dict[str, Tensor]) -> None:
        """Copied into the existing tensors (a captured graph keeps reading them)."""
        for key in ("n", "mean", "var"):
            getattr(self, key).copy_(state[key])
