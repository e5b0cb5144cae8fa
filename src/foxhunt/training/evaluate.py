"""Greedy rollouts over a validation or test window, through the training env's fill model.

A window is cut into `chunks` consecutive pieces stepped in lock-step (one env each, starting
flat); the per-bar money (mark-to-market PnL minus costs) of the pieces, in time order, is the
window's PnL series. Policies see only bars up to the decision bar: the market handed in here
ends at the window's last bar.

Each piece ends flat, as a backtest window does (`foxhunt.backtest`): a position still open at
the close of its last bar is closed there by a market-on-close through the fill model, and that
exit's slippage and commission are charged to the last bar. A one-chunk rollout of a window
therefore reports the money, trades and Sharpe a backtest of the same window reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from foxhunt.env import fills
from foxhunt.env.config import EnvConfig
from foxhunt.env.market import MarketTensors
from foxhunt.env.vector_env import TradingVecEnv
from foxhunt.errors import ConfigError
from foxhunt.metrics import (
    compounded_equity,
    drawdown,
    periods_per_year_from_ts,
    sharpe,
    total_return,
)
from foxhunt.training.walkforward import Window

Policy = Callable[[Tensor, Tensor], Tensor]
"""(obs [N, obs_dim], decision bar [N]) -> actions [N, branches]."""


@dataclass(frozen=True)
class WindowResult:
    pnl: np.ndarray  # dollars per decision, time order
    position: np.ndarray  # contracts held after each decision
    action: np.ndarray  # [steps, branches]
    bar: np.ndarray  # decision bar of each step
    trades: int
    sharpe: float  # annualised, on pnl / capital
    total_pnl: float
    total_return: float
    max_drawdown: float
    flat_fraction: float

    def summary(self) -> dict[str, float | int]:
        return {"sharpe": self.sharpe, "return": self.total_return, "pnl": self.total_pnl,
                "max_drawdown": self.max_drawdown, "trades": self.trades,
                "flat": self.flat_fraction, "bars": int(self.pnl.size)}


def evaluation_env(market: MarketTensors, env_config: EnvConfig, window: Window, chunks: int,
                   device: torch.device) -> tuple[TradingVecEnv, Tensor, int]:
    """An env whose `chunks` episodes tile `window`; returns it, the starts, and steps per chunk."""
    first = max(window.start, env_config.window - 1)
    steps = (window.stop - 1 - first) // chunks
    if steps < 1:
        raise ConfigError(f"window [{window.start}, {window.stop}) is too short for {chunks} chunks")
    cfg = env_config.model_copy(update={"episode_len": steps})
    env = TradingVecEnv(market, cfg, n_envs=chunks, device=device, start_range=(first, window.stop))
    starts = first + torch.arange(chunks, device=device) * steps
    return env, starts, steps


@torch.no_grad()
def rollout(policy: Policy, market: MarketTensors, env_config: EnvConfig, window: Window,
            capital: float, chunks: int = 1, device: torch.device | None = None,
            periods_per_year: float | None = None) -> WindowResult:
    """`periods_per_year` annualises the Sharpe; None uses the rate observed in the window."""
    device = device or market.device
    env, starts, steps = evaluation_env(market, env_config, window, chunks, device)
    obs = env.reset(starts)
    money, position, actions, trades = [], [], [], []
    for _ in range(steps):
        action = policy(obs, env.state()[0])
        r = env.step(action)
        money.append(r.components["pnl"] - r.components["cost"])
        position.append(r.position)
        actions.append(action)
        trades.append(r.trades_closed)
        obs = r.obs
    exit_fill = fills.close_out(r.position, market.close[starts + steps], env.cost)
    money[-1] = money[-1] - exit_fill.cost
    position[-1] = r.position + exit_fill.qty
    trades.append(exit_fill.closed_trade.long())
    pnl = torch.stack(money, 1).reshape(-1).cpu().numpy()  # [chunks, steps] -> time order
    pos = torch.stack(position, 1).reshape(-1).cpu().numpy()
    act = torch.stack(actions, 1).reshape(-1, actions[0].shape[1]).cpu().numpy()
    bar = (starts[:, None] + torch.arange(steps, device=device)).reshape(-1).cpu().numpy()
    n_trades = int(torch.stack(trades).sum())
    ppy = periods_per_year or periods_per_year_from_ts(market.ts[window.start:window.stop])
    r = pnl / capital
    return WindowResult(
        pnl=pnl, position=pos, action=act, bar=bar, trades=n_trades,
        sharpe=sharpe(r, ppy), total_pnl=float(pnl.sum()),
        total_return=total_return(r),
        max_drawdown=drawdown(compounded_equity(r)).depth,
        flat_fraction=float((pos == 0).mean()) if pos.size else 1.0,
    )


def greedy_policy(network: torch.nn.Module) -> Policy:
    """The network's mean-weight (noise off) greedy action per branch."""

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        return network.act(obs)

    return act


def constant_policy(action: tuple[int, ...], n_branches: int = 3) -> Policy:
    """Always the same branch choices, e.g. (0, 0, 0) flat or (1, 2, 0) full-size long."""

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        return torch.tensor(action[:n_branches], device=obs.device).expand(obs.shape[0], -1)

    return act


def position_policy(direction_by_bar: Tensor, size: int = 2) -> Policy:
    """Hold sign(direction_by_bar[t]) decided at bar t (e.g. an oracle's), at size index `size`."""
    side = torch.sign(direction_by_bar).long()

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        d = side.to(bar.device)[bar]
        direction = torch.where(d > 0, 1, torch.where(d < 0, 2, 0))
        return torch.stack((direction, torch.full_like(direction, size), torch.zeros_like(direction)), 1)

    return act
