"""Prioritised replay with n-step returns built at sample time, entirely on the device.

Prioritised sampling is Schaul et al. 2016, "Prioritized Experience Replay" (ICLR):

    p_i  = |delta_i| + eps                          (priority; new transitions get max_j p_j)
    P(i) = p_i^alpha / sum_j p_j^alpha              (sampling probability)
    w_i  = (N P(i))^-beta / max_j (N P(j))^-beta    (IS weight)
         = (p_i^alpha / min_j p_j^alpha)^-beta       (N and the sum cancel)

with beta annealed linearly from beta0 to 1 over `beta_anneal_steps` sample() calls.

Layout. Storage is time-major, [slots, n_envs] with slots = capacity // n_envs. One add() writes
the n_envs transitions of one lock-step env step into one slot, so the k-th successor of the
transition at (slot s, env e) is (s + k mod slots, e). A transition's flat index is s * n_envs + e.
Only indices and small state are kept; the caller re-gathers observation windows from
(bar, pos_state) and (next_bar, next_pos_state).

Sampling is an inverse CDF in two levels: the masses are cut into blocks of about sqrt(capacity)
(1024 for 1M), one reduction gives each block's mass, a float64 prefix sum over the blocks picks
each draw's block, and a prefix sum over that block's masses alone picks the transition. That
reads the priorities once per sample() instead of scanning a million-entry prefix sum.

Bytes per transition with P = 6 and float16 states: bar 4, pos_state 12, action 3, reward 4,
terminated 1, truncated 1, next_bar 4, next_pos_state 12, priority 4 = 45 B, i.e. 45 MB for 1M
transitions (float32 states would make it 69 MB). float16
keeps ~3 significant digits (finer than the bf16 autocast the network runs in); integers up
to 2048 are exact. Choose state_dtype = "float32" if position features are not normalised.

Capture safety. cursor, size, the max priority and the sample-call counter are device tensors
changed in place; every tensor shape depends only on (batch_size, n_step); nothing reads a device
value on the host. add(), sample() and update_priorities() can therefore run inside a captured
CUDA graph. Random numbers come from the default generator of the device unless a
torch.Generator is given (use that for CPU determinism; leave it out for CUDA-graph capture).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from foxhunt.errors import ConfigError
from foxhunt.replay.config import ReplayConfig
from foxhunt.replay.draw_kernel import draw

_STATE_DTYPES = {"float16": torch.float16, "float32": torch.float32}


@dataclass(frozen=True)
class ReplayBatch:
    """n-step transitions; the TD target is ret + discount * Q_target(next_bar, next_pos_state)."""

    index: Tensor  # [B] long: flat index (slot * n_envs + env); give it back to update_priorities
    bar: Tensor  # [B] long: decision bar of the first transition of the window
    pos_state: Tensor  # [B, P] float32
    action: Tensor  # [B, n_branches] long
    ret: Tensor  # [B] float32: sum_{k < m} gamma^k r_{t+k}, m = steps used (1..n_step)
    discount: Tensor  # [B] float32: gamma^m, or 0 when the window ends in a termination
    next_bar: Tensor  # [B] long: bootstrap state = next state of the last transition used
    next_pos_state: Tensor  # [B, P] float32
    weight: Tensor  # [B] float32: IS weights, max over the stored transitions = 1


class PrioritizedReplay:
    """Device-resident prioritised replay for n_envs lock-step envs (see the module docstring)."""

    def __init__(
        self,
        config: ReplayConfig,
        n_envs: int,
        pos_dim: int,
        n_branches: int = 3,
        device: torch.device | str = "cpu",
        generator: torch.Generator | None = None,
    ):
        if n_envs < 1 or pos_dim < 1 or n_branches < 1:
            raise ValueError(
                f"n_envs, pos_dim, n_branches must be >= 1 (got {n_envs}, {pos_dim}, {n_branches})"
            )
        slots = config.capacity // n_envs
        if slots < 1:
            raise ConfigError(
                f"replay.capacity = {config.capacity} is below the number of envs ({n_envs}); "
                f"raise replay.capacity to at least {n_envs}"
            )
        self.config, self.slots = config, slots
        self.n_envs, self.pos_dim, self.n_branches = n_envs, pos_dim, n_branches
        self.device, self.generator = torch.device(device), generator
        n, dev = config.n_step, self.device
        state_dtype = _STATE_DTYPES[config.state_dtype]

        def zeros(*shape: int, dtype: torch.dtype) -> Tensor:
            return torch.zeros(shape, dtype=dtype, device=dev)

        # Transitions, [slots, n_envs, ...].
        self.bar = zeros(slots, n_envs, dtype=torch.int32)
        self.pos_state = zeros(slots, n_envs, pos_dim, dtype=state_dtype)
        self.action = zeros(slots, n_envs, n_branches, dtype=torch.uint8)
        self.reward = zeros(slots, n_envs, dtype=torch.float32)
        self.terminated = zeros(slots, n_envs, dtype=torch.bool)
        self.truncated = zeros(slots, n_envs, dtype=torch.bool)
        self.next_bar = zeros(slots, n_envs, dtype=torch.int32)
        self.next_pos_state = zeros(slots, n_envs, pos_dim, dtype=state_dtype)
        # Sampling mass p_i^alpha per flat index; 0 marks a slot never written (never sampled).
        # Zero-padded past the capacity to whole blocks of `block` masses.
        capacity = slots * n_envs
        self.block = min(1024, max(32, 1 << math.isqrt(capacity - 1).bit_length()))
        self.priority_alpha = zeros(-(-capacity // self.block) * self.block, dtype=torch.float32)
        # Device scalars, changed in place only.
        self.cursor = zeros(dtype=torch.int64)  # next slot add() writes
        self.size = zeros(dtype=torch.int64)  # slots written so far (all envs write together)
        self.max_priority = torch.ones((), dtype=torch.float32, device=dev)  # max p_i (not ^alpha)
        self.sample_calls = zeros(dtype=torch.int64)  # drives the beta schedule
        # Constants.
        self._k = torch.arange(n, device=dev)
        self._gamma_pow = config.gamma ** torch.arange(n + 1, device=dev, dtype=torch.float64)
        self._gamma_pow = self._gamma_pow.to(torch.float32)

    @property
    def capacity(self) -> int:
        """Transitions held when full (config.capacity rounded down to a multiple of n_envs)."""
        return self.slots * self.n_envs

    def _tensors(self) -> list[Tensor]:
        return [
            self.bar, self.pos_state, self.action, self.reward, self.terminated, self.truncated,
            self.next_bar, self.next_pos_state, self.priority_alpha, self.cursor, self.size,
            self.max_priority, self.sample_calls, self._k, self._gamma_pow,
        ]  # fmt: skip

    def nbytes(self) -> int:
        """Device memory held by the buffer (storage, scalars and the prefix-sum workspace)."""
        return sum(t.numel() * t.element_size() for t in self._tensors())

    # -- writing ------------------------------------------------------------------------------

    def add(
        self,
        bar: Tensor,
        pos_state: Tensor,
        action: Tensor,
        reward: Tensor,
        terminated: Tensor,
        truncated: Tensor,
        next_bar: Tensor,
        next_pos_state: Tensor,
    ) -> None:
        """Write one env step (leading dim n_envs) into the slot at the cursor.

        next_bar/next_pos_state are the true next state, also when the env auto-resets. A step
        that is both terminated and truncated counts as terminated (no bootstrap).
        """
        at = self.cursor.view(1)
        fields = {
            "bar": (self.bar, bar),
            "pos_state": (self.pos_state, pos_state),
            "action": (self.action, action),
            "reward": (self.reward, reward),
            "terminated": (self.terminated, terminated),
            "truncated": (self.truncated, truncated),
            "next_bar": (self.next_bar, next_bar),
            "next_pos_state": (self.next_pos_state, next_pos_state),
        }
        for name, (store, value) in fields.items():
            want = tuple(store.shape[1:])
            if tuple(value.shape) != want:
                raise ValueError(f"add(): {name} has shape {tuple(value.shape)}, expected {want}")
            store.index_copy_(0, at, value.to(store.dtype).unsqueeze(0))
        new_mass = (self.max_priority ** self.config.alpha).expand(1, self.n_envs)
        self._mass_grid().index_copy_(0, at, new_mass)
        self.cursor.add_(1).remainder_(self.slots)
        self.size.add_(1).clamp_(max=self.slots)

    def update_priorities(self, index: Tensor, td_abs: Tensor) -> None:
        """p_i = |delta_i| + eps for the flat indices of a sampled batch; raises max priority."""
        p = td_abs.detach().abs().to(torch.float32) + self.config.priority_eps
        self.priority_alpha.index_copy_(0, index, p.pow(self.config.alpha))
        torch.maximum(self.max_priority, p.amax(), out=self.max_priority)

    def reset(self) -> None:
        """Forget every transition (fold boundary: nothing from fold k is replayed in fold k+1).

        Also restarts the beta schedule and the max priority (1). In place, so tensors captured in
        a CUDA graph stay valid.
        """
        for t in self._tensors():
            if t is not self._k and t is not self._gamma_pow:  # constants
                t.zero_()
        self.max_priority.fill_(1.0)

    # -- sampling -----------------------------------------------------------------------------

    def beta(self) -> Tensor:
        """IS exponent the next sample() uses: beta0 -> 1 linearly over beta_anneal_steps calls."""
        steps = self.config.beta_anneal_steps
        frac = (self.sample_calls.to(torch.float64) / max(steps, 1)).clamp(max=1.0)
        if steps == 0:
            frac = frac.clamp(min=1.0)
        return (self.config.beta0 + (1.0 - self.config.beta0) * frac).to(torch.float32)

    def sample(self, batch_size: int) -> ReplayBatch:
        """Draw batch_size transitions, P(i) ~ p_i^alpha (stratified), with their n-step targets.

        The buffer must hold at least one add(); sampling an empty buffer returns garbage
        (checking would need a host sync).
        """
        # Stratified: one uniform in each of batch_size equal slices of [0, 1).
        f64 = {"device": self.device, "dtype": torch.float64}
        u = torch.rand(batch_size, generator=self.generator, **f64)
        u += torch.arange(batch_size, **f64)
        index, weight = self._draw(u / batch_size)
        self.sample_calls.add_(1)
        steps = None
        if self.config.n_step_sampling == "uniform":
            steps = torch.randint(1, self.config.n_step + 1, (batch_size,), device=self.device,
                                  generator=self.generator)
        return self.lookup(index, weight, steps)

    def _mass_grid(self) -> Tensor:
        """The stored masses as [slots, n_envs] (a view)."""
        return self.priority_alpha[: self.capacity].view(self.slots, self.n_envs)

    def _draw(self, u01: Tensor) -> tuple[Tensor, Tensor]:
        """(flat indices, IS weights) for uniforms in [0, 1): the first i whose cumulative mass
        exceeds u * total, found block by block (see the module docstring), and
        (N P(i))^-beta / max_j (N P(j))^-beta = (p_i^alpha / min_j p_j^alpha)^-beta over the
        written slots (`draw_kernel.draw`: two Triton kernels where Triton runs, else torch)."""
        newest = self.size * self.n_envs - 1
        return draw(self.priority_alpha, self.block, u01, newest, self.beta())

    def lookup(self, index: Tensor, weight: Tensor | None = None,
               steps: Tensor | None = None) -> ReplayBatch:
        """The n-step batch for given flat indices (what sample() returns after drawing them);
        `steps` [B] caps each window at that many steps (`n_step_sampling = "uniform"`).

        The window of transition (s, e) takes steps k = 0..n_step-1 of env e while
          - slot s+k is written (k <= number of transitions newer than s: the ring head; the window
            only moves toward newer data, so overwritten old data is never reached), and
          - no earlier step of the window ended its episode (a terminated or truncated step is the
            last one used; its reward is included).
        The bootstrap state is the next state of the last step used, m = steps used, and
        discount = gamma^m, or 0 if that last step terminated.
        """
        E, slots, k = self.n_envs, self.slots, self._k
        slot, env = index // E, index % E
        newer = (self.cursor - 1 - slot).remainder(slots)  # transitions written after slot s
        window = ((slot.unsqueeze(1) + k) % slots) * E + env.unsqueeze(1)  # [B, n] flat indices
        reward = self.reward.view(-1)[window]
        done = self.terminated.view(-1)[window] | self.truncated.view(-1)[window]
        ended_before = (done.cumsum(1) - done.long()) > 0  # an earlier step ended the episode
        used = (k <= newer.unsqueeze(1)) & ~ended_before  # [B, n], prefix-shaped, used[:, 0] true
        if steps is not None:
            used &= k < steps.unsqueeze(1)
        m = used.sum(1)
        last = window.gather(1, (m - 1).unsqueeze(1)).squeeze(1)
        ret = torch.where(used, reward * self._gamma_pow[: k.numel()], 0.0).sum(1)
        discount = self._gamma_pow[m] * ~self.terminated.view(-1)[last]
        if weight is None:
            weight = torch.ones(index.shape, dtype=torch.float32, device=self.device)
        return ReplayBatch(
            index=index,
            bar=self.bar.view(-1)[index].long(),
            pos_state=self.pos_state.view(-1, self.pos_dim)[index].float(),
            action=self.action.view(-1, self.n_branches)[index].long(),
            ret=ret,
            discount=discount,
            next_bar=self.next_bar.view(-1)[last].long(),
            next_pos_state=self.next_pos_state.view(-1, self.pos_dim)[last].float(),
            weight=weight,
        )
