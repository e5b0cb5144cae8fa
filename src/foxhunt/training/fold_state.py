"""What happens to every piece of learning state at a walk-forward fold boundary.

This registry is the one place that says it; `WalkForwardTrainer.start_fold` applies it by
building a fresh learner (`learners.start_learner`: the DQN's `Learner`, PQN's `PQNLearner` or
PPO's `PPOLearner`) from the fold's training window and the fold's seed, and the tests check
that every stateful attribute of each is declared here and that fold k+1 starts exactly as if
fold k had never run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Boundary(Enum):
    REFIT = "re-estimated on the new fold's training window only"
    REINIT = "re-initialised from the new fold's seed"
    RESET = "emptied"


@dataclass(frozen=True)
class Rule:
    boundary: Boundary
    why: str


FOLD_BOUNDARY: dict[str, Rule] = {
    "normaliser": Rule(Boundary.REFIT, "feature statistics may only come from the training window"),
    "market": Rule(Boundary.REFIT, "device tensors end at the window being judged; ATR and reward "
                   "scale are causal running statistics recomputed from the fold's bars"),
    "env": Rule(Boundary.RESET, "episodes start inside the new training window"),
    "replay": Rule(Boundary.RESET, "transitions from fold k were collected on fold k's bars"),
    "rollout": Rule(Boundary.RESET, "PQN's rollout buffer: fold k's steps, trained on once"),
    "epsilon": Rule(Boundary.REINIT, "PQN's exploration restarts at eps_start and decays over "
                    "the new fold's own rollouts"),
    "recurrent_state": Rule(Boundary.RESET, "PPO's LSTM state: the memory of fold k's episodes"),
    "first_state": Rule(Boundary.RESET, "PPO's LSTM state at fold k's last rollout's start"),
    "episode_start": Rule(Boundary.RESET, "every env begins a fresh episode in the new window"),
    "batch": Rule(Boundary.RESET, "the staged next batch is drawn afresh at the start of every run "
                  "of updates, from the new fold's replay"),
    "online": Rule(Boundary.REINIT, "weights fitted on fold k have seen bars fold k+1 validates on"),
    "target": Rule(Boundary.REINIT, "a copy of the re-initialised online network"),
    "averaged": Rule(Boundary.REINIT, "the weight average restarts from the re-initialised "
                     "online network"),
    "optimizer": Rule(Boundary.RESET, "Adam moments carry fold k's gradients"),
    "generator": Rule(Boundary.REINIT, "noise, episode starts and replay draws reseeded per fold"),
    "support": Rule(Boundary.REINIT, "the C51 support (online and target share it) restarts at "
                    "the configured [v_min, v_max]: an adaptive one widened on fold k's targets"),
    "support_seen": Rule(Boundary.RESET, "the adaptive support's view of the targets' "
                         "percentiles restarts at [v_min, v_max]"),
    "clip_bound": Rule(Boundary.RESET, "the self-tuning gradient clip learns the new fold's "
                       "gradient norms from its first update"),
    "collect_acc": Rule(Boundary.RESET, "running metrics restart per fold"),
    "update_acc": Rule(Boundary.RESET, "running metrics restart per fold"),
    "best_state": Rule(Boundary.RESET, "model selection happens per fold, on its validation window"),
}
