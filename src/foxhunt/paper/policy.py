"""What decides at each bar's close in paper trading: a rule strategy or a trained agent.

Both answer `act(t, pos_state) -> (direction, size, stop)` for the decision at the close of bar
t, after `observe(t)` has been called for every bar up to t. A rule strategy (a `TablePolicy`:
its action at t depends on closes <= t only, by contract and by the backtest's tests) is read
from its table over the stored bars. An agent sees what the backtest's `GreedyAgent` shows it:
the features of bars t-W+1..t, here computed bar by bar (`IncrementalFeatures`, bit for bit the
batch pipeline's), and the env's position features, with time-in-trade rescaled as the backtest
rescales it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from foxhunt.backtest.strategies import TIME_IN_TRADE, TablePolicy, parse_strategy
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.env.config import EnvConfig
from foxhunt.features.config import FeatureConfig
from foxhunt.features.incremental import IncrementalFeatures
from foxhunt.paper.forward import GreedyForward
from foxhunt.training.checkpoint import PolicyCheckpoint, load_policy


class RuleDecider:
    """A rule strategy's table over the stored bars (decisions read at each close)."""

    def __init__(self, policy: TablePolicy, bars: Bars):
        self.label = policy.label
        self.first = policy.first_bar()
        self.table = np.asarray(policy.table(bars.close))

    def observe(self, t: int, bars: Bars) -> None:
        pass

    def act(self, t: int, pos_state: np.ndarray) -> tuple[int, int, int]:
        a = self.table[t]
        return int(a[0]), int(a[1]), int(a[2])


def _columns(bars: Bars) -> tuple:
    """ts, open, high, low, close, volume, buy and sell volume (None when absent) as zero-copy
    views read as Python numbers (a memoryview's item costs a third of a numpy scalar's)."""
    def view(col, dtype):
        return None if col is None else memoryview(np.ascontiguousarray(col, dtype=dtype))

    return (view(bars.ts, np.int64),
            *(view(getattr(bars, k), np.float64) for k in ("open", "high", "low", "close",
                                                            "volume", "buy_volume", "sell_volume")))


class AgentDecider:
    """A checkpoint's greedy agent on incremental features."""

    def __init__(self, policy: PolicyCheckpoint, features: IncrementalFeatures, label: str):
        self.path, self.network, self.features = policy.path, policy.network, features
        self.env, self.observation, self.label = policy.spec.env, policy.observation, label
        self.first = self.observation.first_decision()
        self.n_features, self._end = self.observation.n_features, self.observation.market_size
        # the observation, updated in place: the window's rows (oldest first), then the position
        # features; `x` is a [1, obs] tensor over the same memory
        self.obs = np.zeros(self.observation.size, dtype=np.float32)
        self.x = torch.from_numpy(self.obs)[None, :]
        self._newest = self.obs[self._end - self.n_features:self._end]
        self._pos = self.obs[self._end:]
        self._bars: Bars | None = None
        self._columns: tuple = ()
        self.time_scale = np.float32(1.0)
        self._time_scale = 1.0
        # the compiled forward where it applies; torch decides near ties (see paper.forward)
        self.fast = GreedyForward(self.network) if GreedyForward.supports(self.network) else None
        self.torch_calls = 0  # decisions torch made: no fast forward, or a near tie

    def set_steps(self, steps: int) -> None:
        """The backtest runs a window as one episode of `steps` decisions and rescales
        time-in-trade to the training episode length; the same factor here."""
        self.time_scale = np.float32(steps / self.env.episode_len)
        self._time_scale = float(self.time_scale)

    def observe(self, t: int, bars: Bars) -> None:
        if bars is not self._bars:
            self._bars, self._columns = bars, _columns(bars)
        ts, o, h, lo, c, v, buy, sell = self._columns
        self.obs[:self._end - self.n_features] = self.obs[self.n_features:self._end]
        self.features.push(ts[t], o[t], h[t], lo[t], c[t], v[t], None if buy is None else buy[t],
                           None if sell is None else sell[t], out=self._newest)

    def act(self, t: int, pos_state: list[float]) -> tuple[int, int, int]:
        """`pos_state`: the env's six position features (values exact in float32)."""
        state = list(pos_state)
        # float32(tit x scale), capped at 1: both factors are float32 values, so their float64
        # product is exact and the observation's float32 rounds it as float32 would
        state[TIME_IN_TRADE] = min(state[TIME_IN_TRADE] * self._time_scale, 1.0)
        self._pos[:] = state
        a = None if self.fast is None else self.fast.act(self.obs)
        if a is None:
            self.torch_calls += 1
            with torch.inference_mode():
                a = self.network.act(self.x)[0].tolist()
        return a[0], a[1], a[2]


@dataclass(frozen=True)
class LoadedPolicy:
    decider: RuleDecider | AgentDecider
    env: EnvConfig | None  # the checkpoint's env settings; None for a rule strategy
    capital: float | None = None


def load_agent(path: Path, instrument: Instrument, features: FeatureConfig | None = None,
               label: str | None = None) -> LoadedPolicy:
    """A walk-forward checkpoint as the backtest loads it (`checkpoint_policy`), without the
    batch feature matrix: its fitted normaliser drives the incremental features."""
    policy = load_policy(path)
    pipeline, normaliser = policy.features(instrument.session, features)
    inc = IncrementalFeatures(pipeline.config, instrument.session, normaliser)
    return LoadedPolicy(AgentDecider(policy, inc, label or policy.path.stem), policy.spec.env,
                        policy.spec.train.capital)


def load_rule(text: str, bars: Bars) -> LoadedPolicy:
    return LoadedPolicy(RuleDecider(parse_strategy(text), bars), None)
