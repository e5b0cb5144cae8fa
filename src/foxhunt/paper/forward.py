"""The greedy action of an eval-mode C51 network for one observation, in numpy, certified.

Paper trading asks the policy once per bar, one row at a time. Through torch that is ~20
operator calls and module dispatches (~100 us on a CPU) for a network of a few hundred
thousand multiply-adds. `GreedyForward` holds the eval-mode operands once (noisy layers at
their mean weights, as `eval()` uses them; the heads' streams as one block matrix) and runs
the same computation (`BranchingQNetwork.act`: trunk of Linear, LayerNorm, ReLU; dueling
branching C51 heads; `greedy_c51_reference`) in float64 with a handful of numpy calls.

The backtest decides with torch in float32, and what must match is its decisions, not its
bits (torch's own bits change with the batch size). float64 here is near the exact value,
torch's float32 within its rounding error of it; so where the best action of every branch
leads the runner-up by more than `MARGIN` of the support's width (far above that error), both
pick the same action. Where a branch is closer, `act` returns None and the caller asks torch
itself: a near tie is decided by the backtest's own arithmetic, never by this one.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from foxhunt.agents.dqn import BranchingQNetwork

MARGIN = 5e-5
"""Q lead, as a fraction of the C51 support's width (1e-3 for [-10, 10]), below which a
decision goes to torch. torch's float32 Q differs from this float64 one by at most 5e-8 of the
width on the benchmark's network and 1.4e-6 of it on the tests' networks with weights three
times their initial size (tests/paper/test_forward.py holds it under a tenth of MARGIN)."""


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy().copy()


class GreedyForward:
    """`BranchingQNetwork.act` for one observation of an eval-mode C51 network (no variable
    selection), in numpy float64, with each branch's lead over its runner-up (`lead`)."""

    def __init__(self, network: BranchingQNetwork, margin: float = MARGIN):
        """`margin`: see MARGIN."""
        c = network.config
        if not self.supports(network):
            raise ValueError("GreedyForward: an eval-mode C51 network without variable "
                             "selection only")
        self.trunk: list[tuple] = []  # (weight, bias, LayerNorm gain, shift, eps, 1/width)
        mods = list(network.trunk)
        for lin, norm in zip(mods[0::3], mods[1::3], strict=True):
            w = lin.weight_mu if hasattr(lin, "weight_mu") else lin.weight
            b = lin.bias_mu if hasattr(lin, "bias_mu") else lin.bias
            # LayerNorm's centring h - mean(h) is linear: folded into the weights and bias
            w, b = _array(w), _array(b)
            w -= w.mean(axis=0)
            b -= b.mean()
            self.trunk.append((w, b, _array(norm.weight), _array(norm.bias), float(norm.eps),
                               1.0 / len(b)))
        heads = network.heads
        self.n_branches, self.n_actions, self.atoms = heads.n_branches, heads.n_actions, c.atoms
        hid = heads.hidden
        g, o, i = hid.weight_mu.shape
        self.w_hidden = _array(hid.weight_mu).reshape(g * o, i)
        self.b_hidden = _array(hid.bias_mu).reshape(g * o)
        # The logits are linear in the hidden groups: branch k's advantages read group k, the
        # value the last group, and the dueling sum V + A - mean_a A is linear too; so the
        # streams and their combination are one matrix over the concatenated groups.
        br, a, k = self.n_branches, self.n_actions, self.atoms
        adv_w = np.zeros((br, a, k, g * o))
        adv_b = _array(heads.advantage.bias_mu).reshape(br, a, k)
        for b in range(br):
            adv_w[b, :, :, b * o:(b + 1) * o] = _array(heads.advantage.weight_mu)[b].reshape(
                a, k, o)
        if heads.value is not None:
            adv_w -= adv_w.mean(axis=1, keepdims=True)
            adv_b = adv_b - adv_b.mean(axis=1, keepdims=True)
            adv_w[..., br * o:] += _array(heads.value.weight_mu)[0]
            adv_b = adv_b + _array(heads.value.bias_mu)[0]
        self.w_out = adv_w.reshape(br * a * k, g * o)
        self.b_out = adv_b.reshape(br * a * k)
        # expectation and normaliser of the softmax over atoms in one product
        support = _array(network.support)
        self.moments = np.stack([support, np.ones(k)], axis=1)
        self.margin = margin * float(support.max() - support.min())
        self.lead = np.zeros(br)

    @staticmethod
    def supports(network: BranchingQNetwork) -> bool:
        """What this forward computes: eval mode, C51, no variable selection."""
        return (not network.training and network.config.head == "c51"
                and network.selection is None)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """Expected Q per branch and action [Br, A], float64 (NaN where the softmax
        under- or overflowed)."""
        x = obs.astype(np.float64)
        for w, b, gain, shift, eps, inv_n in self.trunk:
            h = w @ x
            h += b
            h *= 1.0 / math.sqrt(h.dot(h) * inv_n + eps)
            h *= gain
            h += shift
            x = np.maximum(h, 0.0, out=h)
        h = self.w_hidden @ x
        h += self.b_hidden
        np.maximum(h, 0.0, out=h)
        logits = self.w_out @ h
        logits += self.b_out
        logits -= logits.max()
        m = np.exp(logits, out=logits).reshape(-1, self.atoms) @ self.moments
        return (m[:, 0] / m[:, 1]).reshape(self.n_branches, self.n_actions)

    def act(self, obs: np.ndarray) -> list[int] | None:
        """The greedy action per branch, or None where some branch's best action leads its
        runner-up by less than `margin` (the caller then asks torch)."""
        q = self.q_values(obs)
        top = np.sort(q, axis=1)
        np.subtract(top[:, -1], top[:, -2], out=self.lead)
        if not self.lead.min() >= self.margin:  # a near tie, or NaN
            return None
        return q.argmax(axis=1).tolist()
