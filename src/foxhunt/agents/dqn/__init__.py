"""Rainbow-style branching DQN: the network, the reference update, the update's pieces and the
target network's Polyak step."""

from foxhunt.agents.dqn.config import LAYOUT_FIELDS, AgentConfig
from foxhunt.agents.dqn.losses import LossOutput
from foxhunt.agents.dqn.network import BranchingQNetwork, QOutput
from foxhunt.agents.dqn.target import PolyakUpdate
from foxhunt.agents.dqn.update import UpdateBatch, UpdateResult, reference_update

__all__ = [
    "LAYOUT_FIELDS",
    "AgentConfig",
    "BranchingQNetwork",
    "LossOutput",
    "PolyakUpdate",
    "QOutput",
    "UpdateBatch",
    "UpdateResult",
    "reference_update",
]
