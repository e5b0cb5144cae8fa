"""PPO: an on-policy actor-critic over the vectorised env, GAE(lambda)
advantages, the clipped surrogate with value clipping and an entropy bonus, an MLP or LSTM
policy with the DQN's factored action heads."""

from foxhunt.agents.ppo.config import PPOConfig
from foxhunt.agents.ppo.network import ActorCritic
from foxhunt.agents.ppo.update import (
    Loss,
    Rollout,
    UpdateResult,
    gae,
    log_prob_entropy,
    ppo_loss,
    ppo_update,
    truncation_bootstrap,
)

__all__ = ["ActorCritic", "Loss", "PPOConfig", "Rollout", "UpdateResult", "gae",
           "log_prob_entropy", "ppo_loss", "ppo_update", "truncation_bootstrap"]
