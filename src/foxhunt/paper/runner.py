"""The paper-trading loop: stored bars in as a feed, the policy's decisions through risk and
the OMS to the simulated venue, every step in the durable event log; restartable after a crash.

Per bar t (stamped at its close), in the env's step order:
1. the venue meets bar t: market orders fill at its open, then stops inside it (reports go to
   the OMS, whose log records them);
2. at a session end (with `env.flatten_at_session_end`) and at the window's last bar, the stop
   is canceled and an at-the-close order flattens the position at the close of bar t;
3. the close is marked (applied at once, the breakers run; logged with the next append, so a
   bar with no order costs no transaction: see FLUSH_MARKS);
4. the mirror of the env's book takes bar t's fills (position features, stop trailing);
5. at a decision bar (first .. stop-2) the policy decides on the features up to t and the
   position features; the market order for target - position goes to the OMS (risk, log,
   venue), and the protective stop order is placed, moved or canceled to match the env's stop.
A decision made at the close of bar t fills at the open of bar t+1, as in the env.

Client order ids come from the bar (P<t> the decision's order, S<t> a stop placed at t, F<t> an
at-the-close flatten), so every step can run twice without doing anything twice: the OMS keeps
one order per id, the venue ignores a bar or an id it has seen, a mark with the same time is
one event. That is what crash recovery stands on (`PaperTrader.run` with a log and a venue
journal that already hold a run):
- the engine folds the log; the venue rebuilds itself from its journal;
- reconciliation: every report the venue ever sent is offered to the OMS (those in the log are
  recognised by event id and ignored, the others are applied: the fills of a crash between the
  venue and the log); orders the log sent but the venue never took (a crash between the
  append and the send) are sent; cancels and updates the venue never saw are sent again; then
  the venue's working orders and positions must equal the log's, or the run refuses to start;
- the bars before the last marked one are replayed without acting (features, decisions and the
  mirror rebuilt from the log's fills), and the loop goes on live from the last marked bar.

A run over a continuous series holds its position in the contract months and rolls it
(`paper.rolling.RollingPaperTrader`, on the hooks `traded_contracts`, `_held`, `_meet_bar`,
`_before_decision`); a roll's legs (R-<from>-<to>-out|in) reach the env's mirror as their net.
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from foxhunt.backtest.trades import EXIT_REASONS, Trades, extract_trades
from foxhunt.data.grid import tradable
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import CostModel
from foxhunt.env.market import average_true_range, dollar_volatility, session_ends
from foxhunt.errors import ConfigError
from foxhunt.execution.engine import TradingEngine
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.execution.store import EventStore, SeqTakenError
from foxhunt.orders.contract import Contract, money_text
from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.errors import TradingError
from foxhunt.orders.events import OrderFilled, OrderPendingUpdate
from foxhunt.orders.order import Order, OrderRequest
from foxhunt.orders.state import OrderStatus
from foxhunt.paper.mirror import CLOSE, MARKET, STOP, EnvMirror
from foxhunt.paper.policy import AgentDecider, RuleDecider
from foxhunt.portfolio.events import PriceMarked
from foxhunt.risk.config import RiskConfig
from foxhunt.risk.engine import Limits

FLUSH_MARKS, FLUSH_SECONDS = 1024, 1.0
"""A quiet bar's mark waits for the next append (an order, a fill, a breaker) or for one of
these: so many marks held, or so long since the last append. A crash loses only marks, and
the bars after the log's last one are run again on resume, marking them again."""
STOP_TAG = "stop"
FLATTEN_TAG = "flatten"
ROLL = "roll"
"""The kind of a roll leg's fill (client order id R-<from>-<to>-out|in: `execution.roller`)."""
_KIND = {"P": MARKET, "K": MARKET, "S": STOP, "F": CLOSE, "R": ROLL}
_RANK = {MARKET: 0, STOP: 1, CLOSE: 2}


class ReconciliationError(TradingError):
    """The venue's record and the event log disagree after a restart; nothing was traded."""


@dataclass(frozen=True)
class PaperFill:
    bar: int
    ts_ns: int
    client_order_id: str
    kind: str  # market, stop, close, roll
    quantity: int  # signed
    price: Decimal
    commission: Decimal
    symbol: str = ""  # the contract it filled in


@dataclass
class PaperResult:
    symbol: str
    policy: str
    window: tuple[int, int]  # (first decision bar, stop)
    starting_cash: Decimal
    equity: Decimal
    position: int
    fills: list[PaperFill]
    orders: int
    denied: int
    resumed_from: int | None
    reconciled: dict[str, int] = field(default_factory=dict)
    rolls: list[str] | None = None  # a run over a continuous series: each roll's line

    @property
    def pnl(self) -> Decimal:
        return self.equity - self.starting_cash

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol, "policy": self.policy, "window": list(self.window),
            "starting_cash": money_text(self.starting_cash), "equity": money_text(self.equity),
            "pnl": money_text(self.pnl), "position": self.position, "fills": len(self.fills),
            "orders": self.orders, "denied": self.denied, "resumed_from": self.resumed_from,
            "reconciled": self.reconciled,
            **({} if self.rolls is None else {"rolls": self.rolls}),
        }  # fmt: skip


def _column(values: np.ndarray, dtype: type) -> memoryview:
    """A column read element by element as Python numbers (indexing a memoryview gives an int,
    float or bool at a third of a numpy scalar's cost)."""
    return memoryview(np.ascontiguousarray(values, dtype=dtype))


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def reconcile(engine: TradingEngine, venue: SimulatedVenue, symbol: str | Collection[str], *,
              on_fill: Callable[[OrderFilled], None] | None = None) -> dict[str, int]:
    """Make the log and the venue agree after a restart, or refuse (`ReconciliationError`).

    Every report the venue ever sent is offered to the OMS (those in the log are recognised by
    event id, the others, a crash's lost fills, are applied); orders the log sent that the
    venue never took are sent; cancels and updates it never answered are sent again. Then the
    working orders and the position of each symbol (one, or a root's contract months) must be
    the same on both sides."""
    symbols = (symbol,) if isinstance(symbol, str) else tuple(symbol)
    counts = {"reports_applied": 0, "orders_sent": 0, "requests_sent": 0}

    def deliver(report) -> bool:
        event = engine.on_report(report)
        if isinstance(event, OrderFilled) and on_fill is not None:
            on_fill(event)
        return event is not None

    for report in list(venue.history):
        counts["reports_applied"] += deliver(report)
    for order in [o for o in engine.book.working() if o.symbol in symbols]:
        if order.client_order_id not in venue.known:
            engine._call_venue("submit", order)
            counts["orders_sent"] += 1
        elif order.status is OrderStatus.PENDING_CANCEL:
            engine._call_venue("cancel", order)
            counts["requests_sent"] += 1
        elif order.status is OrderStatus.PENDING_UPDATE:
            # an update the venue never answered: ask for what the log says was asked
            counts["requests_sent"] += 1
            engine._call_venue("modify", order, None, None, _asked_stop(engine, order))
    for report in venue.reports():
        deliver(report)
    working = {o.client_order_id for o in engine.book.working() if o.symbol in symbols}
    if working != set(venue.working):
        raise ReconciliationError(
            f"working orders differ after reconciliation: the log has {sorted(working)}, "
            f"the venue {sorted(venue.working)}; refusing to trade")
    for sym in symbols:
        pos, theirs = engine.account.position(sym), venue.positions.get(sym, 0)
        if pos != theirs:
            raise ReconciliationError(
                f"{sym} position differs after reconciliation: the log has {pos:+d}, "
                f"the venue {theirs:+d}; refusing to trade")
    return counts


def _asked_stop(engine: TradingEngine, order: Order) -> int | None:
    """The stop price of the order's last update request, from the log."""
    stop = None
    for _, event in engine.store.read():
        if isinstance(event, OrderPendingUpdate) and event.client_order_id == order.client_order_id:
            stop = event.stop_ticks
    return stop


class BarSteps(ABC):
    """The per-bar steps paper and live trading share: a bar's fills into the env's mirror, the
    policy's decision, its market order and protective stop through the OMS, the flatten at a
    session's close. A subclass says where bars and reports come from: `PaperTrader` (stored
    bars, the simulated venue it drives) and `live.LiveTrader` (a feed, a venue outside).

    It needs: `engine`, `venue`, `symbol`, `contract`, `decider`, `env`, `mirror`, and the
    per-bar columns `_ts`, `_opens`, `_highs`, `_lows`, `_closes`, `_atr`, `_scale` (indexable
    by bar)."""

    engine: TradingEngine | None
    defer_reports = False  # a venue's reports go to the log at once
    fills: dict[int, list[tuple[str, int]]]
    _fill_events: list[OrderFilled]

    def _fill_bar(self, ts_ns: int) -> int:
        """The close time of the bar a fill at `ts_ns` belongs to (paper: the fill's own)."""
        return ts_ns

    def _at_close(self, ts: int, close: float) -> None:
        """The venue's close of the bar (the simulated venue fills at-the-close orders here)."""

    def _order_id(self, kind: str, t: int) -> str:
        """The client order id of bar t's order of `kind` (P market, S stop, F flatten): one
        per bar, so a step run twice sends nothing twice."""
        return f"{kind}{t}"

    # --- reports --------------------------------------------------------------------------

    def _note_fill(self, event: OrderFilled) -> None:
        self._fill_events.append(event)
        self.fills.setdefault(self._fill_bar(event.ts_ns), []).append(
            (event.client_order_id, event.signed_quantity))

    def _deliver_one(self, report):
        assert self.engine is not None
        event = self.engine.on_report(report, defer=self.defer_reports)
        if isinstance(event, OrderFilled):
            self._note_fill(event)
        return event

    def _deliver(self) -> None:
        for report in self.venue.reports():
            self._deliver_one(report)

    def _bar_fills(self, t: int) -> None:
        """Bar t's fills into the mirror, in the env's order (market, stop, close)."""
        got = self.fills.get(self._ts[t])
        c = self._closes[t]
        if got:
            bar = self._opens[t], self._highs[t], self._lows[t], c
            # the env's book holds the root: a roll's legs are one market fill of their net,
            # nothing at all when both filled in full in this bar
            kinds = [(_KIND[cid[0]], qty) for cid, qty in got]
            rolled = sum(qty for kind, qty in kinds if kind == ROLL)
            kinds = [k for k in kinds if k[0] != ROLL] + ([(MARKET, rolled)] if rolled else [])
            for kind, qty in sorted(kinds, key=lambda k: _RANK[k[0]]):
                self.mirror.fill(kind, float(qty), *bar)
        self.mirror.close_bar(c, self._atr[t])

    def _decide(self, t: int):
        close, atr = self._closes[t], self._atr[t]
        state = self.mirror.pos_state(close, self._scale[t], atr)
        action = self.decider.act(t, state)
        decision = self.mirror.decode(action, close, atr)
        self.mirror.decide(decision)
        return decision

    def _flush(self) -> None:
        assert self.engine is not None
        self.engine.flush()
        self._flushed = time.monotonic()

    def _flatten_at_close(self, t: int, ts: int, close: float) -> None:
        eng = self.engine
        assert eng is not None
        for order in self._stops():
            eng.cancel(order.client_order_id, ts)
        self._deliver()
        pos = eng.account.position(self.symbol)
        if pos:
            eng.submit(OrderRequest(self.symbol, Side.of(-pos), abs(pos),
                                    time_in_force=TimeInForce.ATC, reduce_only=True,
                                    client_order_id=self._order_id("F", t), tag=FLATTEN_TAG), ts)
            self._deliver()
        self._at_close(ts, close)

    def _stops(self) -> list[Order]:
        assert self.engine is not None
        return [o for o in self.engine.book.working(self.symbol)
                if o.tag == STOP_TAG and o.status is not OrderStatus.PENDING_CANCEL]

    def _act(self, t: int, ts: int, decision) -> None:
        """The decision's market order, then the stop that protects what it leaves. Stops that
        will not be wanted are canceled first, so that an exit is never read as adding to a
        position the stop already covers (exits always pass risk; a covered one would not)."""
        eng, sym = self.engine, self.symbol
        assert eng is not None
        pos, pending = self._held()
        delta = int(decision.target) - pos - pending
        self._cancel_stops_but(ts, self._stop_size(decision, pos + pending + delta))
        planned = pos + pending
        if delta:
            order = eng.submit(OrderRequest(sym, Side.of(delta), abs(delta),
                                            client_order_id=self._order_id("P", t),
                                            tag=self.decider.label), ts)
            self._deliver()
            if order.status is not OrderStatus.DENIED:
                planned += order.quantity * order.side.sign
        self._place_stop(t, ts, decision, self._stop_size(decision, planned))
        self._deliver()

    def _held(self) -> tuple[int, int]:
        """(the position, the working market orders' signed contracts) a decision trades from."""
        eng, sym = self.engine, self.symbol
        assert eng is not None
        return eng.account.position(sym), sum(o.signed_leaves for o in eng.book.working(sym)
                                              if o.order_type is OrderType.MARKET)

    @staticmethod
    def _stop_size(decision, planned: int) -> tuple[Side, int] | None:
        """The env's stop for a planned position: (side, contracts), or None."""
        if decision.armed and planned != 0 and _sign(planned) == decision.side:
            return Side.of(-planned), abs(planned)
        return None

    def _cancel_stops_but(self, ts: int, size: tuple[Side, int] | None) -> None:
        eng = self.engine
        assert eng is not None
        for order in self._stops():
            if size is None or (order.side, order.quantity - order.filled_qty) != size:
                eng.cancel(order.client_order_id, ts)
                self._deliver()

    def _place_stop(self, t: int, ts: int, decision, size: tuple[Side, int] | None) -> None:
        """Make the working stop order the env's stop: move the one of that size to its level,
        cancel the others, or place a new one."""
        eng, sym = self.engine, self.symbol
        assert eng is not None
        ticks = None if size is None else self.contract.to_ticks(decision.level)
        for order in self._stops():
            if size is not None and (order.side, order.quantity - order.filled_qty) == size:
                if order.stop_ticks != ticks:
                    eng.modify(order.client_order_id, ts, stop_price=self.contract.price(ticks))
                    self._deliver()
                size = None
            else:
                eng.cancel(order.client_order_id, ts)
                self._deliver()
        stop_id = self._order_id("S", t)
        if size is not None and stop_id not in eng.book:
            eng.submit(OrderRequest(sym, size[0], size[1], order_type=OrderType.STOP,
                                    stop_price=self.contract.price(ticks), reduce_only=False,
                                    client_order_id=stop_id, tag=STOP_TAG), ts)


    def _retrying(self, step: Callable[[], None]) -> None:
        """A step, run again when an operator's command (`foxhunt risk halt|kill`) took the
        log's next sequence number first: the engine folds the log again (the command
        included), `_after_operator` sends what the command asked of the venue, and the step,
        which is idempotent, runs once more."""
        for attempt in range(3):
            try:
                step()
                return
            except SeqTakenError:
                if attempt == 2:
                    raise
                assert self.engine is not None
                self.engine._refold()
                self._after_operator()

    @abstractmethod
    def _after_operator(self) -> None:
        """Reconcile after an operator's command was folded in (each trader says how)."""


class PaperTrader(BarSteps):
    """One symbol, one policy, bars [start, stop) of a stored series, one account's log."""

    def __init__(
        self,
        bars: Bars,
        instrument: Instrument,
        decider: RuleDecider | AgentDecider,
        window: tuple[int, int],
        *,
        store: EventStore,
        venue: SimulatedVenue,
        env: EnvConfig,
        risk: RiskConfig | None = None,
        account: str = "paper",
        starting_cash: Decimal = Decimal(100_000),
        speed: float | None = None,
        progress: Callable[[int, int], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.bars, self.inst, self.decider = bars, instrument, decider
        self.symbol = instrument.symbol
        self.contract = Contract.from_instrument(instrument)
        self.env, self.store, self.venue = env, store, venue
        self.risk = risk or RiskConfig()
        self.account, self.starting_cash = account, Decimal(starting_cash)
        self.speed, self.progress, self.sleep = speed, progress, sleep
        self.first = self.validate(bars, self.contract, decider, window, self.risk,
                                   self.traded_contracts())
        self.lo, self.hi = window
        self.steps = self.hi - 1 - self.first
        if isinstance(decider, AgentDecider):
            decider.set_steps(self.steps)
        prices = tradable(bars, instrument.tick_size)  # what the env trades (MarketTensors)
        self.atr = average_true_range(prices, env.atr_window, instrument.tick_size)
        floor = env.reward_scale_floor_ticks * instrument.tick_value
        self.scale = dollar_volatility(prices.close, env.reward_vol_window, instrument.point_value,
                                       floor)
        self.session_end = session_ends(bars.ts, instrument.session)
        # the per-bar reads as Python numbers without numpy scalars (zero-copy views)
        self._ts, self._opens, self._highs, self._lows, self._closes = (
            _column(bars.ts, np.int64), *(_column(getattr(prices, k), np.float64)
                                          for k in ("open", "high", "low", "close")))
        self._atr, self._scale = _column(self.atr, np.float64), _column(self.scale, np.float64)
        self._session_end = _column(self.session_end, np.bool_)
        self.mirror = EnvMirror(env, CostModel.from_instrument(instrument, env.slippage_ticks),
                                self.steps)
        self.fills: dict[int, list[tuple[str, int]]] = {}  # ts -> (client order id, signed qty)
        self._fill_events: list[OrderFilled] = []  # the log's fills, in its order
        self.engine: TradingEngine | None = None
        self._flushed = time.monotonic()

    @staticmethod
    def validate(bars: Bars, contract: Contract, decider: RuleDecider | AgentDecider,
                 window: tuple[int, int], risk: RiskConfig | None = None,
                 contracts: Mapping[str, Contract] | None = None) -> int:  # fmt: skip
        """Check a run's inputs before anything is opened or written; its first decision bar.
        `contracts`: all the run may hold (default: `contract` alone)."""
        if risk is not None:
            Limits(risk, contracts or {contract.symbol: contract})
        lo, hi = window
        if not 0 <= lo < hi <= len(bars):
            raise ConfigError(f"paper window [{lo}, {hi}) must lie inside the {len(bars)} bars")
        first = max(lo, decider.first)
        if hi - first < 2:
            raise ConfigError(f"paper window [{lo}, {hi}) leaves no decision: {decider.label} "
                              f"acts from bar {decider.first}; widen the window")
        return first

    # --- start, reconcile -----------------------------------------------------------------

    def _open(self) -> tuple[int, dict[str, int]]:
        """Fold the log, reconcile with the venue; the first bar to run live."""
        traded = self.traded_contracts()
        self.engine = TradingEngine.open(
            self.store, traded, self.risk, account=self.account,
            currency=self.contract.currency, starting_cash=self.starting_cash,
            ts_ns=int(self.bars.ts[self.lo]), venue=self.venue)  # fmt: skip
        last_mark = None
        for _, event in self.store.read():
            if isinstance(event, OrderFilled):
                self._note_fill(event)
            elif isinstance(event, PriceMarked) and event.symbol in traded:
                last_mark = event.ts_ns
        counts = self._reconcile()
        # the last bar the run reached: its mark, or the fills of the next bar when the run
        # stopped between the venue's fills and that bar's mark (fills come first in a bar)
        last = max([last_mark or -1, *self.fills])
        if last < 0:
            return self.lo, counts
        t = int(np.searchsorted(self.bars.ts, last))
        if t >= len(self.bars) or self.bars.ts[t] != last or not self.lo <= t < self.hi:
            raise ReconciliationError(
                f"the log's last bar ({last}) is not a bar of this paper window; resume "
                "with the same symbol, bars and --from/--to")
        return t, counts

    def traded_contracts(self) -> dict[str, Contract]:
        """The contracts this run may hold (the engine's and the venue's)."""
        return {self.symbol: self.contract}

    def _after_operator(self) -> None:
        self._reconcile()

    def _reconcile(self) -> dict[str, int]:
        assert self.engine is not None
        return reconcile(self.engine, self.venue, list(self.traded_contracts()),
                         on_fill=self._note_fill)

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> PaperResult:
        live_from, counts = self._open()
        resumed = live_from if live_from > self.lo else None
        bars = self.bars
        began, t0 = time.monotonic(), int(bars.ts[live_from])
        for t in range(self.hi):
            self.decider.observe(t, bars)
            if t < self.lo:
                continue
            if t < live_from:
                self._replay_bar(t)
                continue
            if self.speed:
                due = (int(bars.ts[t]) - t0) / 1e9 / self.speed - (time.monotonic() - began)
                if due > 0:
                    self.sleep(due)
            self._retrying(functools.partial(self._live_bar, t))
            if self.progress is not None:
                self.progress(t + 1 - self.lo, self.hi - self.lo)
        self._flush()
        return self.result(resumed, counts)

    def _at_close(self, ts: int, close: float) -> None:
        self.venue.on_close(self.symbol, ts, close)
        self._deliver()

    def _bar_close(self, t: int) -> float:
        """Bar t's close as the venue and the marks see it."""
        return self._closes[t]

    def _replay_bar(self, t: int) -> None:
        if t > self.first:
            self._bar_fills(t)
        if self.first <= t <= self.hi - 2:
            self._decide(t)

    def _meet_bar(self, t: int, ts: int) -> None:
        """The venue meets bar t of the traded symbol; its reports go to the OMS."""
        self.venue.on_bar(self.symbol, ts, self._opens[t], self._highs[t], self._lows[t])
        self._deliver()

    def _before_decision(self, t: int, ts: int) -> None:
        """What comes between bar t's mark and its decision (a roll, in `paper.rolling`)."""

    def _live_bar(self, t: int) -> None:
        eng = self.engine
        assert eng is not None
        ts = self._ts[t]
        close = self._bar_close(t)
        if t > self.first:
            self._meet_bar(t, ts)
            last = t == self.hi - 1
            if last or (self.env.flatten_at_session_end and self._session_end[t]):
                self._flatten_at_close(t, ts, close)
            if last:  # no price comes after this close: later market orders fill at it
                self.venue.end_feed(self.symbol, ts, close)
                self._deliver()
        eng.mark(self.symbol, close, ts, defer=True)
        if t > self.first:
            self._bar_fills(t)
        if self.first <= t <= self.hi - 2:
            self._before_decision(t, ts)
            self._act(t, ts, self._decide(t))
        if eng.deferred >= FLUSH_MARKS or time.monotonic() - self._flushed >= FLUSH_SECONDS:
            self._flush()

    # --- result ---------------------------------------------------------------------------

    def trades(self, result: PaperResult) -> Trades:
        """The round trips of the paper fills, built as the backtest builds its own
        (`extract_trades`: same columns, exit reasons and cost per fill: commission plus
        slippage against the reference price). A position the run left open (a run stopped
        before its window's end) is no round trip: its fills are left out, and
        `result.position` says what is open."""
        return self._trades_of([f for f in result.fills if f.bar >= 0])

    def _trades_of(self, fills: list[PaperFill]) -> Trades:
        """`trades` of the fills of one contract, in the log's order."""
        held, closed = 0, 0
        for i, f in enumerate(fills, start=1):
            held += f.quantity
            closed = i if held == 0 else closed
        fills = fills[:closed]
        cost = self.mirror.cost
        slip = cost.slippage_whole_ticks * cost.tick_size * cost.point_value
        final = self.hi - 1
        session = self.env.flatten_at_session_end and bool(self.session_end[final])

        def reason(f: PaperFill) -> int:
            if f.kind != CLOSE:
                return EXIT_REASONS.index("stop" if f.kind == STOP else "signal")
            return EXIT_REASONS.index("end" if f.bar == final and not session else "session")

        return extract_trades(
            np.array([f.bar for f in fills], dtype=np.int64),
            np.array([reason(f) for f in fills], dtype=np.int64),
            np.array([float(f.quantity) for f in fills]),
            np.array([float(f.price) for f in fills]),
            np.array([float(f.commission) + abs(f.quantity) * slip for f in fills]),
            ts=self.bars.ts, commission=self.inst.commission, point_value=self.inst.point_value,
        )  # fmt: skip

    def result(self, resumed: int | None = None, counts: dict[str, int] | None = None
               ) -> PaperResult:
        eng = self.engine
        assert eng is not None
        fills, orders, denied = [], 0, 0
        ts = self.bars.ts
        # the log's fills, in its order: those read at the start and those applied since
        # (a fill is noted once the engine has committed it), without reading the log again
        for event in self._fill_events:
            t = int(np.searchsorted(ts, event.ts_ns))
            fills.append(PaperFill(
                t if t < len(ts) and ts[t] == event.ts_ns else -1, event.ts_ns,
                event.client_order_id, _KIND.get(event.client_order_id[0], MARKET),
                event.signed_quantity, self.contract.price(event.price_ticks),
                event.commission, event.symbol))  # fmt: skip
        for order in eng.book:
            orders += 1
            denied += order.status is OrderStatus.DENIED
        return PaperResult(self.symbol, self.decider.label, (self.first, self.hi),
                           eng.account.starting_cash, eng.account.equity(),
                           eng.account.position(self.symbol), fills, orders, denied, resumed,
                           counts or {})
