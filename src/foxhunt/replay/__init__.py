"""Device-resident prioritised replay with n-step returns built at sample time."""

from foxhunt.replay.config import ReplayConfig
from foxhunt.replay.prioritized import PrioritizedReplay

__all__ = ["PrioritizedReplay", "ReplayConfig"]
