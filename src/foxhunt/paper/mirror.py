"""The env's view of the paper account, for the agent's position features and its stop levels.

A trained agent reads six position features (`env.vector_env.POS_STATE`) computed by the env in
float64 from its own book: average-cost price, cash from 0 at the episode start, equity peak,
bars in the trade, and the trailing stop's mode and level. The exact account (FIFO lots,
Decimal money) holds the same money but not these floats, so the paper loop keeps this
mirror: it is updated from the paper account's actual fills (market at the open, stop inside
the bar, at-the-close flatten, in the env's step order) through the env's own functions
(`env.fills` with `xp=SCALAR`), so the agent sees what the env would have shown it after the
same fills, and the stop levels the agent chooses are the env's to the bit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from foxhunt.env import fills
from foxhunt.env.actions import contracts_for
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import SCALAR, Book, CostModel

MARKET, STOP, CLOSE = "market", "stop", "close"
"""Fill kinds, in the order the env applies them within a bar."""


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
    def __init__(self, env: EnvConfig, cost: CostModel, episode_len: int):
        self.env, self.cost, self.episode_len = env, cost, episode_len
        self.contracts = [float(c) for c in contracts_for(env)]
        self.multiples = (0.0, *env.stop_atr_multiples)
        self.book = Book(0.0, 0.0, 0.0)
        self.peak = self.level = 0.0
        self.time_in_trade = self.mode = 0
        self.pending: Decision | None = None
        self.pos0 = 0.0

    @property
    def pos(self) -> float:
        return self.book.position

    def decode(self, action: tuple[int, int, int], close: float, atr: float) -> Decision:
        """The env's `ActionTable.decode` and stop arming at the close of the decision bar."""
        d, s, st = action
        direction = (0.0, 1.0, -1.0)[d]
        target = direction * self.contracts[s]
        mode = st if (direction != 0 and self.multiples[st] > 0) else 0
        multiple = self.multiples[mode]
        side = SCALAR.sign(target)
        level, armed = fills.arm_stop(side, self.pos, mode, self.mode, self.level, close,
                                      multiple, atr, self.cost, SCALAR)
        return Decision(action, target, mode, multiple, side, level, armed)

    def decide(self, decision: Decision) -> None:
        self.pending = decision
        self.pos0 = self.pos

    def fill(self, kind: str, qty: float, open_: float, high: float, low: float,
             close: float) -> None:
        """One fill of the paper account at bar (open_, high, low, close), as the env fills it."""
        if kind == STOP:
            level = self.level if self.pending is None else self.pending.level
            ref = fills.stop_trigger(SCALAR.sign(self.pos), level, open_, high, low, self.cost,
                                     SCALAR)[1]
        else:
            ref = open_ if kind == MARKET else close
        self.book = fills.execute(self.book, qty, ref, self.cost, SCALAR).book

    def close_bar(self, close: float, atr: float) -> None:
        """The end of the env's step: equity peak, bars in the trade, the stop trailed."""
        book = self.book
        self.peak = max(self.peak, book.cash + book.position * close * self.cost.point_value)
        dec = self.pending
        if dec is None:
            return
        self.time_in_trade, self.mode, self.level = fills.after_bar(
            dec.armed, dec.level, dec.side, dec.mode, self.pos0, book.position,
            self.time_in_trade, close, dec.multiple, atr, self.cost, SCALAR)
        self.pending = None

    def pos_state(self, close: float, reward_scale: float, atr: float) -> tuple[float, ...]:
        """The env's position features with episode_len = the backtest's steps: six floats
        whose float32 roundings are the env's float32 values (the caller writes them into its
        float32 observation; no numpy array is built for them). The env divides the long bars
        in the trade by episode_len in float32."""
        m = self.env.max_contracts
        tit = float(np.float32(self.time_in_trade) / np.float32(self.episode_len))
        return fills.position_state(self.book, self.peak, tit, self.mode, self.level, close,
                                    atr, reward_scale * m, self.cost, m, SCALAR)
