"""PPO's actor-critic: PQN's LayerNorm MLP trunk, optionally an LSTM after it, the DQN's factored action
heads as per-branch policy logits, and a value head.

The policy is factored like the Q-networks' heads: one categorical distribution per branch of
`env.actions` (direction, size, stop), independent given the state, so log pi(a|s) and the
entropy are sums over branches and an action is the branches' choices [B, Br], the same action
table the DQN and PQN act in. The logits come from `DuelingBranches` without the value stream
(one hidden layer and one output per branch), its output layer scaled to 0.01 so the first
policy is near uniform (CleanRL's init).

The recurrent policy (`[ppo] recurrent`) carries an LSTM state (h, c) [B, hidden] per env. Every
step's state is zeroed where the observation begins an episode (`start`), so no memory crosses
an episode's end. Greedy acting (`act`: validation, test, backtest, paper) has no episode
signal: it carries the state of each batch size from call to call and starts from zeros after
every `train()`/`eval()` switch or `reset_state()`, which the trainer's evaluations, the
backtest (a fresh copy per run) and paper trading (one stream) each begin with.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.agents.dqn.network import DuelingBranches
from foxhunt.agents.ppo.config import PPOConfig
from foxhunt.agents.pqn.network import layernorm_trunk

LAYOUT_FIELDS = ("hidden", "trunk_layers", "branches")
"""The `[agent]` fields that shape the network; a checkpoint must match them (and `recurrent`)."""

State = tuple[Tensor, Tensor]
"""An LSTM state (h, c), each [B, hidden]."""


class ActorCritic(nn.Module):
    """obs [B, obs_dim] -> (logits [B, branches, actions], value [B])."""

    def __init__(self, obs_dim: int, config: AgentConfig, ppo: PPOConfig, window: int = 1,
                 pos_dim: int = 0):
        super().__init__()
        self.config, self.recurrent = config, ppo.recurrent
        self.obs_dim, self.window, self.pos_dim = obs_dim, window, pos_dim
        self.trunk = layernorm_trunk(obs_dim, config)  # PQN's
        self.lstm = nn.LSTMCell(config.hidden, config.hidden) if ppo.recurrent else None
        self.policy = DuelingBranches(config.hidden, config.hidden, config.branches, 1,
                                      dueling=False, noisy=False, sigma0=0.0)
        with torch.no_grad():
            for p in self.policy.advantage.parameters():
                p.mul_(0.01)
        self.value = nn.Sequential(nn.Linear(config.hidden, config.hidden), nn.ReLU(),
                                   nn.Linear(config.hidden, 1))
        self._acting: dict[int, State] = {}  # greedy acting's carried state per batch size

    def initial_state(self, batch: int, device: torch.device | None = None) -> State:
        zeros = torch.zeros(batch, self.config.hidden, device=device)
        return zeros, zeros.clone()

    def _heads(self, x: Tensor) -> tuple[Tensor, Tensor]:
        _, logits = self.policy.logits(x)
        return logits.squeeze(-1), self.value(x).squeeze(-1)

    def step(self, obs: Tensor, state: State | None = None,
             start: Tensor | None = None) -> tuple[Tensor, Tensor, State | None]:
        """One decision: (logits, value, the next state). `state` is zeroed first where `start`
        [B] (bool) says the observation begins an episode; an MLP ignores both."""
        x = self.trunk(obs)
        if self.lstm is None:
            return *self._heads(x), None
        h, c = state if state is not None else self.initial_state(len(obs), obs.device)
        if start is not None:
            keep = (~start).to(h.dtype).unsqueeze(-1)
            h, c = h * keep, c * keep
        h, c = self.lstm(x, (h, c))
        return *self._heads(h), (h, c)

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Stateless pass (the MLP policy; a recurrent one from a zero state)."""
        logits, value, _ = self.step(obs)
        return logits, value

    def sequence(self, obs: Tensor, starts: Tensor, state: State | None) -> tuple[Tensor, Tensor]:
        """A rollout's steps again, [T, B, obs_dim] with `starts` [T, B] from its first state:
        (logits [T, B, Br, A], values [T, B]). The MLP does it in one pass."""
        if self.lstm is None:
            logits, value = self(obs.flatten(0, 1))
            return logits.unflatten(0, obs.shape[:2]), value.unflatten(0, obs.shape[:2])
        x = self.trunk(obs)
        h, c = state if state is not None else self.initial_state(obs.shape[1], obs.device)
        hs = []
        for t in range(obs.shape[0]):
            keep = (~starts[t]).to(h.dtype).unsqueeze(-1)
            h, c = self.lstm(x[t], (h * keep, c * keep))
            hs.append(h)
        logits, value = self._heads(torch.stack(hs))
        return logits, value

    @torch.no_grad()
    def act(self, obs: Tensor) -> Tensor:
        """The mode of the policy per branch [B, Br] (long); ties go to the lowest, safe-default
        index. A recurrent policy carries its state between calls of the same batch size (in
        place, so a CUDA graph of the step replays it) until the next `reset_state()`."""
        if self.lstm is None:
            return self(obs)[0].argmax(dim=-1)
        carried = self._acting.get(len(obs))
        if carried is None or carried[0].device != obs.device:
            with torch.inference_mode(False):  # a normal tensor: resettable outside paper's mode
                carried = self._acting[len(obs)] = self.initial_state(len(obs), obs.device)
        logits, _, (h, c) = self.step(obs, carried)
        carried[0].copy_(h)
        carried[1].copy_(c)
        return logits.argmax(dim=-1)

    def reset_state(self) -> None:
        """Greedy acting starts again from a zero state (in place)."""
        for h, c in self._acting.values():
            h.zero_()
            c.zero_()

    def train(self, mode: bool = True) -> ActorCritic:
        self.reset_state()
        return super().train(mode)

    def layout_info(self) -> dict[str, object]:
        """What besides parameter shapes a checkpoint must match (`layout_fingerprint`)."""
        info: dict[str, object] = {"kind": "ppo"}
        info.update({f: getattr(self.config, f) for f in LAYOUT_FIELDS})
        info.update(recurrent=self.recurrent, obs_dim=self.obs_dim, window=self.window,
                    pos_dim=self.pos_dim)
        return info
