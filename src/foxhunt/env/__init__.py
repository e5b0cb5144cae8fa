"""The vectorised trading env: market tensors on the device, one fill model, lock-step episodes.

`foxhunt.env.gym_wrapper` (needs gymnasium) adapts it to the Gymnasium API.
"""

from foxhunt.env.actions import ActionTable, flatten_actions, unflatten_actions
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import Book, CostModel, Fill
from foxhunt.env.market import MarketTensors
from foxhunt.env.observation import POS_STATE, ObservationSpec
from foxhunt.env.vector_env import REWARD_COMPONENTS, StepResult, TradingVecEnv

__all__ = [
    "POS_STATE",
    "REWARD_COMPONENTS",
    "ActionTable",
    "Book",
    "CostModel",
    "EnvConfig",
    "Fill",
    "MarketTensors",
    "ObservationSpec",
    "StepResult",
    "TradingVecEnv",
    "flatten_actions",
    "unflatten_actions",
]
