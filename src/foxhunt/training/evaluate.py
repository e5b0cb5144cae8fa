"""Greedy rollouts over a validation or test window, through the training env's fill model.

A window is cut into `chunks` consecutive pieces stepped in lock-step (one env each, starting
flat); the per-bar money (mark-to-market PnL minus costs) of the pieces, in time order, is the
window's PnL series. Policies see only bars up to the decision bar: the market handed in here
ends at the window's last bar.

Each piece ends flat, as a backtest window does (`foxhunt.backtest`): a position still open at
the close of its last bar is closed there by a market-on-close through the fill model, and that
exit's slippage and commission are charged to the last bar. A one-chunk rollout of a window
therefore reports the money, trades and Sharpe a backtest of the same window reports.

`Rollouts` holds the rollouts of fixed windows ready to run again (validation runs every
epoch): on CUDA its step is replayed as a CUDA graph, compiled on request, with no host sync
per step; on the CPU it steps eagerly, bit for bit as a plain loop would.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from foxhunt.env import fills
from foxhunt.env.actions import N_BRANCHES
from foxhunt.env.config import EnvConfig
from foxhunt.env.market import MarketTensors
from foxhunt.env.observation import ObservationSpec
from foxhunt.env.vector_env import TradingVecEnv, replay_generator
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
from foxhunt.training.graphs import CapturedStep, CompiledStep
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
    periods_per_year: float  # what `sharpe` is annualised with

    @property
    def trade_rate(self) -> float:
        """Closed trades per bar."""
        return self.trades / self.pnl.size if self.pnl.size else 0.0

    @property
    def per_bar_sharpe(self) -> float:
        """Not annualised; 0 for constant returns (a flat policy's)."""
        return 0.0 if self.estimate is None else self.estimate.sr

    def summary(self) -> dict[str, float | int | None]:
        return {"sharpe": self.sharpe, "psr": self.psr, "sr": self.per_bar_sharpe,
                "return": self.total_return,
                "pnl": self.total_pnl, "max_drawdown": self.max_drawdown, "trades": self.trades,
                "trade_rate": self.trade_rate, "flat": self.flat_fraction,
                "bars": int(self.pnl.size), "periods_per_year": self.periods_per_year}


def _chunking(observation: ObservationSpec, window: Window, chunks: int) -> tuple[int, int]:
    """(first decision bar, steps per chunk) of a window cut into `chunks` pieces."""
    first = observation.first_decision(window.start)
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


def rollouts(policy: Policy, market: MarketTensors, env_config: EnvConfig, windows: list[Window],
             capital: float, chunks: int = 1, device: torch.device | None = None,
             periods_per_year: float | None = None) -> list[WindowResult]:
    """`rollout` of each window, those with equal steps per chunk stepped together in one env:
    one policy pass per step for all of them, far cheaper than one rollout after another.
    Each piece sees only its own bars up to its decision bar, so each result is its window's
    alone; `market` must reach every window's last bar. Steps eagerly; `Rollouts` is the same,
    ready to run again (and graphed on CUDA)."""
    return Rollouts(policy, market, env_config, windows, capital, chunks, device,
                    periods_per_year).run()


class Rollouts:
    """`rollouts` of fixed windows, ready to run again with the policy as it then is: the envs,
    the per-step record buffers and the step (captured as a CUDA graph with `graphs`, compiled
    with `compile`; both CUDA only) are built once. Validation runs every epoch of a fold with
    the same windows and the network's weights changed in place, so it captures and compiles
    once per fold (once per run where folds have equal windows: see below).

    `policy` is one policy for every window, or one per window; windows stepped together
    whose policies differ each act on their own envs (one pass per policy and step).

    A step writes its record (money, position, action, closed trades) into the buffers at a
    device-side step counter and reads nothing on the host; the records are read once, after
    the last step. Each env sees the market from the window's first observation to the group's
    last bar, indexed from there (policies get absolute decision bars), so rolling folds, whose
    windows have equal lengths, step envs of equal shapes and bounds, and a compiled step is
    reused across them. Eagerly the numbers are bit for bit those of a fresh env per rollout.
    """

    def __init__(self, policy: Policy | Sequence[Policy], market: MarketTensors,
                 env_config: EnvConfig, windows: list[Window], capital: float, chunks: int = 1,
                 device: torch.device | None = None, periods_per_year: float | None = None,
                 *, graphs: bool = False, compile: bool = False):
        device = device or market.device
        cuda = device.type == "cuda"
        per_window = list(policy) if isinstance(policy, (list, tuple)) else [policy] * len(windows)
        if len(per_window) != len(windows):
            raise ConfigError(f"{len(per_window)} policies for {len(windows)} windows")
        observation = ObservationSpec(env_config.window, market.n_features)
        plans = [_chunking(observation, w, chunks) for w in windows]
        self.market, self.windows, self.capital = market, list(windows), capital
        self.chunks, self.periods_per_year = chunks, periods_per_year
        self._groups = []
        for steps in dict.fromkeys(steps for _, steps in plans):
            members = [i for i, (_, s) in enumerate(plans) if s == steps]
            self._groups.append(_Group(
                [per_window[i] for i in members], market, env_config, observation,
                [windows[i] for i in members], [plans[i][0] for i in members], steps, chunks,
                device, graphs and cuda, compile and cuda, members))

    @property
    def captured(self) -> bool:
        """Whether every group's step replays a CUDA graph (after the first run)."""
        return all(g.step.captured for g in self._groups)

    @property
    def compiled(self) -> bool:
        """Whether every group's step runs compiled (False after a fall-back to eager)."""
        return all(isinstance(g.record, CompiledStep) and g.record.compiled
                   for g in self._groups)

    def run(self) -> list[WindowResult]:
        with torch.no_grad(), warnings.catch_warnings():
            # Evaluation computes in full float32 on purpose; inductor suggests TF32 when it
            # compiles the step.
            warnings.filterwarnings("ignore", "TensorFloat32 tensor cores", UserWarning)
            for group in self._groups:
                group.step_all()
            records = [(group, group.read()) for group in self._groups]
        out: dict[int, WindowResult] = {}
        for group, rows in records:
            n, c = group.steps, self.chunks
            for k, i in enumerate(group.members):
                piece = rows[k * c:(k + 1) * c]
                starts = group.starts_host[k * c:(k + 1) * c]
                out[i] = _result(
                    self.market, self.windows[i], starts, n,
                    np.ascontiguousarray(piece[:, :n]).reshape(-1),
                    np.ascontiguousarray(piece[:, n:2 * n]).reshape(-1),
                    piece[:, 2 * n:-1].reshape(c * n, -1).astype(np.int64),
                    int(piece[:, -1].sum()), self.capital, self.periods_per_year)
        return [out[i] for i in range(len(self.windows))]


class _Group:
    """Windows of equal steps per chunk in one env: `chunks` envs per window, in window order."""

    def __init__(self, policies: list[Policy], market: MarketTensors, env_config: EnvConfig,
                 observation: ObservationSpec, windows: list[Window], firsts: list[int],
                 steps: int, chunks: int, device: torch.device, graphs: bool, compile: bool,
                 members: list[int]):
        self.steps, self.members = steps, members
        offsets = torch.arange(chunks, device=device) * steps
        starts = torch.cat([first + offsets for first in firsts])
        lo, hi = min(firsts), max(w.stop for w in windows)
        base = observation.reads_from(lo)
        cfg = env_config.model_copy(update={"episode_len": steps})
        env = TradingVecEnv(market_window(market, base, hi), cfg, n_envs=starts.numel(),
                            device=device, start_range=(lo - base, hi - base),
                            generator=replay_generator(device),
                            trade_clock=env_config.episode_len)
        self.env, self.device = env, device
        self.starts_host = starts.cpu().numpy()
        self.local_starts = starts - base
        self.close = market.close.to(device)[starts + steps]  # each piece's last bar
        n = env.n_envs
        self.base = torch.tensor(base, device=device)
        self.obs = torch.zeros(n, env.obs_dim, device=device)
        self.index = torch.zeros(1, dtype=torch.long, device=device)
        self.money = torch.zeros(steps, n, dtype=torch.float64, device=device)
        self.position = torch.zeros(steps, n, dtype=torch.float64, device=device)
        self.actions = torch.zeros(steps, n, N_BRANCHES, dtype=torch.long, device=device)
        self.trades = torch.zeros(steps, n, dtype=torch.long, device=device)
        act = _per_env(policies, chunks)
        self.record = CompiledStep(record_step, True, "rollout") if compile else record_step
        self.step = CapturedStep(
            lambda: self.record(env, act, self.base, self.obs, self.index, self.money,
                                self.position, self.actions, self.trades), graphs)

    def step_all(self) -> None:
        """Every step from the window starts, nothing read on the host."""
        self.obs.copy_(self.env.reset(self.local_starts))
        self.index.zero_()
        for _ in range(self.steps):
            self.step()

    def read(self) -> np.ndarray:
        """The records, each piece's open position closed at its last bar's close (its exit
        costs charged to the last step), in one host read: per env, money [steps], position
        [steps], actions [steps x branches] and closed trades."""
        last = self.steps - 1
        exit_fill = fills.close_out(self.position[last], self.close, self.env.cost)
        self.money[last] -= exit_fill.cost
        self.position[last] += exit_fill.qty
        trades = self.trades.sum(0) + exit_fill.closed_trade.long()
        n = self.env.n_envs
        return torch.cat((self.money.T, self.position.T,
                          self.actions.permute(1, 0, 2).reshape(n, -1).double(),
                          trades.double().unsqueeze(1)), 1).cpu().numpy()


def record_step(env: TradingVecEnv, act: Policy, base: Tensor, obs: Tensor, index: Tensor,
                money: Tensor, position: Tensor, actions: Tensor, trades: Tensor) -> None:
    """One lock-step of a rollout: the policy acts on `obs` at its absolute decision bars, the
    env steps, and the step's money, position, action and closed trades go into row `index` of
    the buffers; `obs` becomes the next observation and `index` moves on."""
    action = act(obs, env.state()[0] + base)
    r = env.step(action)
    money.index_copy_(0, index, (r.components["pnl"] - r.components["cost"]).unsqueeze(0))
    position.index_copy_(0, index, r.position.unsqueeze(0))
    actions.index_copy_(0, index, action.to(actions.dtype).unsqueeze(0))
    trades.index_copy_(0, index, r.trades_closed.unsqueeze(0))
    obs.copy_(r.obs)
    index.add_(1)


def _per_env(policies: list[Policy], chunks: int) -> Policy:
    """One policy for all envs, or each window's on its `chunks` envs."""
    if all(p is policies[0] for p in policies):
        return policies[0]
    parts = tuple((p, k * chunks, (k + 1) * chunks) for k, p in enumerate(policies))

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        return torch.cat([p(obs[lo:hi], bar[lo:hi]) for p, lo, hi in parts])

    return act


def market_window(market: MarketTensors, start: int, stop: int) -> MarketTensors:
    """Bars [start, stop) of the market as views, indexed from `start`."""
    cut = {k: getattr(market, k)[start:stop]
           for k in ("features", "open", "high", "low", "close", "atr", "reward_scale",
                     "session_end")}
    return replace(market, ts=market.ts[start:stop], **cut)


def _result(market: MarketTensors, window: Window, starts: np.ndarray, steps: int,
            pnl: np.ndarray, pos: np.ndarray, act: np.ndarray, trades: int, capital: float,
            periods_per_year: float | None) -> WindowResult:
    """One window's result from its pieces' records in time order (dollars per decision)."""
    bar = (starts[:, None] + np.arange(steps)).reshape(-1)
    ppy = periods_per_year or periods_per_year_from_ts(market.ts[window.start:window.stop])
    r = pnl / capital
    return WindowResult(
        pnl=pnl, position=pos, action=act, bar=bar, trades=trades,
        sharpe=sharpe(r, ppy), total_pnl=float(pnl.sum()),
        total_return=total_return(r),
        max_drawdown=drawdown(compounded_equity(r)).depth,
        flat_fraction=float((pos == 0).mean()) if pos.size else 1.0,
        psr=probabilistic_sharpe(r), estimate=sharpe_estimate(r), periods_per_year=ppy,
    )


def greedy_policy(network: torch.nn.Module) -> Policy:
    """The network's mean-weight (noise off) greedy action per branch."""

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        return network.act(obs)

    return act


def constant_policy(action: tuple[int, ...], n_branches: int = 3) -> Policy:
    """Always the same branch choices, e.g. (0, 0, 0) flat or (1, 2, 0) full-size long. Filled
    on the device (no host data), so a CUDA graph can capture it."""
    choices = tuple(int(a) for a in action[:n_branches])

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        n = obs.shape[0]
        return torch.stack([torch.full((n,), c, dtype=torch.long, device=obs.device)
                            for c in choices], 1)

    return act

