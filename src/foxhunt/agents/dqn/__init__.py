"""Rainbow-style branching DQN: networks, C51/IQN losses, target updates, layout fingerprints."""

from foxhunt.agents.dqn.config import LAYOUT_FIELDS, AgentConfig
from foxhunt.agents.dqn.losses import LossOutput, direction_loss, quantile_huber
from foxhunt.agents.dqn.network import (
    BranchingQNetwork,
    DuelingBranches,
    QOutput,
    VariableSelection,
)
from foxhunt.agents.dqn.noisy import NoisyLinear
from foxhunt.agents.dqn.projection import project_distribution
from foxhunt.agents.dqn.target import PolyakUpdate, polyak_update
from foxhunt.agents.dqn.update import UpdateBatch, UpdateResult, reference_update

__all__ = [
    "LAYOUT_FIELDS",
    "AgentConfig",
    "BranchingQNetwork",
    "DuelingBranches",
    "LossOutput",
    "NoisyLinear",
    "PolyakUpdate",
    "QOutput",
    "UpdateBatch",
    "UpdateResult",
    "VariableSelection",
    "direction_loss",
    "polyak_update",
    "project_distribution",
    "quantile_huber",
    "reference_update",
]
