"""The backtester: policies x windows stepped through the training env, batched on the device.

There is one fill model: a backtest steps `TradingVecEnv` (fills, costs, trailing stops,
position limits, session flatten) or, for policies simple enough, applies the env's step order
through the same fill functions, so it pays exactly what the env charged. This module decides
where each env starts and which policy acts in it, and reads the per-step records back once at
the end.

A window [start, stop) is one episode: the first decision is taken at the close of bar `start`
(later if a policy's inputs are still warming up), the last at the close of bar stop-2 (it fills
at the open of stop-1), and whatever is still open at the close of bar stop-1 is flattened
there: a market-on-close through `fills.execute`, slippage against the trader, exactly like the
env's session-end flatten, so its exit cost counts.

Two ways to step, same numbers:

- Lock-step (any policy). Every (policy, window) pair is one env of a single `TradingVecEnv`
  (n_envs = policies x windows on one shared `MarketTensors`); each policy acts on its own slice
  of envs; all run to the longest window and shorter ones are masked out. Per-step records go
  into preallocated device tensors, read once at the end. On CUDA the step (all policies +
  env.step + the record) is compiled with `torch.compile` and captured as a CUDA graph of
  `GRAPH_BLOCK` steps, replayed with no host synchronisation.
- Direct (table policies without armed stops and without drawdown or trade-close shaping, e.g.
  flat, buy-and-hold, SMA cross). Their targets are known for every bar in advance and, with no
  stop, the position after a step is the target, or flat after a session-end flatten. So every
  step of every window is computed at once: the env's step order (market order at the next
  open, session flatten at its close, mark-to-market at the close) applied to whole arrays
  through the same `ActionTable.decode` and `fills.execute`. A stepping loop costs ~340 tensor
  ops per bar-step, far from the >= 1M bars/s a CPU baseline needs; this does ~30 ops per window.
  `test_direct_path_equals_the_env` holds it to the env to the cent (bit for bit in practice)
  with costs, session flattens and random targets; `direct=False` forces lock-step. It reads
  only prices and session ends, so the env's market (ATR, reward scale) is built only when a
  lock-step run or a policy needs it, and on the CPU it runs on one thread (`_one_host_thread`).
  A 1M-bar SMA cross, end to end with trades and metrics, takes ~0.09 s on the 2-core VM
  (`benchmarks/bench_backtest.py`, docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from foxhunt.backtest.results import RECORD, BacktestResult, Record, assemble
from foxhunt.backtest.strategies import PolicySpec, TablePolicy
from foxhunt.data.grid import tradable
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.devices import float32_matmul_precision, resolve_device
from foxhunt.env import fills
from foxhunt.env.actions import N_CHOICES, ActionTable, unflatten_actions
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import Book, CostModel
from foxhunt.env.market import MarketTensors, session_ends
from foxhunt.env.vector_env import REWARD_COMPONENTS, TradingVecEnv, replay_generator
from foxhunt.errors import ConfigError, DataError

GRAPH_BLOCK = 128

Policy = Callable[[Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class Job:
    """One backtest: `policy` over bars [start, stop) of the series."""

    name: str
    policy: PolicySpec
    window: tuple[int, int]


@dataclass(frozen=True)
class _Plan:
    job: Job
    first: int  # first decision bar
    stop: int

    @property
    def steps(self) -> int:
        return self.stop - 1 - self.first


@dataclass
class _Batch:
    """Envs of one lock-step run and where each plan's decisions land in its records."""

    starts: np.ndarray  # [n_envs] first decision bar of each env
    policies: list[tuple[Policy, int, int]]  # (callable, first env, end env)
    steps: int
    index: list[tuple[np.ndarray, np.ndarray]]  # per plan: (env, step) of each of its decisions


def backtest_env_config(env_config: EnvConfig) -> EnvConfig:
    """The env settings of a backtest: one window bar of placeholder features (policies gather
    their own), no ruin stop (a backtest runs to the end of its window)."""
    return env_config.model_copy(update={"window": 1, "ruin_loss": math.inf})


class Backtester:
    """Runs jobs on one bar series; the market is uploaded once (when first needed) and shared
    by every job.

    `costs=False` sets commission and slippage to 0. `periods_per_year` annualises the metrics
    (see `foxhunt.metrics.periods_per_year`; None: the rate observed in each window).
    `graphs`/`compile` (default: on, on CUDA)
    choose how the lock-step loop runs on CUDA; if compiling fails, the loop runs uncompiled
    with a warning. `direct=False` steps table policies lock-step too.
    """

    def __init__(
        self,
        bars: Bars,
        instrument: Instrument,
        env_config: EnvConfig | None = None,
        *,
        costs: bool = True,
        device: torch.device | str | None = None,
        capital: float = 100_000.0,
        periods_per_year: float | None = None,
        graphs: bool | None = None,
        compile: bool | None = None,
        direct: bool = True,
    ):
        if not capital > 0:
            raise ConfigError(f"capital must be > 0, got {capital}")
        self.bars, self.instrument, self.costs, self.capital = bars, instrument, costs, capital
        self.prices = tradable(bars, instrument.tick_size)  # what fills and marks are at
        self.periods_per_year = periods_per_year
        self.device = resolve_device(device)
        cuda = self.device.type == "cuda"
        self.graphs = cuda if graphs is None else graphs and cuda
        self.compile = cuda if compile is None else compile
        self.direct = direct
        self._price_cache: dict[str, Tensor] | None = None
        self.env_config = backtest_env_config(env_config or EnvConfig())
        if not costs:
            self.env_config = self.env_config.model_copy(update={"slippage_ticks": 0.0})
        if len(bars) < 2:
            raise DataError(f"the env needs at least 2 bars, got {len(bars)}")
        self.cost = CostModel.from_instrument(instrument, self.env_config.slippage_ticks)
        if not costs:
            self.cost = CostModel(instrument.tick_size, instrument.point_value, 0.0, 0.0)

    @cached_property
    def market(self) -> MarketTensors:
        """The env's market on the device, built when a lock-step run (or a policy) first needs
        it: the direct path reads only prices and session ends (`_prices`), and the market's
        ATR and reward scale cost more than a whole direct SMA backtest."""
        placeholder = np.zeros((len(self.bars), 1), dtype=np.float32)
        return MarketTensors.from_bars(self.bars, placeholder, self.instrument, self.env_config,
                                       self.device)

    def _prices(self) -> dict[str, Tensor]:
        """open, close and session_end of every bar on the device: the market's own tensors
        once it is built, else the same values (`MarketTensors.from_bars` takes them from the
        bars and `session_ends` alike); reward_scale only with a hold cost, as it is read only
        then."""
        if "market" in self.__dict__ or self.env_config.hold_cost:
            m = self.market
            return {"open": m.open, "close": m.close, "session_end": m.session_end,
                    "reward_scale": m.reward_scale}
        if self._price_cache is None:
            def f64(a: np.ndarray) -> Tensor:
                return torch.tensor(np.asarray(a, dtype=np.float64), device=self.device)

            self._price_cache = {
                "open": f64(self.prices.open), "close": f64(self.prices.close),
                "session_end": torch.as_tensor(session_ends(self.bars.ts, self.instrument.session),
                                               device=self.device)}
        return self._price_cache

    # -- planning --------------------------------------------------------------------------

    def _plan(self, job: Job) -> _Plan:
        n = len(self.bars)
        start, stop = (int(x) for x in job.window)
        if not 0 <= start < stop <= n:
            raise ConfigError(f"{job.name}: window [{start}, {stop}) must lie inside [0, {n})")
        first = max(start, job.policy.first_bar())
        if stop - first < 2:
            raise ConfigError(
                f"{job.name}: window [{start}, {stop}) leaves no decision: the policy can act "
                f"from bar {first} and a decision needs the bar after it; widen the window"
            )
        return _Plan(job, first, stop)

    def _direct_ok(self, plan: _Plan, table: np.ndarray | None) -> bool:
        cfg = self.env_config
        if table is None or not self.direct or cfg.drawdown_penalty or cfg.trade_close_bonus:
            return False
        rows = table[plan.first : plan.stop - 1]
        stop = rows[:, 2]
        if not stop.any():  # no stop chosen anywhere (every table baseline): nothing arms
            return True
        multiples = np.array([0.0, *cfg.stop_atr_multiples])
        return not bool(((rows[:, 0] != 0) & (multiples[stop] > 0)).any())

    # -- running ---------------------------------------------------------------------------

    def run(self, jobs: Sequence[Job]) -> list[BacktestResult]:
        """Results in the order of `jobs`."""
        plans = [self._plan(j) for j in jobs]
        tables: dict[int, np.ndarray] = {}
        for p in plans:
            if isinstance(p.job.policy, TablePolicy) and id(p.job.policy) not in tables:
                tables[id(p.job.policy)] = p.job.policy.table(self.bars.close)
        direct = [i for i, p in enumerate(plans)
                  if self._direct_ok(p, tables.get(id(p.job.policy)))]
        lockstep = [i for i in range(len(plans)) if i not in set(direct)]
        records: list[Record] = [{}] * len(plans)
        info: list[dict[str, object]] = [{}] * len(plans)
        if direct:
            with _one_host_thread(self.device):
                out = self._direct([plans[i] for i in direct], tables)
            for i, rec in zip(direct, out, strict=True):
                records[i] = rec
                info[i] = {"mode": "direct", "device": str(self.device)}
        if lockstep:
            out, batch_info = self._run_lockstep(self._lockstep_batch([plans[i] for i in lockstep]))
            for i, rec in zip(lockstep, out, strict=True):
                records[i], info[i] = rec, batch_info
        with _one_host_thread(torch.device("cpu")):
            ends = self._final_flatten(plans, records)
            return [
                assemble(p.job.name, self.prices, self.instrument, p.first, p.stop, rec, end,
                         self.cost, self.capital, self.costs, inf, self.periods_per_year)
                for p, rec, end, inf in zip(plans, records, ends, info, strict=True)
            ]

    def _direct(self, plans: list[_Plan], tables: dict[int, np.ndarray]) -> list[Record]:
        """Records of stop-free table policies, all steps at once (see the module docstring).
        Fills are computed where an order or a session flatten actually trades. Each plan's
        steps are contiguous bars, so its prices are slices; the target of every action
        comes from `ActionTable.decode` of that action (decoded once per distinct action)."""
        cfg, dev, pv = self.env_config, self.device, self.cost.point_value
        m = self._prices()
        rows = np.concatenate([tables[id(p.job.policy)][p.first : p.stop - 1] for p in plans])
        code = torch.as_tensor(
            (rows[:, 0].astype(np.int16) * N_CHOICES + rows[:, 1]) * N_CHOICES + rows[:, 2],
            device=dev)
        all_actions = unflatten_actions(torch.arange(N_CHOICES ** 3, device=dev))
        target = ActionTable(cfg, dev).decode(all_actions)[0][code.long()]
        starts = torch.as_tensor(np.cumsum([0] + [p.steps for p in plans[:-1]]), device=dev)

        def steps_of(x: Tensor, shift: int) -> Tensor:  # x[bar + shift] for every step
            parts = [x[p.first + shift : p.stop - 1 + shift] for p in plans]
            return parts[0] if len(parts) == 1 else torch.cat(parts)

        at_session_end = steps_of(m["session_end"], 1) & cfg.flatten_at_session_end
        held = torch.where(at_session_end, 0.0, target)
        pos0 = torch.roll(held, 1).index_fill_(0, starts, 0.0)
        open_, close = steps_of(m["open"], 1), steps_of(m["close"], 1)
        columns = {
            "pnl": pv * (pos0 * (open_ - steps_of(m["close"], 0)) + target * (close - open_)),
            "hold_cost": (cfg.hold_cost * steps_of(m["reward_scale"], 0) * (target == 0)
                          if cfg.hold_cost else torch.zeros_like(target)),
            "position": held,
        }
        cost = torch.zeros_like(target)
        for kind, book, qty, ref in (
            ("order", pos0, target - pos0, open_),
            ("flatten", target, torch.where(at_session_end, -target, 0.0), close),
        ):
            at = qty.nonzero().squeeze(1)
            zero = torch.zeros_like(at, dtype=torch.float64)
            fill = fills.execute(Book(book[at], zero, zero), qty[at], ref[at], self.cost)
            cost.index_add_(0, at, fill.cost)
            columns[f"{kind}_qty"] = qty
            columns[f"{kind}_price"] = torch.zeros_like(qty).index_copy_(0, at, fill.price)
        columns["cost"] = cost
        host = {k: v.cpu().numpy() for k, v in columns.items()}
        act = rows.astype(np.int8)
        host.update(direction=act[:, 0], size=act[:, 1], stop_choice=act[:, 2])
        zeros = np.zeros(len(act))
        out, lo = [], 0
        for p in plans:
            rec = {k: v[lo : lo + p.steps] for k, v in host.items()}
            rec.update({k: zeros[: p.steps] for k in RECORD if k not in rec})
            out.append(rec)
            lo += p.steps
        return out

    def _lockstep_batch(self, plans: list[_Plan]) -> _Batch:
        steps = max(p.steps for p in plans)
        cfg = self.env_config.model_copy(update={"episode_len": steps})
        order = list(dict.fromkeys(id(p.job.policy) for p in plans))
        starts: list[int] = []
        policies = []
        lane_of: dict[int, int] = {}
        for key in order:
            group = [p for p in plans if id(p.job.policy) == key]
            lo = len(starts)
            for p in group:
                lane_of[id(p)] = len(starts)
                starts.append(p.first)
            policies.append((group[0].job.policy.build(self.market, cfg), lo, len(starts)))
        index = [(np.full(p.steps, lane_of[id(p)]), np.arange(p.steps)) for p in plans]
        return _Batch(np.asarray(starts), policies, steps, index)

    def _run_lockstep(self, batch: _Batch) -> tuple[list[Record], dict[str, object]]:
        """Envs whose window ended keep stepping (masked out) and may auto-reset, from
        `replay_generator`'s generator."""
        cfg = self.env_config.model_copy(update={"episode_len": batch.steps})
        env = TradingVecEnv(self.market, cfg, self.cost, n_envs=len(batch.starts),
                            device=self.device, generator=replay_generator(self.device),
                            trade_clock=self.env_config.episode_len)
        starts = torch.as_tensor(batch.starts, dtype=torch.long, device=self.device)
        loop = StepLoop(env, tuple(batch.policies), compile=self.compile)
        began = time.perf_counter()
        with torch.no_grad(), float32_matmul_precision("highest"):
            out = loop.run(starts, batch.steps, self.graphs)
        rows = np.concatenate([step * env.n_envs + lane for lane, step in batch.index])
        flat = out.view(-1, len(RECORD)).index_select(0, torch.as_tensor(rows, device=out.device))
        flat = flat.cpu().numpy()
        info = {"mode": "lockstep", "device": str(self.device), "n_envs": env.n_envs,
                "steps": batch.steps, "graphs": loop.graphed, "compiled": loop.compiled,
                "lockstep_s": round(time.perf_counter() - began, 4)}
        sizes = np.cumsum([len(lane) for lane, _ in batch.index])[:-1]
        return [{k: part[:, i] for i, k in enumerate(RECORD)}
                for part in np.split(flat, sizes)], info

    def _final_flatten(self, plans: list[_Plan], records: list[Record]) -> list[dict]:
        """Market-on-close of each job's open position at its last bar, through the fill model."""
        pos = torch.tensor([r["position"][-1] for r in records], dtype=torch.float64)
        close = torch.tensor([self.prices.close[p.stop - 1] for p in plans], dtype=torch.float64)
        fill = fills.close_out(pos, close, self.cost)
        return [{"qty": float(q), "price": float(px), "cost": float(c)}
                for q, px, c in zip(fill.qty, fill.price, fill.cost, strict=True)]


@contextlib.contextmanager
def _one_host_thread(device: torch.device):
    """Runs the block's torch ops on one CPU thread where `device` is the CPU, then restores
    torch's thread count. The direct path and the result assembly are whole-array, memory-bound
    ops: a second thread gains nothing (1M-bar SMA cross on the 2-core VM: 0.092 s with one or
    two), but a parallel region waits for all its threads, so while another process holds a core
    every op waits out the scheduler (the same run: 1.1 s with two threads)."""
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class StepLoop:
    """Steps an env `steps` times under `policies`, recording `RECORD` per step and env.

    Eager: each step writes its row of a preallocated [steps, n_envs, K] tensor. Graphed
    (CUDA): `GRAPH_BLOCK` steps are captured once into a staging block that is replayed and
    copied out block by block; nothing in the loop reads a device value on the host.
    """

    def __init__(self, env: TradingVecEnv, policies: tuple[tuple[Policy, int, int], ...],
                 compile: bool = False):
        self.env, self.policies, self.compile = env, policies, compile
        self.compiled = False
        self.graphed = False

    def step(self) -> Tensor:
        fn = _compiled_record_step() if self.compiled else record_step
        return fn(self.env, self.policies)

    def run(self, starts: Tensor, steps: int, graphs: bool) -> Tensor:
        """[steps, n_envs, K] records of `steps` decisions from bars `starts`. If capturing the
        graph fails, the loop runs un-graphed with a warning (`graphed` stays False)."""
        if graphs or self.compile:
            self._warm_up(starts)
        self.env.reset(starts)
        if graphs:
            try:
                return self._graphed(steps)
            except RuntimeError as exc:
                first = str(exc).splitlines()[0] if str(exc) else ""
                warnings.warn(f"CUDA graph capture of the backtest step failed "
                              f"({type(exc).__name__}: {first}); stepping without graphs",
                              RuntimeWarning, stacklevel=2)
                self.env.reset(starts)
        return self._eager(steps)

    def _eager(self, steps: int) -> Tensor:
        env = self.env
        out = torch.empty((steps, env.n_envs, len(RECORD)), dtype=torch.float64,
                          device=env.device)
        for k in range(steps):
            if self.compiled:
                out[k].copy_(self.step())
            else:
                record_step(env, self.policies, out=out[k])
        return out

    def _graphed(self, steps: int) -> Tensor:
        env = self.env
        block = min(GRAPH_BLOCK, steps)
        blocks = math.ceil(steps / block)
        shape = (env.n_envs, len(RECORD))
        stage = torch.empty((block, *shape), dtype=torch.float64, device=env.device)
        out = torch.empty((blocks * block, *shape), dtype=torch.float64, device=env.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for k in range(block):
                stage[k].copy_(self.step())
        self.graphed = True
        for b in range(blocks):
            graph.replay()
            out[b * block : (b + 1) * block].copy_(stage)
        return out[:steps]

    def _warm_up(self, starts: Tensor) -> None:
        """A few steps before the timed loop or capture (compilation, lazy CUDA init), on a side
        stream on CUDA as graph capture requires; the caller resets the env afterwards. If
        compiling fails, the loop steps uncompiled."""
        env = self.env
        env.reset(starts)
        cuda = env.device.type == "cuda"
        side = torch.cuda.Stream(env.device) if cuda else None
        if side is not None:
            side.wait_stream(torch.cuda.current_stream(env.device))
        with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
            if self.compile:
                try:
                    _compiled_record_step()(env, self.policies)
                    self.compiled = True
                except Exception as exc:  # noqa: BLE001 - any compiler failure falls back
                    first = str(exc).splitlines()[0] if str(exc) else ""
                    warnings.warn(f"torch.compile of the backtest step failed "
                                  f"({type(exc).__name__}: {first}); stepping uncompiled",
                                  RuntimeWarning, stacklevel=2)
                    env.reset(starts)
            for _ in range(2):
                self.step()
        if side is not None:
            torch.cuda.current_stream(env.device).wait_stream(side)


def record_step(env: TradingVecEnv, policies: tuple[tuple[Policy, int, int], ...],
                out: Tensor | None = None) -> Tensor:
    """One lock-step: every policy acts on its slice of envs, the env steps; [n_envs, K] record
    (written into `out` when given)."""
    bar, pos_state = env.state()
    if len(policies) == 1:
        action = policies[0][0](bar, pos_state)
    else:
        action = torch.cat([fn(bar[lo:hi], pos_state[lo:hi]) for fn, lo, hi in policies])
    r = env.step(action)
    cols = [r.components[name] for name in REWARD_COMPONENTS]
    cols += [r.order_qty, r.order_price, r.stop_qty, r.stop_price, r.flatten_qty,
             r.flatten_price, r.position]
    cols += list(action.to(torch.float64).unbind(1))
    if out is None:
        return torch.stack(cols, dim=1)
    return torch.stack(cols, dim=1, out=out)


_COMPILED: Callable | None = None


def _compiled_record_step() -> Callable:
    """One compiled `record_step` per process: its guards are on shapes and layout, not on the
    env object, so later backtests of the same shape reuse the compiled kernels."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = torch.compile(record_step, dynamic=False)
    return _COMPILED


def run_backtest(
    bars: Bars,
    instrument: Instrument,
    *,
    policies: Mapping[str, PolicySpec],
    windows: Sequence[tuple[int, int]] | None = None,
    env_config: EnvConfig | None = None,
    costs: bool = True,
    device: torch.device | str | None = None,
    capital: float = 100_000.0,
    periods_per_year: float | None = None,
) -> list[BacktestResult]:
    """Every policy over every window (default: the whole series), batched in one run.

    A window starts no earlier than the first bar every policy can act on (a checkpoint's
    feature warm-up), so all policies are compared over the same bars. Results come policy by
    policy, window by window within each policy.
    """
    if not policies:
        raise ConfigError("run_backtest: no policies given")
    windows = list(windows) if windows is not None else [(0, len(bars))]
    if not windows:
        raise ConfigError("run_backtest: no windows given")
    first = max(spec.first_bar() for spec in policies.values())
    windows = [(max(a, first), b) if max(a, first) < b else (a, b) for a, b in windows]
    tester = Backtester(bars, instrument, env_config, costs=costs, device=device, capital=capital,
                        periods_per_year=periods_per_year)
    return tester.run([Job(name, spec, w) for name, spec in policies.items() for w in windows])
