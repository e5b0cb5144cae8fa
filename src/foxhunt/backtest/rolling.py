"""Backtests across contract rolls: decisions on the continuous series, fills in the contracts.

A policy reads the continuous series (back-adjusted or not; `data.continuous`), as features and
training do, but a position is always held in a real contract: fills and marks use the traded
contract's own prices (`ContinuousSeries.raw`), and at each roll bar a held position leaves the
old contract at its open (the roll table's `from_price`) and enters the new one at its open
(`to_price`). Both legs are market orders through the one fill model (`env.fills.execute`): each
pays slippage and commission, so a position held across a roll pays a round trip there and
earns no fictitious gap.

The step order is the engine's direct path (`backtest.engine`), with the roll added:

    decision at the close of bar t  ->  at the open of bar t+1: if t+1 is a roll bar and a
    position is held, sell it in the old contract at from_price, then fill the target in the
    new contract at to_price (= the new contract's open); else fill target - position at the
    open  ->  mark at the close of t+1 in the contract then traded  ->  the window's last bar
    flattens at its close (market-on-close, slippage against the trader)

so, without costs, a policy earns here exactly what the engine books on the difference-
adjusted series, and with costs the difference is the rolls' extra fills (held to the cent by
tests/backtest/test_rolls.py). Each contract's stretch is one `Leg`: its fills, its PnL after
costs (it ends flat: rolled out or flattened), and the sum of the legs is the backtest's PnL.

`foxhunt backtest` on a stored continuous series rolls every result (`stored_continuous`,
`RollingBacktest.refill`): the engine decides on the continuous series (the policy, its features and the
env's book read it, as paper's mirror does) and its recorded decisions are filled here, so a
trained agent, a checkpoint and the rule baselines all pay the rolls' costs.

Not yet here (issue 38): trailing stops and session-end flattens across rolls (refused with
one line). Paper trading rolls a held position as the trading engine's two orders
(`execution.roller`, driven by `paper.rolling.RollingPaperTrader`), filled as here but for a
decision at a roll's start (docs/futures.md, "Rolling a held position"); live trading does
not roll yet (`foxhunt live` refuses a continuous series).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from foxhunt.backtest.results import BacktestResult, compute_metrics
from foxhunt.backtest.strategies import ActionReplay, TablePolicy
from foxhunt.backtest.trades import EXIT_REASONS, TRADE_COLUMNS, Trades, extract_trades
from foxhunt.data.continuous import (
    ContinuousSeries,
    ContractSeries,
    RollRule,
    build_continuous,
    fingerprint,
    stored_contract_series,
)
from foxhunt.data.grid import tradable
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.env import fills
from foxhunt.env.actions import N_CHOICES, ActionTable, unflatten_actions
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import Book, CostModel
from foxhunt.errors import ConfigError


@dataclass(frozen=True)
class LegFill:
    """One fill of a leg: `kind` is order, roll out, roll in or final (the window's end)."""

    ts: int  # close time of the bar it filled in (at the bar's open, or its close for final)
    qty: float  # signed contracts
    price: float  # fill price, slippage included
    ref: float  # the market price it met
    commission: float
    slippage: float  # money lost to slippage, >= 0
    kind: str


@dataclass
class Leg:
    """A stretch in one contract, from its first fill to flat again."""

    contract: str
    fills: list[LegFill] = field(default_factory=list)

    @property
    def commission(self) -> float:
        return sum(f.commission for f in self.fills)

    @property
    def slippage(self) -> float:
        return sum(f.slippage for f in self.fills)

    def pnl(self, point_value: float) -> float:
        """Money the leg made after costs: what its sales took in minus what its buys paid,
        minus commissions (the fill prices carry the slippage). Only whole once it is flat."""
        return -sum(f.qty * f.price for f in self.fills) * point_value - self.commission


@dataclass(frozen=True)
class RollFill:
    """A roll that moved a held position: the two legs' fills at the roll bar."""

    decided: str
    from_symbol: str
    to_symbol: str
    ts: int
    qty_out: float
    qty_in: float
    out_price: float
    in_price: float
    cost: float  # commission + slippage of both legs


@dataclass
class RollingResult:
    """Per-bar arrays over the window [first, stop) of the continuous series (bar 0 is the
    first decision bar, as in `backtest.results`), the legs and the rolls that moved money."""

    name: str
    root: str
    window: tuple[int, int]
    capital: float
    ts: np.ndarray
    contract: list[str]  # the contract traded at each bar
    pnl: np.ndarray  # money per bar, after costs
    equity: np.ndarray
    position: np.ndarray  # held at the close of each bar (0 at the last: the final flatten)
    legs: list[Leg]
    rolls: list[RollFill]
    point_value: float

    @property
    def total_pnl(self) -> float:
        return float(self.pnl.sum())

    @property
    def costs(self) -> float:
        return sum(leg.commission + leg.slippage for leg in self.legs)

    def leg_pnls(self) -> list[float]:
        return [leg.pnl(self.point_value) for leg in self.legs]


class RollingBacktest:
    """Backtests of table policies on a continuous series, filled in its contracts.

    `env_config` gives the contract sizes, the action table and the slippage (the engine's);
    `costs=False` sets commission and slippage to 0. Session-end flattens and trailing stops
    are not rolled yet: a config or policy that needs them is refused."""

    def __init__(self, series: ContinuousSeries, instrument: Instrument,
                 env_config: EnvConfig | None = None, *, costs: bool = True,
                 capital: float = 100_000.0):
        self.series, self.instrument = series, instrument
        self.env_config = env_config or EnvConfig()
        if self.env_config.flatten_at_session_end:
            raise ConfigError("rolling backtest: flatten_at_session_end is not supported across "
                              "rolls yet; set [env] flatten_at_session_end = false")
        if len(series.bars) < 2:
            raise ConfigError(f"rolling backtest: {series.root} has {len(series.bars)} bars; "
                              "a decision needs the bar after it")
        self.capital = capital
        self.cost = (CostModel.from_instrument(instrument, self.env_config.slippage_ticks)
                     if costs else CostModel(instrument.tick_size, instrument.point_value, 0.0,
                                             0.0))
        self.prices = tradable(series.raw, instrument.tick_size)
        self.symbols = [series.contracts[i].symbol for i in series.contract]
        self.roll_at = {r.bar: r for r in series.rolls}

    def targets(self, policy: TablePolicy) -> np.ndarray:
        """Signed contracts decided at each bar's close, from the policy's table on the
        continuous series' closes (what it sees), decoded as the engine decodes them."""
        table = np.asarray(policy.table(self.series.bars.close))
        armed = (table[:, 0] != 0) & (np.array([0.0, *self.env_config.stop_atr_multiples])
                                       [table[:, 2]] > 0)
        if armed.any():
            raise ConfigError("rolling backtest: trailing stops are not supported across rolls "
                              f"yet (the policy arms one at bar {int(np.argmax(armed))})")
        code = (table[:, 0].astype(np.int64) * N_CHOICES + table[:, 1]) * N_CHOICES + table[:, 2]
        every = ActionTable(self.env_config, "cpu").decode(
            unflatten_actions(torch.arange(N_CHOICES ** 3)))[0]
        return every.numpy()[code]

    def run(self, policy: TablePolicy, name: str | None = None,
            window: tuple[int, int] | None = None) -> RollingResult:
        return self.run_targets(self.targets(policy), name or policy.label, window)

    def run_targets(self, targets: np.ndarray, name: str = "targets",
                    window: tuple[int, int] | None = None,
                    capital: float | None = None) -> RollingResult:
        """`targets[t]`: signed contracts decided at the close of bar t (the module's step
        order), over bars [first, stop) of the series (default: all), from `capital`
        (default: the backtest's)."""
        n = len(self.series.bars)
        first, stop = window or (0, n)
        if not 0 <= first < stop <= n or stop - first < 2:
            raise ConfigError(f"{name}: window [{first}, {stop}) must lie inside [0, {n}) and "
                              "hold a decision and the bar after it")
        targets = np.asarray(targets, dtype=np.float64)
        if targets.shape != (n,):
            raise ConfigError(f"{name}: {targets.shape[0] if targets.ndim else 0} targets for "
                              f"{n} bars")
        p, pv = self.prices, self.cost.point_value
        capital = self.capital if capital is None else capital
        book = Book(0.0, 0.0, capital)
        legs: list[Leg] = []
        rolls: list[RollFill] = []
        T = stop - first
        equity, position = np.empty(T), np.zeros(T)
        equity[0] = capital

        def fill(qty: float, ref: float, ts: int, kind: str, contract: str) -> fills.Fill:
            nonlocal book
            done = fills.execute(book, qty, ref, self.cost, xp=fills.SCALAR)
            book = done.book
            if not legs or legs[-1].contract != contract or _flat(legs[-1]):
                legs.append(Leg(contract))
            fee = abs(qty) * self.cost.commission
            legs[-1].fills.append(LegFill(ts, qty, done.price, ref, fee, done.cost - fee, kind))
            return done

        for t in range(first + 1, stop):
            ts, contract = int(p.ts[t]), self.symbols[t]
            want = float(targets[t - 1])
            roll = self.roll_at.get(t)
            if roll is not None and book.position != 0:
                held = book.position
                out = fill(-held, roll.from_price, ts, "roll out", self.symbols[t - 1])
                into = fill(want, roll.to_price, ts, "roll in", contract) if want else None
                rolls.append(RollFill(roll.decision.day.isoformat(), roll.decision.from_symbol,
                                      roll.decision.to_symbol, ts, -held, want, out.price,
                                      into.price if into else 0.0,
                                      out.cost + (into.cost if into else 0.0)))
            elif want != book.position:
                fill(want - book.position, float(p.open[t]), ts, "order", contract)
            if t == stop - 1 and book.position != 0:
                fill(-book.position, float(p.close[t]), ts, "final", contract)
            equity[t - first] = book.cash + book.position * float(p.close[t]) * pv
            position[t - first] = book.position
        pnl = np.diff(equity, prepend=capital)
        return RollingResult(name, self.series.root, (first, stop), capital,
                             p.ts[first:stop].copy(), self.symbols[first:stop], pnl, equity,
                             position, legs, rolls, pv)

    def refill(self, results: list[BacktestResult],
               periods_per_year: float | None = None) -> list[BacktestResult]:
        """Each of the engine's `results` on `series.bars` filled again in the traded
        contracts: the decisions the engine recorded (`actions`: the policy on the continuous
        series, its book the engine's, as paper's mirror decides) replayed here over the same
        window from the same capital, so fills, marks, PnL and trades are the contracts' own
        and each roll pays its two legs. The shaping components (drawdown penalty, hold cost,
        close bonus) stay the engine's; `pnl` and `cost` are the rolled ones; `close` is the
        traded contract's own close. Each result's metrics gain `rolls` (the rolls that moved
        a position) and `roll_costs` (their legs' commission and slippage), and its `engine`
        those rolls' rows."""
        return [self._refill(r, periods_per_year) for r in results]

    def _refill(self, result: BacktestResult, periods_per_year: float | None) -> BacktestResult:
        first, stop = result.window
        table = np.zeros((len(self.series.bars), 3), dtype=np.uint8)
        table[first:stop] = result.actions
        run = self.run_targets(self.targets(ActionReplay(table, label=result.name)),
                               result.name, result.window, result.capital)
        done = [f for leg in run.legs for f in leg.fills]
        cost = np.bincount(np.searchsorted(run.ts, [f.ts for f in done]).astype(np.int64),
                           weights=[f.commission + f.slippage for f in done],
                           minlength=stop - first).astype(np.float64)
        components = {**result.components, "pnl": run.pnl + cost, "cost": cost,
                      "stop": np.zeros(stop - first)}
        new = BacktestResult(
            name=result.name, symbol=result.symbol, window=result.window,
            capital=result.capital, costs=result.costs, ts=run.ts,
            close=self.prices.close[first:stop].copy(), pnl=run.pnl, equity=run.equity,
            position=run.position, actions=result.actions, components=components,
            trades=self._trades(run),
            engine={**result.engine, "rolls": [_roll_row(r) for r in run.rolls]})  # fmt: skip
        new.metrics = compute_metrics(new, periods_per_year, self.instrument.session)
        new.metrics.update(rolls=len(run.rolls), roll_costs=float(sum(r.cost for r in run.rolls)))
        return new

    def _trades(self, run: RollingResult) -> Trades:
        """The round trips of each leg (a roll's out leg ends one, its in leg opens the next),
        in entry order; bars index the continuous series."""
        ts, cost = self.prices.ts, self.cost

        def trades(fills_: list[LegFill]) -> Trades:
            return extract_trades(
                np.searchsorted(ts, [f.ts for f in fills_]),
                [EXIT_REASONS.index("end" if f.kind == "final" else "signal") for f in fills_],
                [f.qty for f in fills_], [f.price for f in fills_],
                [f.commission + f.slippage for f in fills_],
                ts=ts, commission=cost.commission, point_value=cost.point_value)

        parts = [trades(leg.fills) for leg in run.legs] or [trades([])]
        cols = {k: np.concatenate([p[k] for p in parts]) for k in TRADE_COLUMNS}
        order = np.argsort(cols["entry_bar"], kind="stable")
        return Trades({k: v[order] for k, v in cols.items()})


def _flat(leg: Leg) -> bool:
    return sum(f.qty for f in leg.fills) == 0


def stored_continuous(store, instrument: Instrument, spec: str, frame: Bars
                      ) -> tuple[ContinuousSeries, list[ContractSeries]] | None:  # fmt: skip
    """The continuous series stored as `instrument` in bar spec `spec` (`frame`, its stored
    bars), rebuilt from its contract months by its own rule, and those months: None when that
    series is no continuous one. Refused in one line when the months stored now are not the
    ones it was built from, or the rebuild's bars differ from the stored ones. (What
    `paper.rolling.stored_plan` checks too; its plan is `RollPlan.of` of these.)"""
    root = instrument.symbol
    derivation = store.continuous(root, spec)
    if derivation is None:
        return None
    _, stored, _ = stored_contract_series(store, root, derivation["bars"])
    used = [c["symbol"] for c in derivation["contracts"]]
    months = [s for s in stored if s.symbol in used]
    rebuild = f"rebuild it (foxhunt data continuous {root} --roll {derivation['roll']} " \
              f"--adjust {derivation['adjust']})"
    if [s.symbol for s in months] != used or fingerprint(months) != derivation["fingerprint"]:
        raise ConfigError(f"{root}: the contract months stored now are not the ones its "
                          f"continuous series was built from; {rebuild}")
    series = build_continuous(months, RollRule(**{k: derivation[k] for k in RollRule.model_fields}),
                              instrument)
    if not np.array_equal(series.bars.ts, frame.ts):
        raise ConfigError(f"{root}: the stored continuous series' bars differ from a rebuild "
                          f"from its months; {rebuild}")
    return series, months


def _roll_row(r: RollFill) -> dict:
    return {"decided": r.decided, "from": r.from_symbol, "to": r.to_symbol, "ts": r.ts,
            "qty_out": r.qty_out, "qty_in": r.qty_in, "out_price": r.out_price,
            "in_price": r.in_price, "cost": r.cost}
