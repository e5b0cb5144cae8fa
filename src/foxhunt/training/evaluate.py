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
    SharpeEstimate,
    compounded_equity,
    drawdown,
    periods_per_year_from_ts,
    probabilistic_sharpe,
    sharpe,
    sharpe_estimate,
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
    psr: float | None  # P(true Sharpe > 0) from the per-bar returns; None if constant
    estimate: SharpeEstimate | None  # per-bar Sharpe, n, skew, kurtosis: for comparing windows

    @property
    def trade_rate(self) -> float:
        """Closed trades per bar."""
        return self.trades / self.pnl.size if self.pnl.size else 0.0

    def summary(self) -> dict[str, float | int | None]:
        return {"sharpe": self.sharpe, "psr": self.psr, "return": self.total_return,
                "pnl": self.total_pnl, "max_drawdown": self.max_drawdown, "trades": self.trades,
                "trade_rate": self.trade_rate, "flat": self.flat_fraction,
                "bars": int(self.pnl.size)}


def _chunking(env_config: EnvConfig, window: Window, chunks: int) -> tuple[int, int]:
    """(first decision bar, steps per chunk) of a window cut into `chunks` pieces."""
    first = max(window.start, env_config.window - 1)
    steps = (window.stop - 1 - first) // chunks
    if steps < 1:
        raise ConfigError(
            f"window [{window.start}, {window.stop}) is too short for {chunks} chunks")
    return first, steps


def rollout(policy: Policy, market: MarketTensors, env_config: EnvConfig, window: Window,
            capital: float, chunks: int = 1, device: torch.device | None = None,
            periods_per_year: float | None = None) -> WindowResult:
    """`periods_per_year` annualises the Sharpe; None uses the rate observed in the window."""
    return rollouts(policy, market, env_config, [window], capital, chunks, device,
                    periods_per_year)[0]


@torch.no_grad()
def rollouts(policy: Policy, market: MarketTensors, env_config: EnvConfig, windows: list[Window],
             capital: float, chunks: int = 1, device: torch.device | None = None,
             periods_per_year: float | None = None) -> list[WindowResult]:
    """`rollout` of each window, those with equal steps per chunk stepped together in one env:
    one policy pass per step for all of them, far cheaper than one rollout after another.
    Each piece sees only its own bars up to its decision bar, so each result is its window's
    alone; `market` must reach every window's last bar."""
    device = device or market.device
    plans = [_chunking(env_config, w, chunks) for w in windows]
    out: dict[int, WindowResult] = {}
    for steps in dict.fromkeys(steps for _, steps in plans):
        group = [i for i, (_, s) in enumerate(plans) if s == steps]
        starts = torch.cat([plans[i][0] + torch.arange(chunks, device=device) * steps
                            for i in group])
        lo = min(plans[i][0] for i in group)
        hi = max(windows[i].stop for i in group)
        cfg = env_config.model_copy(update={"episode_len": steps})
        env = TradingVecEnv(market, cfg, n_envs=starts.numel(), device=device, start_range=(lo, hi))
        pnl, pos, act, trades = _step_through(policy, env, market, starts, steps)
        for k, i in enumerate(group):
            piece = slice(k * chunks, (k + 1) * chunks)
            out[i] = _result(market, windows[i], starts[piece], steps, pnl[piece], pos[piece],
                             act[piece], trades[piece], capital, periods_per_year)
    return [out[i] for i in range(len(windows))]


def _step_through(policy: Policy, env: TradingVecEnv, market: MarketTensors, starts: Tensor,
                  steps: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per env: money [N, steps], position [N, steps], actions [N, steps, branches] and closed
    trades [N], the open position closed at the last bar's close."""
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
    return (torch.stack(money, 1), torch.stack(position, 1), torch.stack(actions, 1),
            torch.stack(trades, 1).sum(1))


def _result(market: MarketTensors, window: Window, starts: Tensor, steps: int, money: Tensor,
            position: Tensor, actions: Tensor, trades: Tensor, capital: float,
            periods_per_year: float | None) -> WindowResult:
    pnl = money.reshape(-1).cpu().numpy()  # [chunks, steps] -> time order
    pos = position.reshape(-1).cpu().numpy()
    act = actions.reshape(-1, actions.shape[-1]).cpu().numpy()
    bar = (starts[:, None] + torch.arange(steps, device=starts.device)).reshape(-1).cpu().numpy()
    ppy = periods_per_year or periods_per_year_from_ts(market.ts[window.start:window.stop])
    r = pnl / capital
    return WindowResult(
        pnl=pnl, position=pos, action=act, bar=bar, trades=int(trades.sum()),
        sharpe=sharpe(r, ppy), total_pnl=float(pnl.sum()),
        total_return=total_return(r),
        max_drawdown=drawdown(compounded_equity(r)).depth,
        flat_fraction=float((pos == 0).mean()) if pos.size else 1.0,
        psr=probabilistic_sharpe(r), estimate=sharpe_estimate(r),
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
