"""Paper trading over a continuous series: decisions on the stitched series, positions held in
the real contract months, and each roll done as two orders by `execution.roller`.

The policy, its features and the env's mirror read the continuous series (back-adjusted or
not), as training does; orders, fills and marks are in the contract traded at each bar, at its
own prices (`ContinuousSeries.raw`). At the close of the bar before a roll bar (the roll table's:
decided at the close of a trading day from the data up to it, acting at the first bar after it
at which both contracts trade) the position held in the old contract starts its roll
(`RollStarted`, then the out leg); the decision of that close goes to the new contract. At the
roll bar the venue meets the old contract's own bar first (the out leg fills at its open, the
roll table's `from_price`), the roller sends the in leg, then the venue meets the new
contract's bar (the in leg and the decision's order fill at its open, `to_price`): the fills of
`backtest.rolling.RollingBacktest`.

A decision trades from the root's position: the contracts held in every month, the working
market orders that are not roll legs, and the contracts a roll has closed and not yet opened,
so a roll in flight is neither doubled nor undone by the policy.

After a restart the reconciliation covers every month (`paper.runner.reconcile`), and the
roller then sends an open roll's missing leg once, or ends it with one line (`RollFailed`).
Trailing stops and session-end flattens across rolls are refused, as the rolling backtest
refuses them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from foxhunt.backtest.rolling import stored_continuous
from foxhunt.backtest.trades import TRADE_COLUMNS, Trades
from foxhunt.data.continuous import (
    ContinuousSeries,
    ContractSeries,
)
from foxhunt.data.grid import tradable
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.errors import ConfigError
from foxhunt.execution.roller import Roller, ScheduledRoll
from foxhunt.execution.rolls import ROLL_TAG
from foxhunt.orders.contract import Contract
from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.order import OrderRequest
from foxhunt.paper.runner import FLATTEN_TAG, PaperFill, PaperResult, PaperTrader, _column


def month_contracts(root: Contract, months: Iterable[str]) -> dict[str, Contract]:
    """Each contract month's `Contract`: the root's tick, point value and commission."""
    return {m: dataclasses.replace(root, symbol=m) for m in months}


@dataclass(frozen=True)
class RollPlan:
    """What a paper run over a continuous series needs to hold real contracts: the contract
    traded at each bar, its own prices there, each month's bars and the roll table (each roll
    keyed by the bar whose close starts it: the one before its roll bar)."""

    root: str
    symbols: tuple[str, ...]
    raw: Bars
    months: Mapping[str, Bars]
    starts: Mapping[int, ScheduledRoll]

    @classmethod
    def of(cls, series: ContinuousSeries, months: list[ContractSeries]) -> RollPlan:
        symbols = tuple(series.contracts[i].symbol for i in series.contract)
        starts = {}
        for roll in series.rolls:
            d = roll.decision
            starts[roll.bar - 1] = ScheduledRoll(
                series.root, d.from_symbol, d.to_symbol, int(series.bars.ts[roll.bar - 1]),
                f"{d.reason} (decided {d.day.isoformat()})")
        return cls(series.root, symbols, series.raw, {m.symbol: m.bars for m in months}, starts)

    def contracts(self, root: Contract) -> dict[str, Contract]:
        """The root's contract and each month's (the root's tick, point value and commission)."""
        return {root.symbol: root, **month_contracts(root, self.months)}

    def bar_of(self, symbol: str, ts: int) -> tuple[float, float, float, float] | None:
        """The month's own bar closing at `ts` (open, high, low, close), or None."""
        bars = self.months[symbol]
        i = int(np.searchsorted(bars.ts, ts))
        if i == len(bars) or bars.ts[i] != ts:
            return None
        return (float(bars.open[i]), float(bars.high[i]), float(bars.low[i]),
                float(bars.close[i]))

    def close_at(self, symbol: str, ts: int) -> float | None:
        """The month's last close at or before `ts`, or None before its first bar."""
        bars = self.months[symbol]
        i = int(np.searchsorted(bars.ts, ts, side="right")) - 1
        return None if i < 0 else float(bars.close[i])


def stored_plan(store, instrument: Instrument, spec: str, frame: Bars) -> RollPlan | None:
    """The plan of the continuous series stored as `instrument` in bar spec `spec` (`frame`,
    its bars), rebuilt from the stored contract months by its own rule
    (`backtest.rolling.stored_continuous`, whose checks refuse a stale series in one line);
    None when that series is no continuous series."""
    found = stored_continuous(store, instrument, spec, frame)
    return None if found is None else RollPlan.of(*found)


class RollingPaperTrader(PaperTrader):
    """`PaperTrader` on a continuous series whose positions are held in contract months and
    rolled by `execution.roller` (module docstring)."""

    def __init__(self, *args, plan: RollPlan, **kwargs):
        self.plan = plan  # first: the checks in PaperTrader's own start read its months
        super().__init__(*args, **kwargs)
        if len(plan.symbols) != len(self.bars):
            raise ConfigError(f"{plan.root}: the roll plan has {len(plan.symbols)} bars, the "
                              f"series {len(self.bars)}")
        if self.env.flatten_at_session_end:
            raise ConfigError("paper trading across rolls: flatten_at_session_end is not "
                              "supported yet; set [env] flatten_at_session_end = false")
        raw = tradable(plan.raw, self.inst.tick_size)
        self._raw_open, self._raw_high, self._raw_low, self._raw_close = (
            _column(getattr(raw, k), np.float64) for k in ("open", "high", "low", "close"))
        self.roller: Roller | None = None
        self.resumed: dict[str, str] = {}  # roll id -> its line when a restart found it open

    def traded_contracts(self) -> dict[str, Contract]:
        return self.plan.contracts(self.contract)

    # --- start, reconcile ---------------------------------------------------------------

    def _open(self) -> tuple[int, dict[str, int]]:
        """Fold, reconcile every month, then make each open roll's next step: the missing leg
        of a roll a crash cut is sent once, or the roll ends with its one line."""
        t, counts = super()._open()
        assert self.engine is not None
        self.roller = Roller(self.engine)
        self.symbol = self.plan.symbols[t]
        open_rolls = self.engine.rolls.open()
        if open_rolls:
            self.resumed = {r.roll_id: r.line() for r in open_rolls}
            self._advance(int(self.bars.ts[t]))
            counts = {**counts, "rolls_resumed": len(open_rolls)}
        return t, counts

    # --- the loop -------------------------------------------------------------------------

    def _live_bar(self, t: int) -> None:
        self.symbol = self.plan.symbols[t]
        super()._live_bar(t)

    def _bar_close(self, t: int) -> float:
        return self._raw_close[t]

    def _meet_bar(self, t: int, ts: int) -> None:
        """The other months with working orders (a roll's out leg) meet their own bar first,
        then the traded contract; the roller moves on after each. A month still held besides
        the traded one (what a failed roll left) is marked at its own close."""
        eng = self.engine
        assert eng is not None
        for sym in sorted({o.symbol for o in eng.book.working()} - {self.symbol}):
            bar = self.plan.bar_of(sym, ts) if sym in self.plan.months else None
            if bar is not None:
                self.venue.on_bar(sym, ts, *bar[:3])
                self._deliver()
                self._advance(ts)
        self.venue.on_bar(self.symbol, ts, self._raw_open[t], self._raw_high[t],
                          self._raw_low[t])
        self._deliver()
        self._advance(ts)
        for sym in self.plan.months:
            if sym != self.symbol and eng.account.position(sym):
                bar = self.plan.bar_of(sym, ts)
                if bar is not None:
                    eng.mark(sym, bar[3], ts, defer=True)

    def _flatten_at_close(self, t: int, ts: int, close: float) -> None:
        """The traded month flattens at its close; so does any other month still held (what
        a failed roll left there), at its own close where it has a bar."""
        super()._flatten_at_close(t, ts, close)
        eng = self.engine
        assert eng is not None
        for sym in self.plan.months:
            pos, bar = eng.account.position(sym), self.plan.bar_of(sym, ts)
            if sym == self.symbol or not pos or bar is None:
                continue
            eng.submit(OrderRequest(sym, Side.of(-pos), abs(pos), time_in_force=TimeInForce.ATC,
                                    reduce_only=True, client_order_id=f"F{t}-{sym}",
                                    tag=FLATTEN_TAG), ts)
            self._deliver()
            self.venue.on_close(sym, ts, bar[3])
            self._deliver()

    def _before_decision(self, t: int, ts: int) -> None:
        """At the close before a roll bar: start the roll (the new month marked at its last
        close first, for the in leg's risk checks); the decision goes to the new month."""
        roll = self.plan.starts.get(t)
        if roll is None:
            return
        eng, roller = self.engine, self.roller
        assert eng is not None and roller is not None
        price = self.plan.close_at(roll.to_symbol, ts)
        if price is not None:
            eng.mark(roll.to_symbol, price, ts, defer=True)
        roller.start(roll, ts)
        self._deliver()
        self.symbol = roll.to_symbol

    def _act(self, t: int, ts: int, decision) -> None:
        if decision.armed:
            raise ConfigError("paper trading across rolls: trailing stops are not supported "
                              f"yet (the policy arms one at bar {t})")
        super()._act(t, ts, decision)

    def _advance(self, ts: int) -> None:
        assert self.roller is not None
        self.roller.advance(ts)
        self._deliver()

    def _held(self) -> tuple[int, int]:
        """The root's position: every month's contracts, the working market orders that are
        not roll legs, and what open rolls have closed and not yet opened."""
        eng = self.engine
        assert eng is not None
        pos = sum(eng.account.position(m) for m in self.plan.months)
        pending = sum(o.signed_leaves for o in eng.book.working()
                      if o.order_type is OrderType.MARKET and o.tag != ROLL_TAG)
        in_flight = sum(r.sign * (r.out_filled - r.in_filled) for r in eng.rolls.open())
        return pos + in_flight, pending

    # --- result -----------------------------------------------------------------------------

    def result(self, resumed: int | None = None, counts: dict[str, int] | None = None
               ) -> PaperResult:
        res = super().result(resumed, counts)
        assert self.engine is not None
        res.rolls = [r.line() + (f" (after a restart; it was {self.resumed[r.roll_id]})"
                                 if r.roll_id in self.resumed else "")
                     for r in self.engine.rolls]
        return res

    def trades(self, result: PaperResult) -> Trades:
        """The round trips of each month's fills (a roll's out leg ends one, its in leg opens
        the next), in entry order."""
        by_month: dict[str, list[PaperFill]] = {}
        for f in result.fills:
            if f.bar >= 0:
                by_month.setdefault(f.symbol, []).append(f)
        parts = [self._trades_of(f) for f in by_month.values()] or [self._trades_of([])]
        cols = {k: np.concatenate([p[k] for p in parts]) for k in TRADE_COLUMNS}
        order = np.argsort(cols["entry_bar"], kind="stable")
        return Trades({k: v[order] for k, v in cols.items()})
