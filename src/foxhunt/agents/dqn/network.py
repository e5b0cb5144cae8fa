"""Branching dueling distributional Q-network: shared trunk, one head per action branch.

Layout: observation -> [variable selection] -> trunk MLP (Linear, LayerNorm, ReLU) -> dueling
branching heads (C51 atoms or IQN quantiles per branch and action), plus a 2-class next-bar
direction head on the trunk as an auxiliary task.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foxhunt.agents.dqn.act_kernel import greedy_c51
from foxhunt.agents.dqn.config import LAYOUT_FIELDS, AgentConfig
from foxhunt.agents.dqn.noisy import (
    GroupedLinear,
    NoisyLinear,
    NoisyWeights,
    draw_noise,
    fill_noise,
    scaled_noise,
)
from foxhunt.agents.dqn.working import ALIGN, WorkingLinear, WorkingWeights
from foxhunt.errors import ConfigError


class QOutput(NamedTuple):
    """C51 fills `log_probs` [B, Br, A, atoms] and the dueling streams they come from, `value`
    [B, atoms] (None without dueling) and uncentred `adv` [B, Br, A, atoms]; IQN `quantiles`
    [B, Br, A, N] and `taus` [B, N]."""

    log_probs: Tensor | None
    aux_logits: Tensor
    quantiles: Tensor | None = None
    taus: Tensor | None = None
    value: Tensor | None = None
    adv: Tensor | None = None


def _linear(in_features: int, out_features: int, noisy: bool, sigma0: float) -> nn.Module:
    return (
        NoisyLinear(in_features, out_features, sigma0)
        if noisy
        else WorkingLinear(in_features, out_features)
    )


class VariableSelection(nn.Module):
    """Softmax-gated sum of per-group embeddings, after the variable selection network of
    Lim et al. 2021 ("Temporal Fusion Transformers").

    Each feature group's columns over the whole window are embedded on their own path; a gate
    computed from the full observation weights the groups, so the weights say which groups the
    agent leans on. Observation layout: window rows of F features (row-major), then pos_dim
    position features, which bypass the gate and are appended to the mixed embedding.
    """

    def __init__(
        self, groups: dict[str, list[int]], n_features: int, window: int, pos_dim: int, out_dim: int
    ):
        super().__init__()
        seen: dict[int, str] = {}
        for name, cols in groups.items():
            if not name or "." in name or not cols:
                raise ConfigError(
                    f"feature group {name!r}: needs a name without '.' and at least one column"
                )
            for c in cols:
                if not 0 <= c < n_features:
                    raise ConfigError(
                        f"feature group {name!r}: column {c} outside 0..{n_features - 1}"
                    )
                if c in seen:
                    raise ConfigError(
                        f"feature column {c} is in groups {seen[c]!r} and {name!r}; give it one"
                    )
                seen[c] = name
        missing = sorted(set(range(n_features)) - set(seen))
        if missing:
            raise ConfigError(
                f"feature columns {missing} are in no feature group; every column needs one"
            )
        self.names = list(groups)
        self.groups = {name: sorted(cols) for name, cols in groups.items()}
        self.feature_dim = window * n_features
        self.out_dim = out_dim + pos_dim
        self.encoders = nn.ModuleDict()
        for k, (name, cols) in enumerate(groups.items()):
            flat = [w * n_features + c for w in range(window) for c in sorted(cols)]
            self.register_buffer(
                f"columns_{k}", torch.tensor(flat, dtype=torch.long), persistent=False
            )
            self.encoders[name] = nn.Sequential(nn.Linear(len(flat), out_dim), nn.ReLU())
        self.gate = nn.Linear(self.feature_dim + pos_dim, len(groups))

    def group_weights(self, obs: Tensor) -> Tensor:
        """[B, G], each row sums to 1."""
        return F.softmax(self.gate(obs), dim=-1)

    def group_embeddings(self, obs: Tensor) -> Tensor:
        """[B, G, out]; embedding g reads only group g's columns."""
        return torch.stack(
            [
                enc(obs.index_select(-1, getattr(self, f"columns_{k}")))
                for k, enc in enumerate(self.encoders.values())
            ],
            dim=-2,
        )

    def forward(self, obs: Tensor) -> Tensor:
        mixed = (self.group_weights(obs).unsqueeze(-1) * self.group_embeddings(obs)).sum(dim=-2)
        return torch.cat([mixed, obs[..., self.feature_dim :]], dim=-1)


class DuelingBranches(nn.Module):
    """Action branching heads (Tavakoli et al. 2018, "Action Branching Architectures for Deep RL").

    One shared value stream and one advantage stream per branch, each a two-layer MLP; each
    branch's advantage is centred on its own mean over that branch's actions,
        Q_b(s, a) = V(s) + A_b(s, a) - mean_a' A_b(s, a'),
    which keeps V identifiable per branch. Every output carries a trailing `out_dim` axis (atoms
    for C51, 1 for IQN). Without dueling the advantage streams are the Q outputs.

    The streams are independent layers evaluated together: one matmul for every stream's hidden
    layer (`hidden`, groups = branches [+ value]), one batched matmul for the branches' output
    layers (`advantage`), one for the value output (`value`).
    """

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        branches: tuple[int, ...],
        out_dim: int,
        dueling: bool,
        noisy: bool,
        sigma0: float,
    ):
        super().__init__()
        self.n_branches, self.n_actions, self.out_dim = len(branches), branches[0], out_dim
        grouped = {"noisy": noisy, "sigma0": sigma0}
        self.hidden = GroupedLinear(
            self.n_branches + dueling, in_dim, hidden, shared_input=True, **grouped
        )
        self.advantage = GroupedLinear(
            self.n_branches, hidden, self.n_actions * out_dim, shared_input=False, **grouped
        )
        self.value = (
            GroupedLinear(1, hidden, out_dim, shared_input=True, **grouped) if dueling else None
        )

    def logits(self, x: Tensor) -> tuple[Tensor | None, Tensor]:
        """The streams' raw outputs: (value [..., out] or None, advantages [..., Br, A, out])."""
        return self._logits(self.hidden(x, relu=True))

    def _logits(self, h: Tensor) -> tuple[Tensor | None, Tensor]:
        """`logits` from the hidden layer's output h [..., Br (+1), hidden]."""
        adv = self.advantage(h[..., : self.n_branches, :])
        adv = adv.unflatten(-1, (self.n_actions, self.out_dim))
        if self.value is None:
            return None, adv
        return self.value(h[..., self.n_branches, :]).squeeze(-2), adv

    def streams(self, x: Tensor) -> tuple[Tensor | None, Tensor]:
        """(value [..., 1, 1, out] or None, advantages [..., Br, A, out], centred when dueling)."""
        return self._combine(*self.logits(x))

    def _combine(self, value: Tensor | None, adv: Tensor) -> tuple[Tensor | None, Tensor]:
        if value is None:
            return None, adv
        return value[..., None, None, :], adv - adv.mean(dim=-2, keepdim=True)

    def forward(self, x: Tensor) -> Tensor:
        return self._q(*self.streams(x))

    def combine(self, value: Tensor | None, adv: Tensor) -> Tensor:
        """The outputs (Q logits) from the streams' raw outputs (`logits`)."""
        return self._q(*self._combine(value, adv))

    def logits_with(self, x: Tensor,
                    extra: WorkingLinear) -> tuple[tuple[Tensor | None, Tensor], Tensor]:
        """(`logits(x)`, `extra(x)`), `extra` evaluated in the hidden layer's matmul (see
        `GroupedLinear.forward_with`)."""
        h, side = self.hidden.forward_with(x, extra, relu=True)
        return self._logits(h), side

    @staticmethod
    def _q(value: Tensor | None, adv: Tensor) -> Tensor:
        return adv if value is None else value + adv


class BranchingQNetwork(nn.Module):
    """Rainbow-style branching Q-network with a C51 (Bellemare et al. 2017) or IQN
    (Dabney et al. 2018, "Implicit Quantile Networks") head.

    `forward` returns per-branch distributions; `q_values` their means [B, Br, A]; `act` the
    greedy action per branch [B, Br]. Noisy layers use fresh noise only after `reset_noise`;
    `eval()` switches them to their mean weights.
    """

    def __init__(
        self,
        obs_dim: int,
        config: AgentConfig,
        feature_groups: dict[str, list[int]] | None = None,
        window: int = 1,
        pos_dim: int = 0,
    ):
        super().__init__()
        self.config, self.obs_dim, self.window, self.pos_dim = config, obs_dim, window, pos_dim
        c = config
        self.selection: VariableSelection | None = None
        in_dim = obs_dim
        if c.variable_selection:
            if not feature_groups:
                raise ConfigError("variable_selection is on but no feature groups were given")
            if window < 1 or pos_dim < 0 or (obs_dim - pos_dim) % window or obs_dim <= pos_dim:
                raise ConfigError(
                    f"observation size {obs_dim} is not window ({window}) x features"
                    f" + pos_dim ({pos_dim})"
                )
            n_features = (obs_dim - pos_dim) // window
            self.selection = VariableSelection(
                feature_groups, n_features, window, pos_dim, c.hidden
            )
            in_dim = self.selection.out_dim

        layers: list[nn.Module] = []
        for _ in range(c.trunk_layers):
            layers += [
                _linear(in_dim, c.hidden, c.noisy_trunk, c.sigma0),
                nn.LayerNorm(c.hidden),
                nn.ReLU(),
            ]
            in_dim = c.hidden
        # Working weights (the training passes' operands) pad the trunk's input to whole
        # 16-byte rows (e.g. 1222 -> 1224 columns for 32 bars x 38 features + 6): aligned rows
        # keep its matmuls on the fast tensor-core kernels.
        layers[0].in_pad = -layers[0].in_features % ALIGN
        self.trunk = nn.Sequential(*layers)
        self.aux_head = WorkingLinear(c.hidden, 2)

        out_dim = c.atoms if c.head == "c51" else 1
        self.heads = DuelingBranches(
            c.hidden, c.hidden, c.branches, out_dim, c.dueling, c.noisy, c.sigma0
        )
        if c.head == "c51":
            self.register_buffer(
                "support", torch.linspace(c.v_min, c.v_max, c.atoms), persistent=False
            )
        else:
            self.register_buffer(
                "cos_basis",
                math.pi * torch.arange(c.iqn_embedding, dtype=torch.float32),
                persistent=False,
            )
            self.tau_embedding = nn.Sequential(nn.Linear(c.iqn_embedding, c.hidden), nn.ReLU())
        n_noise = sum(b.numel() for b in self.noise_buffers())
        self.register_buffer("noise_ahead", torch.zeros(n_noise), persistent=False)
        self.reset_noise()

    def features(self, obs: Tensor) -> Tensor:
        """Trunk output [B, hidden], shared by the Q heads and the direction head."""
        return self.trunk(obs if self.selection is None else self.selection(obs))

    def sample_taus(self, batch: int, n: int, like: Tensor,
                    generator: torch.Generator | None = None) -> Tensor:
        """U(0, 1) taus in training (from `generator`: pass one for a reproducible CPU run);
        midpoints (i + 0.5) / n in eval(), so eval is deterministic."""
        if self.training:
            return torch.rand(batch, n, device=like.device, dtype=like.dtype, generator=generator)
        mid = (torch.arange(n, device=like.device, dtype=like.dtype) + 0.5) / n
        return mid.expand(batch, n)

    def distributions(self, obs: Tensor, taus: Tensor | None = None,
                      generator: torch.Generator | None = None) -> Tensor:
        """What `forward` returns as log_probs (C51) or quantiles (IQN), without the direction
        head; for IQN, `taus` None draws `sample_taus(B, iqn_taus)` from `generator`."""
        return self._head(self.features(obs), taus, generator)[0]

    def _head(self, h: Tensor, taus: Tensor | None,
              generator: torch.Generator | None = None) -> tuple[Tensor, Tensor | None]:
        """C51: (log-probabilities [B, Br, A, atoms], None); IQN: (quantiles [B, Br, A, N], taus)."""
        if self.config.head == "c51":
            return F.log_softmax(self.heads(h), dim=-1), None
        return self._iqn_head(h, taus, generator)

    def _iqn_head(self, h: Tensor, taus: Tensor | None,
                  generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        if taus is None:
            taus = self.sample_taus(h.shape[0], self.config.iqn_taus, h, generator)
        phi = self.tau_embedding(torch.cos(taus.unsqueeze(-1) * self.cos_basis))
        quantiles = self.heads(h.unsqueeze(-2) * phi).squeeze(-1)
        return quantiles.permute(0, 2, 3, 1), taus

    def forward(self, obs: Tensor, taus: Tensor | None = None) -> QOutput:
        """`taus` [B, N] feeds the IQN head only; None draws `sample_taus(B, iqn_taus)`.
        C51's heads read the trunk output as the direction head does, so the direction head runs
        in the heads' first matmul (`DuelingBranches.logits_with`)."""
        h = self.features(obs)
        if self.config.head == "c51":
            (value, adv), aux_logits = self.heads.logits_with(h, self.aux_head)
            logits = self.heads.combine(value, adv)
            return QOutput(log_probs=F.log_softmax(logits, dim=-1), aux_logits=aux_logits,
                           value=value, adv=adv)
        quantiles, taus = self._iqn_head(h, taus)
        return QOutput(None, self.aux_head(h), quantiles=quantiles, taus=taus)

    def expected_q(self, dist: Tensor) -> Tensor:
        """Mean of each branch-action distribution [..., K] -> [...]."""
        if self.config.head == "c51":
            return (dist.exp() * self.support).sum(dim=-1)
        return dist.mean(dim=-1)

    def q_values(self, obs: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Expected return per branch and action [B, Br, A] (the direction head is skipped);
        IQN's taus come from `generator` (see `sample_taus`)."""
        return self.expected_q(self.distributions(obs, generator=generator))

    @torch.no_grad()
    def act(self, obs: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Greedy action per branch [B, Br] (long); ties go to the lowest, safe-default index.
        C51 goes through `greedy_c51` (one fused kernel on CUDA); IQN's taus come from
        `generator`."""
        if self.config.head == "c51":
            value, adv = self.heads.logits(self.features(obs))
            return greedy_c51(value, adv, self.support)[0]
        return self.q_values(obs, generator).argmax(dim=-1)

    def noise_buffers(self) -> list[Tensor]:
        return [b for m in self.modules() if m is not self and hasattr(m, "noise_buffers")
                for b in m.noise_buffers()]  # fmt: skip

    def noisy_layers(self) -> list[NoisyWeights]:
        return [m for m in self.modules()
                if isinstance(m, NoisyWeights) and getattr(m, "noisy", True)]  # fmt: skip

    @torch.no_grad()
    def draw_noise(self, generator: torch.Generator | None = None) -> None:
        """Fresh noise in every noisy layer, from one normal draw; working weights are left as
        they are (`compose_working_weights` must follow before a training-mode pass)."""
        buffers = self.noise_buffers()
        if buffers:
            draw_noise(buffers, generator)

    @torch.no_grad()
    def draw_noise_ahead(self, generator: torch.Generator | None = None) -> None:
        """The next noise, drawn into `noise_ahead` as `draw_noise` would draw it; the layers
        keep the current one until `take_noise_ahead`. A learner draws it beside an update's
        backward pass instead of in the optimiser step at the end of its critical path."""
        if self.noise_ahead.numel():
            self.noise_ahead.copy_(scaled_noise(self.noise_ahead.numel(), self.noise_ahead,
                                                generator))

    @torch.no_grad()
    def take_noise_ahead(self) -> None:
        """The noise `draw_noise_ahead` drew becomes every noisy layer's (working weights are
        left as they are, as by `draw_noise`)."""
        buffers = self.noise_buffers()
        if buffers:
            fill_noise(buffers, self.noise_ahead)

    @torch.no_grad()
    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """Fresh noise in every noisy layer, from one normal draw, and their working weights
        composed with it (the plain layers' stay as they are)."""
        self.draw_noise(generator)
        self.compose_working_weights("noisy")

    # -- working weights (see `working.WorkingWeights`) -------------------------------------------

    def working_layers(self) -> list[WorkingWeights]:
        """The layers that can compute with working weights: every noisy layer, the trunk's
        plain linear layers and the direction head."""
        return [m for m in self.modules()
                if isinstance(m, WorkingWeights) and getattr(m, "noisy", True)]  # fmt: skip

    def use_working_weights(self, dtype: torch.dtype) -> None:
        """From now on the `working_layers` compute in training mode with working copies of
        their weights in `dtype` (noise included), composed ahead. `reset_noise` composes the
        noisy layers'; whoever changes the parameters calls `compose_working_weights` (the
        learner's optimiser step does), and takes the gradients from `gradients()`."""
        for layer in self.working_layers():
            layer.enable_working(dtype)

    @torch.no_grad()
    def compose_working_weights(self, which: Literal["all", "noisy", "plain"] = "all") -> None:
        """Compose the working weights of every working layer, or of the noisy or the plain
        ones only (after a change of the noise only, or of the parameters but not the noise)."""
        for layer in self.working_layers():
            if which == "all" or (which == "noisy") == isinstance(layer, NoisyWeights):
                layer.compose_working()

    def gradients(self) -> list[Tensor | None]:
        """Every parameter's gradient in `parameters()` order; a layer's from its working
        weights' gradients when it has working weights (`WorkingWeights.master_grads`)."""
        mapped: dict[int, Tensor | None] = {}
        for layer in self.working_layers():
            if layer.weight_work is not None:
                mapped.update(zip(map(id, layer.master_params()), layer.master_grads(),
                                  strict=True))
        return [mapped.get(id(p), p.grad) for p in self.parameters()]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The parameters' gradients and the working weights' (always to None for those)."""
        super().zero_grad(set_to_none)
        for layer in self.working_layers():
            layer.clear_working_grads()

    def layout_info(self) -> dict[str, object]:
        """What besides parameter shapes a checkpoint must match (see `layout_fingerprint`)."""
        info: dict[str, object] = {f: getattr(self.config, f) for f in LAYOUT_FIELDS}
        info.update(obs_dim=self.obs_dim, window=self.window, pos_dim=self.pos_dim)
        if self.selection is not None:
            info["feature_groups"] = self.selection.groups
        return info
