"""Thousands of trading episodes stepped in lock-step as tensor ops (the rules they follow:
docs/domain.md#fills-and-costs, #rewards and #episodes).

State lives in preallocated device tensors, one element per env. `step` and `reset` use fixed
shapes and `torch.where` only (no `.item()`, no boolean-mask indexing, no Python branch on a
tensor value), so the env loop can be captured in a CUDA graph. To capture `step` with a
custom `generator`, register it with the graph; with `generator=None` the device's default
generator draws the auto-reset starts.

Money is float64 and in dollars; an episode starts flat with equity 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from foxhunt.env import fills
from foxhunt.env.actions import ActionTable
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import Book, CostModel
from foxhunt.env.market import MarketTensors
from foxhunt.env.observation import POS_STATE, ObservationSpec
from foxhunt.errors import ConfigError, DataError

__all__ = ["POS_STATE", "REWARD_COMPONENTS", "StepResult", "TradingVecEnv", "replay_generator"]

REWARD_COMPONENTS = ("pnl", "cost", "stop", "drawdown_penalty", "hold_cost", "close_bonus")


@dataclass
class StepResult:
    """What one lock-step step produced; every tensor is [N] unless noted.

    All fields describe the step just taken (before auto-reset) except `obs`, which is the
    observation for the next decision: of the new episode where the old one ended.
    Quantities are signed contracts (+ buy, - sell); prices are meaningless where qty is 0.
    """

    reward: Tensor  # float32: (pnl - cost - drawdown_penalty - hold_cost + close_bonus) / scale
    components: dict[str, Tensor]  # REWARD_COMPONENTS -> float64 dollars, unscaled
    terminated: Tensor  # bool: ruin_loss reached; do not bootstrap
    truncated: Tensor  # bool: episode_len or the end of start_range reached; bootstrap
    next_bar: Tensor  # long: the bar after this step, before auto-reset
    next_pos_state: Tensor  # [N, P] float32, before auto-reset
    obs: Tensor  # [N, obs_dim] float32
    order_qty: Tensor  # float64: the market order filled at the open
    order_price: Tensor
    stop_qty: Tensor  # float64: the trailing stop's exit inside the bar
    stop_price: Tensor
    flatten_qty: Tensor  # float64: the market-on-close at the session's last bar
    flatten_price: Tensor
    trades_closed: Tensor  # long: fills that took a position to flat or through zero (0..2)
    position: Tensor  # float64 contracts after the step
    equity: Tensor  # float64 dollars after the step, marked at the close


def replay_generator(device: torch.device) -> torch.Generator | None:
    """The generator for an env whose starts the caller sets (backtests, evaluation rollouts):
    its auto-reset draws are discarded, so on the CPU they come from a private generator and
    move no shared state (torch's global one seeds learners built in other threads); on CUDA the
    default generator, as graph capture requires."""
    return torch.Generator(device=device).manual_seed(0) if device.type == "cpu" else None


class TradingVecEnv:
    """`n_envs` episodes on one market. The agent decides at the close of bar `t`.

    A step, decided at the close of bar t:
    1. the market order (target - position) fills at open[t+1], slippage against the trader;
    2. the trailing stop is armed at decision time from close[t] and ATR[t] when the direction
       or stop mode changes, else it keeps its trailed level;
    3. the stop may trigger inside bar t+1 on its low (long) / high (short);
    4. with `flatten_at_session_end`, a position left at the close of a session's last bar is
       closed there: a market-on-close at close[t+1], slippage against the trader;
    5. the account is marked at close[t+1]; the stop trails the close; t <- t+1.
    Choosing the current target again places no order; after a stop-out the position is flat,
    so choosing the old target again re-enters.
    """

    def __init__(
        self,
        market: MarketTensors,
        config: EnvConfig,
        cost: CostModel | None = None,
        n_envs: int = 1,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
        start_range: tuple[int, int] | None = None,
        trade_clock: int | None = None,
    ):
        self.device = torch.device(device) if device is not None else market.device
        # The bars the time-in-trade feature counts up to 1 over: the episode length the agent
        # trained with. An evaluation or backtest runs one long episode; its observations say
        # what training's did (capped at 1, the most training ever showed).
        self.trade_clock = float(trade_clock or config.episode_len)
        self.market = market if market.device == self.device else market.to(self.device)
        self.config = config
        self.cost = cost or CostModel.from_instrument(market.instrument, config.slippage_ticks)
        self.n_envs = n_envs
        self.generator = generator
        if n_envs < 1:
            raise ConfigError(f"n_envs must be >= 1, got {n_envs}")
        inst = market.instrument
        if (self.cost.tick_size, self.cost.point_value) != (inst.tick_size, inst.point_value):
            raise ConfigError(
                f"cost model (tick {self.cost.tick_size}, point value {self.cost.point_value}) "
                f"does not match {inst.symbol} (tick {inst.tick_size}, point value "
                f"{inst.point_value}); "
                "build it with CostModel.from_instrument"
            )
        self.observation = ObservationSpec(config.window, self.market.n_features)
        self.first_start, self.last_start, self.end = self._check_start_range(start_range)
        self._check_finite(self.observation.reads_from(self.first_start), self.end)

        self.actions = ActionTable(config, self.device)
        self._windows = self.observation.market_rows(self.market.features)
        zeros = {"device": self.device}
        n = n_envs
        self._t = torch.zeros(n, dtype=torch.long, **zeros)
        self._steps = torch.zeros(n, dtype=torch.long, **zeros)
        self._time_in_trade = torch.zeros(n, dtype=torch.long, **zeros)
        self._stop_mode = torch.zeros(n, dtype=torch.long, **zeros)
        self._pos = torch.zeros(n, dtype=torch.float64, **zeros)
        self._avg = torch.zeros(n, dtype=torch.float64, **zeros)
        self._cash = torch.zeros(n, dtype=torch.float64, **zeros)
        self._peak = torch.zeros(n, dtype=torch.float64, **zeros)
        self._stop_level = torch.zeros(n, dtype=torch.float64, **zeros)
        self._pos_state = torch.zeros(n, self.pos_dim, dtype=torch.float32, **zeros)
        self._episode_state = (
            self._steps, self._time_in_trade, self._stop_mode,
            self._pos, self._avg, self._cash, self._peak, self._stop_level,
        )  # fmt: skip
        self._fresh_starts = torch.zeros(n, dtype=torch.long, **zeros)
        self.reset()

    @property
    def pos_dim(self) -> int:
        return self.observation.pos_dim

    @property
    def obs_dim(self) -> int:
        return self.observation.size

    def observe(self, bar: Tensor, pos_state: Tensor) -> Tensor:
        """[B, obs_dim] float32 (`ObservationSpec.observe`). Pure: the replay buffer calls it at
        sample time with stored (bar, pos_state)."""
        return self.observation.observe(self._windows, bar.long(), pos_state)

    def state(self) -> tuple[Tensor, Tensor]:
        """(bar [N] long, pos_state [N, P] float32) of the pending decision; copies."""
        return self._t.clone(), self._pos_state.clone()

    def reset(self, starts: Tensor | None = None) -> Tensor:
        """Start every env flat at a random bar (or at `starts`); returns obs [N, obs_dim]."""
        if starts is None:
            self._draw_starts()
            self._t.copy_(self._fresh_starts)
        else:
            self._t.copy_(self._check_starts(starts))
        for buf in (*self._episode_state, self._pos_state):
            buf.zero_()
        return self.observe(self._t, self._pos_state)

    def step(self, action: Tensor) -> StepResult:
        """Advance every env one bar on `action` [N, 3] (branch choices); auto-reset the done."""
        if tuple(action.shape) != (self.n_envs, 3):
            raise ConfigError(
                f"action must have shape ({self.n_envs}, 3), got {tuple(action.shape)}"
            )
        m, cost, cfg = self.market, self.cost, self.config
        pv = cost.point_value
        t = self._t
        nxt = t + 1
        prev_close, scale, atr = m.close[t], m.reward_scale[t], m.atr[t]
        open_, high, low, close = m.open[nxt], m.high[nxt], m.low[nxt], m.close[nxt]
        pos0 = self._pos
        equity0 = self._cash + pos0 * prev_close * pv
        target, mode = self.actions.decode(action.to(self.device))
        multiple = self.actions.stop_multiple[mode]

        order = fills.execute(Book(pos0, self._avg, self._cash), target - pos0, open_, cost)
        pos1 = order.book.position
        side = torch.sign(pos1)

        level, armed = fills.arm_stop(side, pos0, mode, self._stop_mode, self._stop_level,
                                      prev_close, multiple, atr, cost)
        hit, stop_ref = fills.stop_trigger(side, level, open_, high, low, cost)
        hit = hit & armed
        stop = fills.execute(order.book, torch.where(hit, -pos1, 0.0), stop_ref, cost)
        pos2 = stop.book.position

        at_session_end = m.session_end[nxt] & cfg.flatten_at_session_end
        flatten = fills.execute(stop.book, torch.where(at_session_end, -pos2, 0.0), close, cost)
        pos3, avg3, cash3 = flatten.book

        exit_ref = torch.where(hit, stop_ref, open_)
        pnl = pv * (
            pos0 * (open_ - prev_close) + pos1 * (exit_ref - open_) + pos2 * (close - exit_ref)
        )
        costs = order.cost + stop.cost + flatten.cost
        equity = cash3 + pos3 * close * pv
        peak = torch.maximum(self._peak, equity)
        drawdown_growth = ((peak - equity) - (self._peak - equity0)).clamp_min(0.0)
        realised = order.realised + stop.realised + flatten.realised
        components = {
            "pnl": pnl,
            "cost": costs,
            "stop": stop.realised,
            "drawdown_penalty": cfg.drawdown_penalty * drawdown_growth,
            "hold_cost": cfg.hold_cost * scale * (pos1 == 0),
            "close_bonus": cfg.trade_close_bonus * realised,
        }
        money = pnl - costs - components["drawdown_penalty"] - components["hold_cost"]
        reward = ((money + components["close_bonus"]) / scale).to(torch.float32)

        bars_held, stop_mode, stop_level = fills.after_bar(
            armed, level, side, mode, pos0, pos3, self._time_in_trade, close, multiple,
            m.atr[nxt], cost)
        self._t.copy_(nxt)
        self._steps.add_(1)
        self._time_in_trade.copy_(bars_held)
        self._stop_mode.copy_(stop_mode)
        self._stop_level.copy_(stop_level)
        self._pos.copy_(pos3)
        self._avg.copy_(avg3)
        self._cash.copy_(cash3)
        self._peak.copy_(peak)
        next_bar = nxt.clone()
        next_pos_state = self._compute_pos_state(nxt)

        terminated = equity <= -cfg.ruin_loss
        truncated = ((self._steps >= cfg.episode_len) | (nxt + 1 >= self.end)) & ~terminated
        done = terminated | truncated
        self._draw_starts()
        self._t.copy_(torch.where(done, self._fresh_starts, nxt))
        for buf in self._episode_state:
            buf.masked_fill_(done, 0)
        self._pos_state.copy_(next_pos_state.masked_fill(done.unsqueeze(1), 0.0))

        return StepResult(
            reward=reward,
            components=components,
            terminated=terminated,
            truncated=truncated,
            next_bar=next_bar,
            next_pos_state=next_pos_state,
            obs=self.observe(self._t, self._pos_state),
            order_qty=order.qty,
            order_price=order.price,
            stop_qty=stop.qty,
            stop_price=stop.price,
            flatten_qty=flatten.qty,
            flatten_price=flatten.price,
            trades_closed=(
                order.closed_trade.long() + stop.closed_trade.long() + flatten.closed_trade.long()
            ),
            position=pos3,
            equity=equity,
        )

    def _compute_pos_state(self, bar: Tensor) -> Tensor:
        m, cfg = self.market, self.config
        return torch.stack(fills.position_state(
            Book(self._pos, self._avg, self._cash), self._peak,
            torch.clamp(self._time_in_trade / self.trade_clock, max=1.0), self._stop_mode,
            self._stop_level,
            m.close[bar], m.atr[bar], m.reward_scale[bar] * cfg.max_contracts, self.cost,
            cfg.max_contracts), dim=1).to(torch.float32)

    def _draw_starts(self) -> None:
        torch.randint(
            self.first_start,
            self.last_start + 1,
            (self.n_envs,),
            generator=self.generator,
            device=self.device,
            out=self._fresh_starts,
        )

    def _check_starts(self, starts: Tensor) -> Tensor:
        starts = starts.to(device=self.device, dtype=torch.long)
        if tuple(starts.shape) != (self.n_envs,):
            raise ConfigError(f"starts must have shape ({self.n_envs},), got {tuple(starts.shape)}")
        ok = ((starts >= self.first_start) & (starts <= self.end - 2)).all()
        msg = (
            f"starts must lie in [{self.first_start}, {self.end - 2}] (window and one step of data)"
        )
        if self.device.type == "cpu":
            if not ok:
                raise ConfigError(msg)
        else:
            torch._assert_async(ok, msg)
        return starts

    def _check_start_range(self, start_range: tuple[int, int] | None) -> tuple[int, int, int]:
        cfg, n = self.config, len(self.market)
        lo, hi = start_range if start_range is not None else (0, n)
        if not 0 <= lo < hi <= n:
            raise ConfigError(f"start_range ({lo}, {hi}) must satisfy 0 <= lo < hi <= {n} bars")
        first, last = self.observation.first_decision(lo), hi - cfg.episode_len - 1
        if last < first:
            raise ConfigError(
                f"start_range ({lo}, {hi}) leaves no episode start: {cfg.episode_len} steps from "
                f"bar {first} (the first with a {cfg.window}-bar window) need bars up to "
                f"{first + cfg.episode_len}, the range ends at {hi - 1}; widen the range or "
                "shorten env.episode_len"
            )
        return first, last, hi

    def _check_finite(self, lo: int, hi: int) -> None:
        m = self.market
        bad = ~torch.isfinite(m.features[lo:hi]).all(dim=1)
        for name in ("open", "high", "low", "close"):
            bad |= ~torch.isfinite(getattr(m, name)[lo:hi])
        if bool(bad.any()):
            row = lo + int(bad.nonzero()[0, 0])
            raise DataError(
                f"bar {row} has a non-finite feature or price inside the env's range [{lo}, {hi}); "
                "start the range after the features' warm-up"
            )
