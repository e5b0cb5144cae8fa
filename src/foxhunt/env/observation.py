"""What the agent sees at the close of bar t: the feature rows of bars t-W+1..t (oldest first,
row-major), then the position state (`POS_STATE`). The env, the trainer, evaluation, the
backtest and paper trading ask an `ObservationSpec` where a window begins and how long it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from foxhunt.env.config import EnvConfig
    from foxhunt.features.pipeline import FeaturePipeline

POS_STATE = (
    "position",  # signed contracts / max_contracts
    "unrealised",  # open PnL at the close vs average fill price / (reward_scale * max_contracts)
    "time_in_trade",  # bars held in the current direction / episode_len
    "drawdown",  # episode equity peak - equity / (reward_scale * max_contracts)
    "stop_mode",  # 0 off, 0.5 tight, 1 wide
    "stop_distance",  # (close - stop) * side / ATR; 0 without a stop
)


@dataclass(frozen=True)
class ObservationSpec:
    """The observation's layout and warm-up, built once per run from `[env] window` and the
    features and saved in its checkpoints; a dataclass, which compiled env steps trace through."""

    window: int  # bars of feature rows in one observation
    n_features: int  # feature columns per bar
    valid_from: int = 0  # first bar whose feature row is defined: the features' warm-up
    position: tuple[str, ...] = POS_STATE

    @classmethod
    def of(cls, env: EnvConfig, features: FeaturePipeline) -> ObservationSpec:
        """A run's observation: `env`'s window over the fitted features `features` builds."""
        return cls(env.window, features.n_features, features.warmup)

    @property
    def lookback(self) -> int:
        """Bars before the decision bar that its observation reads."""
        return self.window - 1

    @property
    def market_size(self) -> int:
        """Length of the feature part: `window` rows of `n_features`."""
        return self.window * self.n_features

    @property
    def pos_dim(self) -> int:
        return len(self.position)

    @property
    def size(self) -> int:
        """Length of one observation (the network's input)."""
        return self.market_size + self.pos_dim

    def first_decision(self, start: int = 0) -> int:
        """The first bar at or after `start` whose observation holds defined features only."""
        return max(start, self.valid_from + self.lookback)

    def reads_from(self, bar: int) -> int:
        """The first bar the observation at `bar` reads (0 at the series' start)."""
        return max(0, bar - self.lookback)

    def market_rows(self, features: Tensor) -> Tensor:
        """A view of `features` [T, F] whose row i is bars i..i+W-1 flattened: consecutive bars
        are consecutive rows, so an observation's feature part is one contiguous row to copy."""
        return features.contiguous().view(-1).unfold(0, self.market_size, self.n_features)

    def observe(self, rows: Tensor, bar: Tensor, pos_state: Tensor) -> Tensor:
        """[B, size] float32 at decision bars `bar` [B] from `market_rows` and the position
        state [B, pos_dim]."""
        return torch.cat((rows.index_select(0, bar - self.lookback),
                          pos_state.to(torch.float32)), dim=1)
