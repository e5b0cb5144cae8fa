"""PQN's Q-network: a LayerNorm MLP trunk and the DQN's factored action heads, one value per
action.

LayerNorm after every hidden layer is what lets PQN drop the target network: it keeps the
TD update stable without one (Gallici et al. 2025, section 4). The heads are the DQN's
`DuelingBranches` (one value stream, one advantage stream per branch), with a single output
per action instead of a return distribution, so that a PQN policy acts in the same action
table (`env.actions`) as the DQN's.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.agents.dqn.network import DuelingBranches

LAYOUT_FIELDS = ("hidden", "trunk_layers", "dueling", "branches")
"""The `[agent]` fields that shape the network; a checkpoint must match them."""


def layernorm_trunk(obs_dim: int, config: AgentConfig) -> nn.Sequential:
    """`trunk_layers` x (Linear to `hidden`, LayerNorm, ReLU): obs [B, obs_dim] -> [B, hidden]."""
    layers: list[nn.Module] = []
    width = obs_dim
    for _ in range(config.trunk_layers):
        layers += [nn.Linear(width, config.hidden), nn.LayerNorm(config.hidden), nn.ReLU()]
        width = config.hidden
    return nn.Sequential(*layers)


class QNetwork(nn.Module):
    """obs [B, obs_dim] -> Q [B, branches, actions]."""

    def __init__(self, obs_dim: int, config: AgentConfig, window: int = 1, pos_dim: int = 0):
        super().__init__()
        self.config, self.obs_dim, self.window, self.pos_dim = config, obs_dim, window, pos_dim
        self.trunk = layernorm_trunk(obs_dim, config)
        self.heads = DuelingBranches(config.hidden, config.hidden, config.branches, 1,
                                     config.dueling, noisy=False, sigma0=0.0)

    def forward(self, obs: Tensor) -> Tensor:
        return self.heads(self.trunk(obs)).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: Tensor) -> Tensor:
        """Greedy action per branch [B, Br] (long); ties go to the lowest, safe-default index."""
        return self(obs).argmax(dim=-1)

    def layout_info(self) -> dict[str, object]:
        """What besides parameter shapes a checkpoint must match (`layout_fingerprint`)."""
        info: dict[str, object] = {"kind": "pqn"}
        info.update({f: getattr(self.config, f) for f in LAYOUT_FIELDS})
        info.update(obs_dim=self.obs_dim, window=self.window, pos_dim=self.pos_dim)
        return info
