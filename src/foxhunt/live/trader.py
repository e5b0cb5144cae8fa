"""The live loop: paper trading's per-bar steps with a feed and a venue outside this process.

Per completed bar t from the feed (stamped at its close), as in paper trading:
1. the bar is written to the trader's bar journal (so a restart sees the same bars with the
   same indices, whatever the feed can still send);
2. the venue's reports are applied (fills during bar t belong to bar t);
3. at a session's last bar, the stop is canceled and an at-the-close order flattens the
   position (the venue fills it at that close: the local exchange holds a closing auction
   between a session's last bar and the next one; the loop waits for the fill, bounded);
4. the close is marked, bar t's fills go into the mirror of the env's book, and the policy
   decides on the features up to t; the market order for target - position goes through risk,
   the log and the venue, with the protective stop.

Between bars the loop applies reports as they come, watches the price's age (a bar later than
`stale_after_s` past its due time marks the symbol stale: orders that add risk are denied,
orders that reduce it pass), and watches the log for an operator's command (`foxhunt risk
halt|kill` from another terminal): the engine folds the log again and sends what the command
asked of the venue (the kill switch's cancels and flatten orders) within `poll_s`.

A start, and every reconnect, reconciles first (`live.reconcile`): nothing is traded until the
venue's orders and positions agree with the log, and a mismatch leaves the account REDUCING or
HALTED with one line saying what differs. A restart replays the journal's bars without acting
(features, decisions, the mirror rebuilt from the log's fills) and goes on live from the last
one, whose steps are idempotent (client order ids come from the bar: P<t>, S<t>, F<t>).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from foxhunt.backtest.strategies import TablePolicy
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import CostModel
from foxhunt.execution import venue as v
from foxhunt.execution.engine import TradingEngine
from foxhunt.execution.store import EventLogError, EventStore
from foxhunt.fileio import read_json_lines
from foxhunt.live.feed import Feed, FeedEnded, FeedError, LiveBar
from foxhunt.live.market import LiveMarket
from foxhunt.live.reconcile import NEVER_REACHED, Reconciliation, reconcile_live
from foxhunt.live.rules import rule_rows
from foxhunt.orders.contract import Contract, money_text
from foxhunt.orders.enums import OrderType
from foxhunt.orders.errors import TradingError
from foxhunt.orders.events import OrderFilled
from foxhunt.orders.state import OrderStatus
from foxhunt.paper.mirror import EnvMirror
from foxhunt.paper.policy import AgentDecider, RuleDecider
from foxhunt.paper.runner import FLUSH_MARKS, FLUSH_SECONDS, BarSteps
from foxhunt.risk.config import RiskConfig
from foxhunt.risk.engine import Limits


class LiveRuleDecider:
    """A rule strategy on the growing bars: row t of its table, computed as bar t arrives from
    the closes so far (`live.rules`: O(1) a bar, bit for bit the batch table's row)."""

    def __init__(self, policy: TablePolicy):
        self.label, self.first, self.policy = policy.label, policy.first_bar(), policy
        self.rows = rule_rows(policy)

    def observe(self, t: int, bars: Bars) -> None:
        rows, close = self.rows, bars.close
        for i in range(len(rows), t + 1):
            rows.push(close[i])

    def act(self, t: int, pos_state: Any) -> tuple[int, int, int]:
        return self.rows.row(t)


@dataclass
class LiveResult:
    symbol: str
    policy: str
    venue: str
    bars: int  # live bars this run handled
    starting_cash: Decimal
    equity: Decimal
    position: int
    orders: int
    fills: int
    denied: int
    refused_reports: int
    reconciliations: list[Reconciliation] = field(default_factory=list)
    trading_state: str = ""
    ended: str = ""

    @property
    def pnl(self) -> Decimal:
        return self.equity - self.starting_cash

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol, "policy": self.policy, "venue": self.venue,
            "bars": self.bars, "starting_cash": money_text(self.starting_cash),
            "equity": money_text(self.equity), "pnl": money_text(self.pnl),
            "position": self.position, "orders": self.orders, "fills": self.fills,
            "denied": self.denied, "refused_reports": self.refused_reports,
            "trading_state": self.trading_state, "ended": self.ended,
            "reconciliations": [r.to_json() for r in self.reconciliations],
        }  # fmt: skip


class BarJournal:
    """The live bars a trader has handled, one JSON line each, flushed before the bar is acted
    on (a killed process loses none; a power cut may lose the tail, which the log then names).
    `read` comes before the first `append` (it cuts a line a crash tore)."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None

    def read(self) -> list[LiveBar]:
        bars: list[LiveBar] = []

        def take(rec: Any) -> None:
            bars.append(LiveBar(rec["symbol"], int(rec["ts"]), *map(float, rec["ohlcv"])))

        read_json_lines(self.path, take, lambda m: FeedError(f"bar journal {m}"))
        return bars

    def append(self, bar: LiveBar) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        line = json.dumps({"symbol": bar.symbol, "ts": bar.ts_ns,
                           "ohlcv": [bar.open, bar.high, bar.low, bar.close, bar.volume]})
        os.write(self._fd, (line + "\n").encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LiveTrader(BarSteps):
    """One symbol, one policy, one account's log, a live venue and a feed."""

    # A live venue journals every report before it acknowledges it, and reconciliation offers
    # the journal to the log on every start: a report can ride on the next append (the
    # decision's order, one transaction) instead of costing a transaction of its own.
    defer_reports = True
    foreign_check_s = 0.25  # how often the log is asked whether an operator wrote to it

    def __init__(
        self,
        history: Bars,
        instrument: Instrument,
        decider: RuleDecider | AgentDecider | LiveRuleDecider,
        *,
        store: EventStore,
        venue: v.LiveVenue,
        feed: Feed,
        env: EnvConfig,
        journal: Path,
        risk: RiskConfig | None = None,
        account: str = "live",
        starting_cash: Decimal = Decimal(100_000),
        venue_label: str = "",
        on_mismatch: Literal["reduce", "halt"] = "reduce",
        bar_ns: int = 60_000_000_000,
        stale_after_s: float | None = None,
        close_wait_s: float = 5.0,
        poll_s: float = 0.05,
        connect_timeout_s: float = 10.0,
        status_timeout_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ):
        self.inst, self.decider = instrument, decider
        self.symbol = instrument.symbol
        self.contract = Contract.from_instrument(instrument)
        self.env, self.store, self.venue, self.feed = env, store, venue, feed
        self.risk = risk or RiskConfig()
        Limits(self.risk, {self.symbol: self.contract})  # a bad limit fails before any I/O
        self.account, self.starting_cash = account, Decimal(starting_cash)
        self.venue_label, self.on_mismatch = venue_label, on_mismatch
        self.bar_ns, self.poll_s, self.close_wait_s = bar_ns, poll_s, close_wait_s
        self.stale_after_s = 3 * bar_ns / 1e9 if stale_after_s is None else stale_after_s
        self.connect_timeout_s, self.status_timeout_s = connect_timeout_s, status_timeout_s
        self.clock, self.on_event = clock, on_event
        self.market = LiveMarket(history, instrument, env)
        self.history_len = len(history)
        self.journal = BarJournal(journal)
        if isinstance(decider, AgentDecider):
            decider.set_steps(env.episode_len)  # time in trade over the training episode
        self.first = max(self.history_len, decider.first)
        self.mirror = EnvMirror(env, CostModel.from_instrument(instrument, env.slippage_ticks),
                                env.episode_len)  # fmt: skip
        self.fills: dict[int, list[tuple[str, int]]] = {}
        self._fill_events: list[OrderFilled] = []
        self.engine: TradingEngine | None = None
        self._flushed = time.monotonic()
        self._bind_columns()
        self.reconciliations: list[Reconciliation] = []
        self.refused = 0
        self.live_bars = 0
        self._last_bar_wall = clock()
        self._foreign_checked = time.monotonic()

    # --- the per-bar columns BarSteps reads ---------------------------------------------------

    def _bind_columns(self) -> None:
        """Views of the market's columns read as Python numbers (as paper reads its bars);
        made again only when the buffer grows."""
        m = self.market
        if getattr(self, "_bound", None) is m.ts:
            return
        self._bound = m.ts
        self._ts, self._opens, self._highs, self._lows, self._closes, self._atr, self._scale = (
            memoryview(a) for a in (m.ts, m.t_open, m.t_high, m.t_low, m.t_close, m.atr, m.scale))

    def _fill_bar(self, ts_ns: int) -> int:
        """A fill belongs to the bar whose interval holds it: (close - bar, close]."""
        return -(-ts_ns // self.bar_ns) * self.bar_ns

    def _order_id(self, kind: str, t: int) -> str:
        """Bar t's id, or a new one where reconciliation found that the order of that id never
        reached the venue: the step run again after a crash decides afresh and sends a new
        order (the old one is known not to be at the venue: nothing is sent twice)."""
        assert self.engine is not None
        book, cid, n = self.engine.book, f"{kind}{t}", 1
        while cid in book and book.get(cid).status is OrderStatus.REJECTED and \
                book.get(cid).reason == NEVER_REACHED:  # fmt: skip
            n += 1
            cid = f"{kind}{t}.{n}"
        return cid

    def _at_close(self, ts: int, close: float) -> None:
        """The venue fills the at-the-close order at this close: wait for it, bounded."""
        eng = self.engine
        assert eng is not None
        deadline = time.monotonic() + self.close_wait_s
        while any(o.tag == "flatten" for o in eng.book.working(self.symbol)):
            if time.monotonic() > deadline:
                self._emit("warning", {"message": f"the at-the-close flatten of bar {ts} was "
                                       f"not filled within {self.close_wait_s:g}s"})
                return
            self._deliver()
            time.sleep(0.001)

    # --- reports, safely --------------------------------------------------------------------

    def _deliver_one(self, report):
        """A report the OMS refuses (an unknown order, a fill beyond the order) is logged and
        dropped: nothing is written, the session stays up."""
        try:
            return super()._deliver_one(report)
        except EventLogError:
            raise
        except (TradingError, KeyError) as exc:
            self.refused += 1
            self._emit("refused", {"report": type(report).__name__,
                                   "client_order_id": report.client_order_id, "reason": str(exc)})
            return None

    def _emit(self, kind: str, doc: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, doc)

    # --- start ------------------------------------------------------------------------------

    def _open(self) -> None:
        ts0 = int(self.market.ts[self.history_len - 1]) if self.history_len else 0
        self.engine = TradingEngine.open(
            self.store, {self.symbol: self.contract}, self.risk, account=self.account,
            currency=self.contract.currency, starting_cash=self.starting_cash, ts_ns=ts0,
            venue=self.venue)  # fmt: skip
        for _, event in self.store.read():
            if isinstance(event, OrderFilled):
                self._note_fill(event)
        for t in range(self.history_len):  # the warm-up: features over the stored history
            self.decider.observe(t, self.market.bars)
        self.venue.connect(self.connect_timeout_s)
        self._reconcile("start")
        bars = self.journal.read()  # the bars of earlier runs: replayed without acting
        for i, bar in enumerate(bars):
            t = self.market.append(bar)
            self._bind_columns()
            self.decider.observe(t, self.market.bars)
            if i < len(bars) - 1:
                if t > self.first:
                    self._bar_fills(t)
                if t >= self.first:
                    self._decide(t)
            else:  # the last one again, live: its steps are idempotent, and a crash may have
                self._live_bar(t)  # cut them short (a decision made, its order not sent)

    def _reconcile(self, why: str) -> None:
        assert self.engine is not None
        rec = reconcile_live(self.engine, self.venue, self.symbol, on_mismatch=self.on_mismatch,
                             on_fill=self._note_fill, why=why, ts_ns=self._now_ts(),
                             timeout_s=self.status_timeout_s)
        self.reconciliations.append(rec)
        self._emit("reconciled", rec.to_json())
        if self.engine.risk.state.kill_active:  # an operator's kill sized from the log before
            self.engine._enforce_kill(self._now_ts())  # this trader's last fills reached it

    def _now_ts(self) -> int:
        n = self.market.n
        return int(self.market.ts[n - 1]) if n else 0

    # --- the loop ---------------------------------------------------------------------------

    def run(self, max_bars: int | None = None, until: Callable[[], bool] | None = None
            ) -> LiveResult:  # fmt: skip
        """Trade until the feed ends, `max_bars` live bars were handled, or `until()` says so."""
        self._open()
        self.feed.subscribe(self.symbol)
        ended = ""
        try:
            while True:
                if max_bars is not None and self.live_bars >= max_bars:
                    ended = f"{max_bars} bars"
                    break
                if until is not None and until():
                    ended = "stopped"
                    break
                try:
                    bar = self.feed.next_bar(self.poll_s)
                    self._retrying(self._between_bars)
                    if bar is not None:
                        self._on_bar(bar)
                except FeedEnded as exc:
                    ended = str(exc) or "the feed ended"
                    break
                except KeyboardInterrupt:  # an operator's Ctrl-C: stop between two steps
                    ended = "interrupted"   # (a step cut short runs again on the next start)
                    break
            self._settle()
        finally:
            if self.engine is not None:
                self._flush()
            self.journal.close()
        return self.result(ended)

    def _settle(self, wait_s: float = 1.0) -> None:
        """At the end: the reports still on their way (a market order the venue filled at the
        end of its data), waited for a moment while market orders work."""
        eng = self.engine
        assert eng is not None
        deadline = time.monotonic() + wait_s
        while True:
            self._deliver()
            working = [o for o in eng.book.working(self.symbol) if o.order_type is OrderType.MARKET]
            if not working or time.monotonic() > deadline:
                return
            time.sleep(0.005)

    def _after_operator(self) -> None:
        self._reconcile("operator command")

    def _between_bars(self) -> None:
        eng = self.engine
        assert eng is not None
        if self.venue.take_reconnected():
            self._reconcile("reconnect")
        self._deliver()
        now = time.monotonic()
        if now - self._foreign_checked >= self.foreign_check_s:
            self._foreign_checked = now
            if eng.foreign_writes():
                eng._refold()
                self._reconcile("operator command")
        age = self.clock() - self._last_bar_wall
        stale = age > self.stale_after_s
        if stale != (self.symbol in eng.risk.stale):
            eng.set_stale(self.symbol, f"no bar for {age:.1f}s" if stale else None)
            self._emit("stale" if stale else "fresh", {"symbol": self.symbol, "age_s": age})

    def _on_bar(self, bar: LiveBar) -> None:
        if bar.symbol != self.symbol:
            return
        if self.market.n and bar.ts_ns <= self.market.ts[self.market.n - 1]:
            return  # a snapshot of a bar already handled (a re-subscription)
        self._last_bar_wall = self.clock()
        eng = self.engine
        assert eng is not None
        if self.symbol in eng.risk.stale:
            eng.set_stale(self.symbol, None)
        self.journal.append(bar)
        t = self.market.append(bar)
        self._bind_columns()
        self.decider.observe(t, self.market.bars)
        self._retrying(lambda: self._live_bar(t))
        self.live_bars += 1
        self._emit("bar", {"t": t, "ts": bar.ts_ns, "close": bar.close,
                           "position": eng.account.position(self.symbol),
                           "state": str(eng.trading_state)})

    def _live_bar(self, t: int) -> None:
        eng, sym = self.engine, self.symbol
        assert eng is not None
        ts, close = int(self._ts[t]), self._closes[t]
        self._deliver()
        if t > self.first and self.env.flatten_at_session_end and self.market.session_end[t]:
            self._flatten_at_close(t, ts, close)
        eng.mark(sym, close, ts, defer=True)
        if t > self.first:
            self._bar_fills(t)
        if t >= self.first:
            self._act(t, ts, self._decide(t))
        if (eng.deferred >= FLUSH_MARKS or time.monotonic() - self._flushed >= FLUSH_SECONDS
                or eng.holds_deferred(OrderFilled)):  # fmt: skip
            self._flush()  # a fill no order carried: in the log before the bar's step ends

    # --- result -----------------------------------------------------------------------------

    def result(self, ended: str = "") -> LiveResult:
        eng = self.engine
        assert eng is not None
        orders = denied = 0
        for order in eng.book:
            orders += 1
            denied += order.status is OrderStatus.DENIED
        return LiveResult(
            self.symbol, self.decider.label, self.venue_label, self.live_bars,
            eng.account.starting_cash, eng.account.equity(), eng.account.position(self.symbol),
            orders, len(self._fill_events), denied, self.refused, list(self.reconciliations),
            str(eng.trading_state), ended)  # fmt: skip
