"""The online and the target network's C51 passes at the same observations, as one pass.

Double DQN's bootstrap target evaluates both networks at s' on every update: the online network
picks a* = argmax_a E[Z(s', a)], the target network gives Z(s', a*). The two passes have the same
shapes, so `TwinPass` runs each pair of layers as one matmul over a leading axis of 2 (the
trunk's first layer, whose input both share, as one matmul with both weights' rows): half the
matmul launches of two passes, which on a GPU costs more than their arithmetic at these sizes
(docs/benchmarks.md).

The pairs of matmul operands are the networks' working weights (`noisy.WorkingWeights`), moved
into shared [2, ...] buffers once (`TwinPass(online, target)`): each network keeps composing and
using its own half as before, and the pair is read without a copy. The layer norms' parameters
are stacked per pass (a read inside the normalisation's own kernel once compiled). A compiled
step that reads the pair should not also write a half (compose a network's working weights):
its inputs would alias, which the compiler handles with copies; the learner composes the target
before its staging step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foxhunt.agents.dqn.network import BranchingQNetwork
from foxhunt.agents.dqn.noisy import GroupedLinear, WorkingWeights
from foxhunt.errors import ConfigError


class TwinPass:
    """Both networks' C51 log-probabilities at the same observations, from one pass over paired
    layers. Needs a dueling C51 head with noisy (working-weight) streams, no variable selection,
    and working weights in both networks (`BranchingQNetwork.use_working_weights`)."""

    def __init__(self, online: BranchingQNetwork, target: BranchingQNetwork):
        c = online.config
        if c.head != "c51" or not c.dueling or not c.noisy or c.variable_selection:
            raise ConfigError(
                "train.twin_target_pass needs agent.head = 'c51', agent.dueling = true, "
                f"agent.noisy = true and agent.variable_selection = false (got head = {c.head!r}, "
                f"dueling = {str(c.dueling).lower()}, noisy = {str(c.noisy).lower()}, "
                f"variable_selection = {str(c.variable_selection).lower()})")
        pairs = list(zip(online.working_layers(), target.working_layers(), strict=True))
        if any(a.weight_work is None or b.weight_work is None for a, b in pairs):
            raise ValueError("TwinPass needs both networks' working weights "
                             "(BranchingQNetwork.use_working_weights)")
        self.online, self.target = online, target
        self._pair = {id(a): _share(a, b) for a, b in pairs}
        self._norms = [(a, b) for a, b in zip(online.trunk, target.trunk, strict=True)
                       if isinstance(a, nn.LayerNorm)]

    def log_probs(self, obs: Tensor) -> Tensor:
        """[2, B, Br, A, atoms]: the online network's log-probabilities, then the target's, as
        each network's `distributions(obs)` in training mode gives them."""
        online = self.online
        if not (online.training and self.target.training):
            raise RuntimeError("TwinPass.log_probs: both networks must be in training mode (it "
                               "computes with their working weights, which eval() ignores)")
        x = F.pad(obs, (0, online.input_pad)) if online.input_pad else obs
        h = self._trunk(x)
        heads = online.heads
        hidden = F.relu(self._grouped(heads.hidden, h))  # [2, B, Br + 1, hidden]
        br = heads.n_branches
        adv = self._grouped(heads.advantage, hidden[:, :, :br])  # [2, B, Br, A * atoms]
        adv = adv.unflatten(-1, (heads.n_actions, heads.out_dim))
        value = self._grouped(heads.value, hidden[:, :, br]).squeeze(-2)  # [2, B, atoms]
        return F.log_softmax(heads.combine(value, adv), dim=-1)

    def _trunk(self, x: Tensor) -> Tensor:
        """[2, B, hidden] from x [B, in]: the first layer as one matmul with both networks'
        rows, then paired layers."""
        h: Tensor | None = None
        norms = iter(self._norms)
        for layer in self.online.trunk:
            if isinstance(layer, WorkingWeights):
                weight, bias = self._pair[id(layer)]  # [2, out, in], [2, out]
                if h is None:
                    y = F.linear(x, weight.flatten(0, 1), bias.flatten())
                    h = y.unflatten(-1, (2, -1)).movedim(-2, 0)
                else:
                    h = torch.bmm(h.to(weight.dtype), weight.transpose(1, 2)) + bias.unsqueeze(1)
            elif isinstance(layer, nn.LayerNorm):
                a, b = next(norms)
                h = _paired_layer_norm(h, a, b)
            else:
                h = layer(h)
        assert h is not None
        return h

    def _grouped(self, layer: GroupedLinear, x: Tensor) -> Tensor:
        """A grouped layer of both networks: x [2, B, in] (shared input) or [2, B, groups, in]
        -> [2, B, groups, out]."""
        weight, bias = self._pair[id(layer)]  # [2, g, o, in], [2, g, o] (o padded)
        two, g, o, i = weight.shape
        x = x.to(weight.dtype)
        if layer.shared_input:
            y = torch.bmm(x, weight.reshape(two, g * o, i).transpose(1, 2))
            y = (y + bias.reshape(two, 1, g * o)).unflatten(-1, (g, o))
        else:
            per_group = x.movedim(2, 1).reshape(two * g, -1, i)  # [2g, B, in]
            y = torch.bmm(per_group, weight.reshape(two * g, o, i).transpose(1, 2))
            y = (y + bias.reshape(two * g, 1, o)).reshape(two, g, -1, o).movedim(1, 2)
        return y[..., : layer.out_features]


def _share(a: WorkingWeights, b: WorkingWeights) -> tuple[Tensor, Tensor]:
    """Move a's and b's working weights into shared [2, ...] buffers; returns them. Each layer's
    copies become its half of the memory (leaves, taking gradients as before)."""
    pair = []
    for name in ("weight_work", "bias_work"):
        mine, theirs = getattr(a, name), getattr(b, name)
        both = torch.stack((mine.detach(), theirs.detach()))
        setattr(a, name, _half(both, 0).requires_grad_(mine.requires_grad))
        setattr(b, name, _half(both, 1).requires_grad_(theirs.requires_grad))
        pair.append(both)
    return pair[0], pair[1]


def _half(both: Tensor, k: int) -> Tensor:
    """both[k] as a tensor of its own over the same memory: a view (or a detached one) would
    share its base's version counter, and composing the target's half would then invalidate
    the online half saved for backward."""
    half = both.new_empty(0)
    half.set_(both.untyped_storage(), both.storage_offset() + k * both.stride(0), both.shape[1:],
              both.stride()[1:])
    return half


def _paired_layer_norm(h: Tensor, a: nn.LayerNorm, b: nn.LayerNorm) -> Tensor:
    """`nn.LayerNorm` over the last axis of h [2, B, n], with a's parameters for h[0] and b's
    for h[1]; in float32, as autocast runs layer norm."""
    h = h.float()
    var, mean = torch.var_mean(h, dim=-1, correction=0, keepdim=True)
    normed = (h - mean) * torch.rsqrt(var + a.eps)
    weight = torch.stack((a.weight, b.weight)).unsqueeze(1)
    bias = torch.stack((a.bias, b.bias)).unsqueeze(1)
    return normed * weight + bias
