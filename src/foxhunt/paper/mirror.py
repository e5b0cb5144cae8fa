"""The env's view of the paper account, for the agent's position features and its stop levels.

A trained agent reads six position features (`env.vector_env.POS_STATE`) computed by the env in
float64 from its own book: average-cost price, cash from 0 at the episode start, equity peak,
bars in the trade, and the trailing stop's mode and level. The exact account (FIFO lots,
Decimal money) holds the same money but not these floats, so the paper loop keeps this
mirror: it is updated from the paper account's actual fills (market at the open, stop inside
the bar, at-the-close flatten, in the env's step order) with the env's formulas, operation for
operation, so the agent sees what the env would have shown it after the same fills, and the
stop levels the agent chooses are the env's to the bit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from foxhunt.env.actions import contracts_for
from foxhunt.env.config import EnvConfig

MARKET, STOP, CLOSE = "market", "stop", "close"
"""Fill kinds, in the order the env applies them within a bar."""


def _sign(x: float) -> float:
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


def round_to_tick(price: float, tick: float) -> float:
    """`env.fills.round_to_tick` for one value (torch.round rounds half to even, as round())."""
    return round(price / tick) * tick


class Decision(NamedTuple):
    """An action decoded as the env decodes it, with the stop it arms (a tuple: one is built
    every bar)."""

    action: tuple[int, int, int]
    target: float  # signed contracts
    mode: int  # stop mode, 0 when flat or stop off
    multiple: float
    side: float  # sign of the position the order leads to
    level: float  # the stop level (env float), meaningful when armed
    armed: bool


class EnvMirror:
    def __init__(self, env: EnvConfig, tick_size: float, point_value: float, commission: float,
                 slippage_ticks: float, episode_len: int):
        self.env = env
        self.tick, self.pv, self.commission = tick_size, point_value, commission
        self.slip = math.ceil(slippage_ticks - 1e-9) * tick_size
        self.episode_len = episode_len
        self.contracts = [float(c) for c in contracts_for(env)]
        self.multiples = (0.0, *env.stop_atr_multiples)
        self.pos = self.avg = self.cash = self.peak = self.level = 0.0
        self.time_in_trade = self.mode = 0
        self.pending: Decision | None = None
        self.pos0 = 0.0

    def decode(self, action: tuple[int, int, int], close: float, atr: float) -> Decision:
        """The env's `ActionTable.decode` and stop arming at the close of the decision bar."""
        d, s, st = action
        direction = (0.0, 1.0, -1.0)[d]
        target = direction * self.contracts[s]
        multiple = self.multiples[st]
        mode = st if (direction != 0 and multiple > 0) else 0
        multiple = self.multiples[mode]
        side = _sign(target)
        rearm = side != _sign(self.pos) or mode != self.mode
        level = (round_to_tick(close - side * multiple * atr, self.tick) if rearm else self.level)
        return Decision(action, target, mode, multiple, side, level, side != 0 and multiple > 0)

    def decide(self, decision: Decision) -> None:
        self.pending = decision
        self.pos0 = self.pos

    def fill(self, kind: str, qty: float, open_: float, close: float) -> None:
        """One fill of the paper account, priced as the env prices it (`fills.execute`)."""
        if kind == MARKET:
            ref = open_
        elif kind == CLOSE:
            ref = close
        else:
            dec = self.pending
            level = dec.level if dec is not None else 0.0
            ref = min(open_, level) if _sign(self.pos) > 0 else max(open_, level)
        price = ref + _sign(qty) * self.slip
        pos, avg = self.pos, self.avg
        new = pos + qty
        adding = pos * qty > 0
        blended = (avg * abs(pos) + price * abs(qty)) / max(abs(new), 1.0)
        new_side = _sign(new) != _sign(pos)
        new_avg = blended if adding else (price if new_side else avg)
        self.avg = 0.0 if new == 0 else new_avg
        self.cash = self.cash - qty * price * self.pv - abs(qty) * self.commission
        self.pos = new

    def close_bar(self, close: float, atr: float) -> None:
        """The end of the env's step: equity peak, bars in the trade, the stop trailed."""
        equity = self.cash + self.pos * close * self.pv
        self.peak = max(self.peak, equity)
        dec = self.pending
        if dec is None:
            return
        pos3, pos0 = self.pos, self.pos0
        still = dec.armed and pos3 != 0
        candidate = round_to_tick(close - dec.side * dec.multiple * atr, self.tick)
        trailed = max(dec.level, candidate) if dec.side > 0 else min(dec.level, candidate)
        same_side = _sign(pos3) == _sign(pos0) and pos3 != 0
        self.time_in_trade = self.time_in_trade + 1 if same_side else int(pos3 != 0)
        self.mode = dec.mode if still else 0
        self.level = trailed if still else 0.0
        self.pending = None

    def pos_state(self, close: float, reward_scale: float, atr: float) -> list[float]:
        """The env's `_compute_pos_state` with episode_len = the backtest's steps: six floats
        whose float32 roundings are the env's float32 values (the caller writes them into its
        float32 observation; no numpy array is built for them)."""
        m = self.env.max_contracts
        pos = self.pos
        per_position = reward_scale * m
        equity = self.cash + pos * close * self.pv
        unrealised = pos * (close - self.avg) * self.pv
        stop_distance = _sign(pos) * (close - self.level) / atr
        tit = np.float32(self.time_in_trade) / np.float32(self.episode_len)
        return [pos / m, unrealised / per_position, float(tit),
                (self.peak - equity) / per_position, self.mode / 2.0,
                stop_distance if self.mode > 0 else 0.0]
