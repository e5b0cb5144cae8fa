"""Device-resident prioritised replay with n-step returns built at sample time."""

from foxhunt.replay.config import ReplayConfig
from foxhunt.replay.prioritized import PrioritizedReplay, ReplayBatch

__all__ = ["PrioritizedReplay", "ReplayBatch", "ReplayConfig"]
