"""The greedy action of an eval-mode C51 network for one observation, in numpy, certified.

Paper trading asks the policy once per bar, one row at a time. Through torch that is ~20
operator calls and module dispatches (~100 us on a CPU) for a network of a few hundred
thousand multiply-adds. `GreedyForward` holds the eval-mode operands once (noisy layers at
their mean weights, as `eval()` uses them; the weights as torch's own float32 values, which
float64 holds exactly) and runs the same computation (`BranchingQNetwork.act`: trunk of Linear, LayerNorm, ReLU; dueling
branching C51 heads; `greedy_c51_reference`) accumulated in float64, as one compiled call
(`_greedy`, a Numba kernel: ~4 us a decision; numpy took ~25 calls and ~25 us).

The backtest decides with torch in float32, and what must match is its decisions, not its
bits (torch's own bits change with the batch size). float64 here is near the exact value,
torch's float32 within its rounding error of it; so where the best action of every branch
leads the runner-up by more than `MARGIN` of the support's width (far above that error), both
pick the same action. Where a branch is closer, `act` returns None and the caller asks torch
itself: a near tie is decided by the backtest's own arithmetic, never by this one.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

from foxhunt.agents.dqn import BranchingQNetwork

MARGIN = 5e-5
"""Q lead, as a fraction of the C51 support's width (1e-3 for [-10, 10]), below which a
decision goes to torch. torch's float32 Q differs from this float64 one by at most 5e-8 of the
width on the benchmark's network and 1.6e-6 of it on the tests' networks with weights three
times their initial size (tests/agents/test_forward_paths.py holds it under a tenth of MARGIN)."""


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy().copy()


def _weights(t: torch.Tensor) -> np.ndarray:
    """A weight [..., out, in] as float32 [..., in, out]: the kernel adds one input's column at
    a time (vectorised, no reduction to reorder), from half the memory of float64."""
    return np.ascontiguousarray(t.detach().to("cpu", torch.float32).numpy().swapaxes(-1, -2))


class GreedyForward:
    """`BranchingQNetwork.act` for one observation of an eval-mode C51 network (no variable
    selection), in float64, with each branch's lead over its runner-up (`lead`)."""

    def __init__(self, network: BranchingQNetwork, margin: float = MARGIN):
        """`margin`: see MARGIN."""
        c = network.config
        if not self.supports(network):
            raise ValueError("GreedyForward: an eval-mode C51 network without variable "
                             "selection only")
        mods = list(network.trunk)
        linears = [(m.weight_mu, m.bias_mu) if hasattr(m, "weight_mu") else (m.weight, m.bias)
                   for m in mods[0::3]]
        norms = mods[1::3]
        width = linears[0][0].shape[0]
        self.w_in = _weights(linears[0][0])
        self.w_trunk = (np.stack([_weights(w) for w, _ in linears[1:]]) if len(linears) > 1
                        else np.zeros((0, width, width), dtype=np.float32))
        self.b_trunk = np.stack([_array(b) for _, b in linears])
        self.gain = np.stack([_array(n.weight) for n in norms])
        self.shift = np.stack([_array(n.bias) for n in norms])
        self.eps = np.array([float(n.eps) for n in norms])
        heads = network.heads
        br, a, k = heads.n_branches, heads.n_actions, c.atoms
        self.n_branches, self.n_actions, self.atoms = br, a, k
        hid = heads.hidden
        g, o, i = hid.weight_mu.shape
        self.w_hidden = _weights(hid.weight_mu.reshape(g * o, i))
        self.b_hidden = _array(hid.bias_mu).reshape(g * o)
        # branch b's advantages read hidden group b; the value (dueling) the group after them
        self.w_adv = _weights(heads.advantage.weight_mu)  # [Br, hidden, A*K]
        self.b_adv = _array(heads.advantage.bias_mu)  # [Br, A*K]
        if heads.value is not None:
            self.w_value = _weights(heads.value.weight_mu)[0]  # [hidden, K]
            self.b_value = _array(heads.value.bias_mu)[0]
        else:
            self.w_value = np.zeros((0, k), dtype=np.float32)
            self.b_value = np.zeros(k)
        self.support = _array(network.support)
        self.margin = margin * float(self.support.max() - self.support.min())
        self.q = np.zeros((br, a))
        self.lead = np.zeros(br)
        self.actions = np.zeros(br, dtype=np.int64)
        self._args = (self.w_in, self.w_trunk, self.b_trunk, self.gain, self.shift, self.eps,
                      self.w_hidden, self.b_hidden, self.w_adv, self.b_adv, self.w_value,
                      self.b_value, self.support, self.q, self.lead, self.actions)
        _greedy(np.zeros(self.w_in.shape[0], dtype=np.float32), *self._args)  # compile now

    @staticmethod
    def supports(network: torch.nn.Module) -> bool:
        """What this forward computes: a DQN's network in eval mode, C51, no variable
        selection (any other policy network acts through torch)."""
        return (isinstance(network, BranchingQNetwork) and not network.training
                and network.config.head == "c51" and network.selection is None)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """Expected Q per branch and action [Br, A], float64 (NaN where the softmax
        under- or overflowed)."""
        _greedy(np.ascontiguousarray(obs, dtype=np.float32), *self._args)
        return self.q.copy()

    def act(self, obs: np.ndarray) -> list[int] | None:
        """The greedy action per branch, or None where some branch's best action leads its
        runner-up by less than `margin` (the caller then asks torch). `obs`: float32 [obs]."""
        if not _greedy(obs, *self._args) >= self.margin:  # a near tie, or NaN
            return None
        return self.actions.tolist()


@numba.njit(cache=True)
def _dense(x, w, b, out, relu):
    """out = x @ w + b (then max(., 0) with `relu`) for w [in, out], input by input in float64:
    each output's sum runs in input order and the inner loop vectorises; zero inputs (after a
    ReLU, about half) are skipped, and four inputs go through each pass over `out`."""
    n = out.shape[0]
    for i in range(n):
        out[i] = b[i]
    nonzero = np.empty(x.shape[0], dtype=np.int64)
    m = 0
    for j in range(x.shape[0]):
        if x[j] != 0.0:
            nonzero[m] = j
            m += 1
    k = 0
    while k + 4 <= m:
        j0, j1, j2, j3 = nonzero[k], nonzero[k + 1], nonzero[k + 2], nonzero[k + 3]
        x0, x1 = np.float64(x[j0]), np.float64(x[j1])
        x2, x3 = np.float64(x[j2]), np.float64(x[j3])
        for i in range(n):
            out[i] = (((out[i] + x0 * w[j0, i]) + x1 * w[j1, i]) + x2 * w[j2, i]) + x3 * w[j3, i]
        k += 4
    for jj in range(k, m):
        j = nonzero[jj]
        xj = np.float64(x[j])
        for i in range(n):
            out[i] += xj * w[j, i]
    if relu:
        for i in range(n):
            if not out[i] > 0.0:
                out[i] = 0.0


@numba.njit(cache=True)
def _layer_norm_relu(h, gain, shift, eps):
    """LayerNorm over h, then ReLU, in place."""
    n = h.shape[0]
    mean = 0.0
    for i in range(n):
        mean += h[i]
    mean /= n
    var = 0.0
    for i in range(n):
        h[i] -= mean
        var += h[i] * h[i]
    r = 1.0 / math.sqrt(var / n + eps)
    for i in range(n):
        v = h[i] * r * gain[i] + shift[i]
        h[i] = max(v, 0.0)


@numba.njit(cache=True)
def _greedy(obs, w_in, w_trunk, b_trunk, gain, shift, eps, w_hidden, b_hidden, w_adv, b_adv,
            w_value, b_value, support, q, lead, actions):
    """Expected Q into q [Br, A], each branch's greedy action into actions (the first of equal
    maxima, as torch's argmax) and its lead over the runner-up into lead; returns the smallest
    lead (NaN when some Q is NaN)."""
    h = np.empty(b_trunk.shape[1])
    _dense(obs, w_in, b_trunk[0], h, False)
    _layer_norm_relu(h, gain[0], shift[0], eps[0])
    for layer in range(w_trunk.shape[0]):
        nxt = np.empty_like(h)
        _dense(h, w_trunk[layer], b_trunk[layer + 1], nxt, False)
        _layer_norm_relu(nxt, gain[layer + 1], shift[layer + 1], eps[layer + 1])
        h = nxt
    hidden = np.empty(b_hidden.shape[0])
    _dense(h, w_hidden, b_hidden, hidden, True)
    n_branches, n_actions = q.shape
    k = support.shape[0]
    width = w_adv.shape[1]
    logits = np.empty((n_branches, n_actions * k))
    for b in range(n_branches):
        _dense(hidden[b * width:(b + 1) * width], w_adv[b], b_adv[b], logits[b], False)
    if w_value.shape[0]:  # dueling: V + A - mean_a A
        value = np.empty(k)
        _dense(hidden[n_branches * width:], w_value, b_value, value, False)
        for b in range(n_branches):
            for j in range(k):
                mean = 0.0
                for a in range(n_actions):
                    mean += logits[b, a * k + j]
                mean /= n_actions
                for a in range(n_actions):
                    logits[b, a * k + j] = value[j] + (logits[b, a * k + j] - mean)
    top = logits.max()
    smallest = np.inf
    for b in range(n_branches):
        best, second, arg = -np.inf, -np.inf, 0
        for a in range(n_actions):
            num = den = 0.0
            for j in range(k):
                e = math.exp(logits[b, a * k + j] - top)
                num += e * support[j]
                den += e
            v = num / den
            q[b, a] = v
            if math.isnan(v):
                return np.nan
            if v > best:
                second, best, arg = best, v, a
            elif v > second:
                second = v
        actions[b] = arg
        lead[b] = best - second
        smallest = min(smallest, best - second)
    return smallest
