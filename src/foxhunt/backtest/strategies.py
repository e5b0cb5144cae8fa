"""Policies the backtester runs: baselines, recorded actions, and a checkpoint's greedy agent.

A `PolicySpec` is a recipe; `build` turns it into a device-side callable
`(bar [n] long, pos_state [n, P] float32) -> actions [n, 3] long` for one backtest run, where
`bar` is the decision bar (its close is the latest price the policy may use) and `pos_state`
the env's position features. Actions are the env's factored branches:
direction {0 flat, 1 long, 2 short}, size {0, 1, 2} -> 1/3, 2/3, 3/3 of max contracts,
stop {0 off, 1 tight, 2 wide}.

`TablePolicy` subclasses decide from bars alone, so their whole action sequence is a table
indexed by bar, computed once from closes <= t; without stops the engine computes all their
steps at once (see `foxhunt.backtest.engine`).
"""

from __future__ import annotations

import copy
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from foxhunt.agents.dqn import BranchingQNetwork
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.devices import resolve_device
from foxhunt.env.config import EnvConfig
from foxhunt.env.market import MarketTensors
from foxhunt.env.observation import POS_STATE, ObservationSpec
from foxhunt.errors import ConfigError
from foxhunt.features.config import FeatureConfig
from foxhunt.training.checkpoint import PolicyCheckpoint, load_policy

STRATEGY_FORMS = (
    "flat",
    "buy-and-hold",
    "sma:FAST,SLOW (e.g. sma:10,30; sma:10,30,long-flat never goes short)",
    "zfade:LOOKBACK,ENTRY (e.g. zfade:60,1.5: short above +ENTRY sd, long below -ENTRY)",
    "random:SEED (e.g. random:7)",
)
FULL_SIZE = 2
SMA_TIE_TOLERANCE = 1e-9
"""Two moving averages closer than this times the bar's close count as equal."""
TIME_IN_TRADE = POS_STATE.index("time_in_trade")
POLICY_ENV_FIELDS = (
    "max_contracts", "size_fractions", "stop_atr_multiples", "atr_window", "reward_vol_window",
    "reward_scale_floor_ticks",
)  # fmt: skip
"""Env settings that change what an action means or what the position features say."""


class PolicySpec(ABC):
    """A policy recipe; `label` is its default name in results and on the command line."""

    label: str

    def first_bar(self) -> int:
        """The earliest decision bar the policy can act on (its inputs' warm-up)."""
        return 0

    @abstractmethod
    def build(self, market: MarketTensors, env_config: EnvConfig):
        """A callable (bar, pos_state) -> actions [n, 3] long on `market.device`."""


class TablePolicy(PolicySpec):
    """A policy whose action at bar t depends on bars <= t only, never on the account."""

    @abstractmethod
    def table(self, close: np.ndarray) -> np.ndarray:
        """[T, 3] uint8 actions decided at the close of each bar."""

    def build(self, market: MarketTensors, env_config: EnvConfig):
        table = self.table(market.close.cpu().numpy())
        return TableActions(torch.as_tensor(table, device=market.device))


class TableActions:
    """Looks actions up by decision bar; `table` is [T, 3] or [P, T, 3] with `which` [n]."""

    def __init__(self, table: Tensor, which: Tensor | None = None):
        self.table, self.which = table, which

    def __call__(self, bar: Tensor, pos_state: Tensor) -> Tensor:
        if self.which is None:
            return self.table[bar].long()
        return self.table[self.which, bar].long()


def _constant(n: int, action: tuple[int, int, int]) -> np.ndarray:
    return np.broadcast_to(np.asarray(action, dtype=np.uint8), (n, 3)).copy()


@dataclass(frozen=True)
class Flat(TablePolicy):
    label: str = "flat"

    def table(self, close: np.ndarray) -> np.ndarray:
        return np.zeros((len(close), 3), dtype=np.uint8)


@dataclass(frozen=True)
class BuyAndHold(TablePolicy):
    """Long `size` from the first decision to the end, no stop; re-enters after a session
    flatten."""

    size: int = FULL_SIZE
    label: str = "buy-and-hold"

    def table(self, close: np.ndarray) -> np.ndarray:
        return _constant(len(close), (1, self.size, 0))


@dataclass(frozen=True)
class SmaCross(TablePolicy):
    """Long while SMA(fast) > SMA(slow) of the closes <= t, short while below (flat instead with
    `long_flat`); an exact tie keeps the previous side, so the position changes only on a
    strict cross. No stop. The first decision is at bar `slow`, the first at which both means
    exist for this bar and the previous one (so a cross could be seen; backtesting.py starts its
    strategies there too); before it the policy is flat.

    Means come from float64 prefix sums; differences within `SMA_TIE_TOLERANCE` x the close count
    as ties: far above the sums' rounding, far below the smallest real difference of two means of
    tick-grid prices (a tick / (fast x slow))."""

    fast: int
    slow: int
    long_flat: bool = False
    size: int = FULL_SIZE
    label: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.fast < self.slow:
            raise ConfigError(
                f"sma:{self.fast},{self.slow}: need 1 <= FAST < SLOW (e.g. sma:10,30)"
            )
        if not self.label:
            suffix = ",long-flat" if self.long_flat else ""
            object.__setattr__(self, "label", f"sma:{self.fast},{self.slow}{suffix}")

    def sides(self, close: np.ndarray) -> np.ndarray:
        """+1 long, -1 short, 0 flat per bar (int8)."""
        n, lo = len(close), self.slow
        side = np.zeros(n, dtype=np.int8)
        if n <= lo:
            return side
        c = np.concatenate([[0.0], np.cumsum(close - close[0])])
        # the means at the bars t = slow .. n-1, from the prefix sums c[t + 1] - c[t + 1 - k]
        top = c[lo + 1 :]
        fast = (top - c[lo + 1 - self.fast : n + 1 - self.fast]) / self.fast
        slow = (top - c[1 : n + 1 - lo]) / self.slow
        gap = fast - slow
        tol = SMA_TIE_TOLERANCE * np.maximum(np.abs(close[lo:]), 1.0)
        sides = (gap > tol).view(np.int8) - (gap < -tol).view(np.int8)
        ties = np.flatnonzero(sides == 0)
        decided = np.flatnonzero(sides) if ties.size else ties
        if decided.size:  # a tie keeps the side of the last bar that had one (0 before any)
            last = np.searchsorted(decided, ties) - 1
            sides[ties] = np.where(last >= 0, sides[decided[np.maximum(last, 0)]], 0)
        side[lo:] = np.maximum(sides, 0) if self.long_flat else sides
        return side

    def table(self, close: np.ndarray) -> np.ndarray:
        return sides_table(self.sides(close), self.size)


def _latch(on: np.ndarray, off: np.ndarray) -> np.ndarray:
    """True from each bar where `on` holds until the next bar where `off` holds (`on` wins a
    tie); False before the first `on`."""
    event = np.where(on, 1, np.where(off, 0, -1))
    idx = np.maximum.accumulate(np.where(event >= 0, np.arange(len(event)), -1))
    return np.where(idx >= 0, event[np.maximum(idx, 0)], 0).astype(bool)


def fade_sides(z: np.ndarray, entry: float, exit: float = 0.0) -> np.ndarray:
    """Sides (int8) of a fade of the z-scores `z` (NaN: no reading, the side is kept): short
    from z > entry until z <= exit, long from z < -entry until z >= -exit. Each side is a latch;
    clearing the short at z <= exit comes before any long entry at z < -entry, so at most one
    is set."""
    z = np.asarray(z, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        short = _latch(z > entry, z <= exit)
        long = _latch(z < -entry, z >= -exit)
    return (long.astype(np.int8) - short.astype(np.int8)).astype(np.int8)


def sides_table(side: np.ndarray, size: int = FULL_SIZE) -> np.ndarray:
    """[T, 3] actions holding side +1 long, -1 short, 0 flat at `size`, no stop."""
    s = np.asarray(side)
    if s.dtype.kind in "bf":  # booleans are long/flat; NaN (no side) is flat
        s = np.where(np.isnan(s), 0.0, s) if s.dtype.kind == "f" else s.astype(np.int8)
    s = np.sign(s).astype(np.int8).view(np.uint8)  # 255 short, 0 flat, 1 long
    out = np.zeros((s.size, 3), dtype=np.uint8)
    np.add(s >> 7, s & 1, out=out[:, 0])  # direction: 2 short, 0 flat, 1 long
    np.multiply(s != 0, np.uint8(size), out=out[:, 1])
    return out


@dataclass(frozen=True)
class ZScoreFade(TablePolicy):
    """Fades stretched prices: z_t = (close_t - SMA(lookback)) / SD(lookback) of the closes <= t;
    short once z_t > `entry`, long once z_t < -`entry`, flat again once z crosses `exit`
    towards 0 (0: at the mean). No stop. The first decision is at bar `lookback` - 1, the first
    with a full window; a window with no spread keeps the previous side."""

    lookback: int
    entry: float
    exit: float = 0.0
    size: int = FULL_SIZE
    label: str = ""

    def __post_init__(self) -> None:
        if self.lookback < 2 or not self.entry > self.exit >= 0:
            raise ConfigError(
                f"zfade:{self.lookback},{self.entry}: need LOOKBACK >= 2 and ENTRY > EXIT >= 0 "
                "(e.g. zfade:60,1.5)"
            )
        if not self.label:
            tail = f",{self.exit:g}" if self.exit else ""
            object.__setattr__(self, "label", f"zfade:{self.lookback},{self.entry:g}{tail}")

    def zscores(self, close: np.ndarray) -> np.ndarray:
        """z_t per bar (NaN before the first full window or where the window is constant)."""
        n, k = len(close), self.lookback
        z = np.full(n, np.nan)
        if n < k:
            return z
        x = close - close[0]
        c1 = np.concatenate([[0.0], np.cumsum(x)])
        c2 = np.concatenate([[0.0], np.cumsum(x * x)])
        t = np.arange(k - 1, n)
        mean = (c1[t + 1] - c1[t + 1 - k]) / k
        var = np.maximum((c2[t + 1] - c2[t + 1 - k]) / k - mean * mean, 0.0) * k / (k - 1)
        sd = np.sqrt(var)
        ok = sd > SMA_TIE_TOLERANCE * np.maximum(np.abs(close[t]), 1.0)
        z[t[ok]] = (x[t[ok]] - mean[ok]) / sd[ok]
        return z

    def sides(self, close: np.ndarray) -> np.ndarray:
        """+1 long, -1 short, 0 flat per bar (int8)."""
        return fade_sides(self.zscores(close), self.entry, self.exit)

    def table(self, close: np.ndarray) -> np.ndarray:
        return sides_table(self.sides(close), self.size)


@dataclass(frozen=True, eq=False)
class FixedSides(TablePolicy):
    """Holds a side given per decision bar (+1, -1, 0), e.g. an oracle's, at `size`, no stop."""

    side: np.ndarray = field(repr=False)
    size: int = FULL_SIZE
    label: str = "sides"

    def table(self, close: np.ndarray) -> np.ndarray:
        s = np.asarray(self.side)
        if s.shape != (len(close),):
            raise ConfigError(f"{self.label}: {s.shape[0] if s.ndim else 0} sides given for "
                              f"{len(close)} bars; give one per bar")
        return sides_table(np.sign(s), self.size)


@dataclass(frozen=True)
class RandomActions(TablePolicy):
    """Every branch uniform over its 3 choices at every bar (stops included), from `seed`.

    The table is drawn for the whole series, so a bar gets the same action in every window."""

    seed: int
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", f"random:{self.seed}")

    def table(self, close: np.ndarray) -> np.ndarray:
        g = torch.Generator().manual_seed(self.seed)
        return torch.randint(0, 3, (len(close), 3), generator=g, dtype=torch.uint8).numpy()


@dataclass(frozen=True, eq=False)
class ActionReplay(TablePolicy):
    """A table of decisions, one's own signal or a recorded run: `actions[t]`, (direction,
    size, stop), is what was decided at the close of bar t."""

    actions: np.ndarray = field(repr=False)
    label: str = "replay"

    def table(self, close: np.ndarray) -> np.ndarray:
        a = np.asarray(self.actions)
        if a.shape != (len(close), 3):
            raise ConfigError(
                f"{self.label}: recorded actions have shape {a.shape}, expected ({len(close)}, 3)"
            )
        return a.astype(np.uint8)


_SMA = re.compile(r"^sma:(\d+),(\d+)(,long-flat)?$")
_ZFADE = re.compile(r"^zfade:(\d+),(\d+(?:\.\d+)?)(?:,(\d+(?:\.\d+)?))?$")
_RANDOM = re.compile(r"^random:(\d+)$")


def parse_strategy(text: str) -> TablePolicy:
    """A baseline from its command-line form: flat, buy-and-hold, sma:FAST,SLOW,
    zfade:LOOKBACK,ENTRY[,EXIT], random:SEED."""
    t = text.strip().lower().replace(" ", "")
    if t == "flat":
        return Flat()
    if t in ("buy-and-hold", "buy_and_hold", "buyandhold"):
        return BuyAndHold()
    if m := _SMA.match(t):
        return SmaCross(int(m.group(1)), int(m.group(2)), long_flat=bool(m.group(3)))
    if m := _ZFADE.match(t):
        return ZScoreFade(int(m.group(1)), float(m.group(2)), float(m.group(3) or 0.0))
    if m := _RANDOM.match(t):
        return RandomActions(int(m.group(1)))
    raise ConfigError(f"strategy {text!r} not understood; use one of: {'; '.join(STRATEGY_FORMS)}")


class CheckpointPolicy(PolicySpec):
    """A trained agent acting greedily (noisy layers at their mean weights) on features rebuilt
    with the normaliser stored in its checkpoint. The backtest's env counts time in trade over
    the training episode length (`TradingVecEnv`'s trade clock), as training's evaluation does."""

    def __init__(self, policy: PolicyCheckpoint, features: np.ndarray, label: str):
        self.path, self.network, self.features = policy.path, policy.network, features
        self.observation, self.env_config, self.label = policy.observation, policy.spec.env, label

    def first_bar(self) -> int:
        return self.observation.first_decision()

    def build(self, market: MarketTensors, env_config: EnvConfig):
        if len(market) != len(self.features):
            raise ConfigError(
                f"{self.label}: features were rebuilt for {len(self.features)} bars, the backtest "
                f"runs on {len(market)}; build the checkpoint policy from the same bars"
            )
        for name in POLICY_ENV_FIELDS:
            ours, theirs = getattr(env_config, name), getattr(self.env_config, name)
            if ours != theirs:
                raise ConfigError(
                    f"{self.label}: trained with env.{name} = {theirs}, the backtest uses {ours}; "
                    "run it with the checkpoint's env settings (CheckpointPolicy.env_config)"
                )
        device = market.device
        network = copy.deepcopy(self.network).to(device).eval()
        rows = self.observation.market_rows(torch.as_tensor(self.features, device=device))
        return GreedyAgent(network, self.observation, rows)


class GreedyAgent:
    """The network's greedy actions on the observations training showed it."""

    def __init__(self, network: BranchingQNetwork, observation: ObservationSpec, rows: Tensor):
        self.network, self.observation, self.rows = network, observation, rows

    def __call__(self, bar: Tensor, pos_state: Tensor) -> Tensor:
        return self.network.act(self.observation.observe(self.rows, bar, pos_state))


def checkpoint_policy(
    path: Path | str | PolicyCheckpoint,
    bars: Bars,
    instrument: Instrument,
    device: torch.device | str | None = None,
    *,
    features: FeatureConfig | None = None,
    label: str | None = None,
) -> CheckpointPolicy:
    """Load a walk-forward checkpoint (or take one loaded) and rebuild its exact features for
    `bars`.

    `features` is the feature config the run was trained with (default: the one the checkpoint
    stores); the checkpoint's feature names must match what it builds.
    """
    policy = path if isinstance(path, PolicyCheckpoint) else load_policy(path)
    pipeline, normaliser = policy.features(instrument.session, features)
    matrix = pipeline.transform(bars, normaliser=normaliser)
    if device is not None:
        policy.network.to(resolve_device(device))
    return CheckpointPolicy(policy, matrix.values, label or policy.path.stem)
