"""Settings of PPO, the on-policy actor-critic (the `[ppo]` section of the config).

The network's width and depth (`hidden`, `trunk_layers`, `branches`) are `[agent]`'s, as for the
DQN and PQN, so that a GPU profile sizes every learner alike; this section holds what only PPO
has. Defaults are CleanRL's Atari PPO settings (clip 0.1, GAE lambda 0.95, 4 epochs x 4
minibatches, value 0.5, grad norm 0.5) but for three that the learning benchmark's `ar` market
asked for (docs/training.md, "PPO"): lr 1e-3 (not 2.5e-4), gamma 0.9 (not 0.99) and entropy
0.03 (not 0.01). At CleanRL's, the uniformly random first policy pays costs on nearly every bar
and collapses to flat before it finds the signal.
"""

from __future__ import annotations

from pydantic import Field

from foxhunt.configbase import StrictConfig


class PPOConfig(StrictConfig):
    rollout_steps: int = Field(
        default=64, ge=1,
        description="lock-step env steps per rollout; every rollout is trained on, then dropped",
    )
    update_epochs: int = Field(default=4, ge=1, description="passes over each rollout")
    minibatches: int = Field(
        default=4, ge=1,
        description="minibatches each pass splits a rollout into (one gradient step each); a "
        "recurrent policy splits its envs (whole sequences), at most n_envs of them",
    )
    gamma: float = Field(default=0.9, gt=0.0, le=1.0, description="discount per bar")
    gae_lambda: float = Field(
        default=0.95, ge=0.0, le=1.0,
        description="GAE(lambda): 0 is the one-step TD error, 1 the Monte Carlo return minus "
        "the value",
    )
    clip_coef: float = Field(default=0.1, gt=0, description="surrogate clip: ratio in 1 +- this")
    clip_vloss: bool = Field(
        default=True, description="clip the value's change to clip_coef around the rollout's"
    )
    ent_coef: float = Field(default=0.03, ge=0, description="entropy bonus (summed over branches)")
    vf_coef: float = Field(default=0.5, ge=0, description="weight of the value loss")
    norm_adv: bool = Field(default=True, description="normalise advantages per minibatch")
    lr: float = Field(default=1e-3, gt=0)
    anneal_lr: bool = Field(
        default=False, description="lr falls linearly to 0 over the fold's rollouts"
    )
    max_grad_norm: float = Field(default=0.5, gt=0, description="gradient clip: total L2 norm")
    recurrent: bool = Field(
        default=False,
        description="an LSTM after the MLP trunk; its state is carried through rollouts and "
        "reset where an episode ends",
    )
