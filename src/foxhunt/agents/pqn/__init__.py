"""PQN (Gallici et al. 2025): parallel Q(lambda) learning over the vectorised env, a LayerNorm
Q-network with the DQN's factored heads, no replay buffer and no target network."""

from foxhunt.agents.pqn.config import PQNConfig
from foxhunt.agents.pqn.network import QNetwork
from foxhunt.agents.pqn.update import Rollout, UpdateResult, lambda_returns, pqn_update

__all__ = ["PQNConfig", "QNetwork", "Rollout", "UpdateResult", "lambda_returns", "pqn_update"]
