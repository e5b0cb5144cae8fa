"""Pre-trade checks, circuit breakers and the kill switch of one account.

The risk engine reads the account (positions, last prices, equity) and the order book (working
orders) and owns the risk counters (`RiskState`). It decides; it never sends anything and never
changes state itself: the OMS turns its decisions into events, writes them, then applies them.

Exits always pass: an order that only reduces a position (opposite side, and with the working
orders on its side no larger than the position) is never denied by a limit or by the trading
state; HALTED and REDUCING deny new risk, not exits. An order through zero is checked for its
opening part only, and when that is denied its closing part may still go out (the OMS sends it
alone). Checks of new risk fail closed: no last price for the instrument, no returns window for
a VaR limit, an unknown instrument: deny. The kill switch's flatten orders skip every check (the
OMS never asks).

Contract months: a month (ESH24) takes its limits from its own `[risk.instruments.ESH24]`
entry, else its root's `[risk.instruments.ES]`, else the account-wide ones, and the months of
one root also meet the root's `max_position` together, on their net position (`Limits`).

Hot path: `check_order` reads plain attributes and ints (limits are compiled once from the
config); Decimal appears only in the notional check and in the text of a denial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from foxhunt.data.contracts import root_of
from foxhunt.errors import ConfigError
from foxhunt.events import Event
from foxhunt.orders.book import OrderBook
from foxhunt.orders.contract import Contract
from foxhunt.orders.enums import Side
from foxhunt.orders.events import OrderInitialized
from foxhunt.orders.order import Order
from foxhunt.orders.state import OrderStatus
from foxhunt.portfolio.account import Account
from foxhunt.risk.calendar import TradingDay
from foxhunt.risk.config import RiskConfig
from foxhunt.risk.events import (
    Cause,
    KillSwitchActivated,
    TradingDayStarted,
    TradingState,
    TradingStateChanged,
)
from foxhunt.risk.state import RiskState, check_trading_transition
from foxhunt.risk.var import ReturnsWindow

KILL_SWITCH_TAG = "kill_switch"
_ACTIVE, _HALTED = TradingState.ACTIVE, TradingState.HALTED
_REDUCING = TradingState.REDUCING
_BUY = Side.BUY


@dataclass(frozen=True, slots=True)
class RiskDenial:
    """Why an order may not go out: the limit's config key, its value, the order's figure."""

    check: str
    limit: str
    value: str
    message: str
    closing: int = 0  # contracts of the order that only reduce: they may go out alone

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class KillPlan:
    """What the kill switch does now: its events, the orders to cancel, the flatten orders
    (symbol -> signed contracts)."""

    events: list[Event] = field(default_factory=list)
    cancel: list[Order] = field(default_factory=list)
    flatten: dict[str, int] = field(default_factory=dict)


def _money(x: Decimal | float) -> str:
    return f"{x:,.2f}"


class Limits:
    """The config compiled into plain numbers per instrument, for the hot path.

    A contract month (ESH24) takes each limit from its own `[risk.instruments.ESH24]` entry,
    else from its root's `[risk.instruments.ES]`, else the account-wide value, key by key. The
    months of a root (with the root's own symbol, where the account has it) share one more
    position limit: their net position, the root's `max_position` (its entry's, else the
    account-wide value), so two months cannot together hold more of the root than one may."""

    def __init__(self, cfg: RiskConfig, contracts: Mapping[str, Contract]):
        months = {s: r for s in contracts if (r := root_of(s)) is not None}
        unknown = sorted(set(cfg.instruments) - set(contracts) - set(months.values()))
        if unknown:
            known = sorted(set(contracts) | set(months.values()))
            raise ConfigError(
                f"[risk.instruments] names unknown instrument(s) {', '.join(unknown)}; "
                f"known: {', '.join(known)} (a root's entry reaches its contract months)"
            )
        self.contracts = dict(contracts)
        self.max_order_qty: dict[str, int] = {}
        self.max_position: dict[str, int] = {}
        self.collar: dict[str, tuple[int, int]] = {}  # percent / 100 as (numerator, denominator)
        self.collar_pct: dict[str, Decimal] = {}
        for sym in contracts:
            entries = [e for e in (cfg.instruments.get(sym),
                                   cfg.instruments.get(months.get(sym, ""))) if e is not None]

            def pick(key: str, entries=entries):
                return next((v for e in entries if (v := getattr(e, key)) is not None),
                            getattr(cfg, key))

            self.max_order_qty[sym] = pick("max_order_qty")
            self.max_position[sym] = pick("max_position")
            pct = pick("price_collar_pct")
            self.collar_pct[sym] = pct
            self.collar[sym] = (pct / 100).as_integer_ratio()
        # the root aggregate: only for symbols of a root with contract months in the account
        self.root_of: dict[str, str] = {}
        self.root_members: dict[str, tuple[str, ...]] = {}
        self.root_max_position: dict[str, int] = {}
        for root in sorted(set(months.values())):
            members = tuple(sorted(s for s, r in months.items() if r == root))
            members += (root,) if root in contracts else ()
            self.root_members[root] = members
            self.root_of.update(dict.fromkeys(members, root))
            over = cfg.instruments.get(root)
            self.root_max_position[root] = (
                over.max_position if over is not None and over.max_position is not None
                else cfg.max_position)  # fmt: skip
        self.tick_value = {s: c.tick_value for s, c in contracts.items()}
        self.point_value = {s: float(c.point_value) for s, c in contracts.items()}
        self.tick_size = {s: float(c.tick_size) for s, c in contracts.items()}
        self.max_gross_notional = cfg.max_gross_notional
        self.max_order_rate = cfg.max_order_rate
        self.rate_window_s = cfg.order_rate_window_s
        self.rate_window_ns = round(cfg.order_rate_window_s * 1e9)
        self.max_orders_per_day = cfg.max_orders_per_day
        self.daily_loss_limit = cfg.daily_loss_limit
        self.max_drawdown = cfg.max_drawdown
        self.max_var_historical = float(cfg.max_var_historical)
        self.max_var_parametric = float(cfg.max_var_parametric)
        self.var_min_returns = cfg.var_min_returns
        self.currency = next(iter(contracts.values())).currency if contracts else ""


class RiskEngine:
    def __init__(self, config: RiskConfig, account: Account, book: OrderBook):
        self.config = config
        self.limits = Limits(config, account.contracts)
        self.state = RiskState(self.limits.rate_window_ns)
        self.calendar = TradingDay(config.day_tz, config.day_close)
        self._account = account
        self._book = book
        self._returns: ReturnsWindow | None = None
        self.stale: dict[str, str] = {}  # symbol -> why its price is not fresh (an input)

    # --- state ------------------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Fold one event (after the account and the book have applied it)."""
        self.state.apply(event, self._account)

    @property
    def trading_state(self) -> TradingState:
        return self.state.trading_state

    @property
    def currency(self) -> str:
        return self._account.currency or self.limits.currency

    def set_returns(self, returns: Mapping[str, Sequence[float]] | None) -> None:
        """The window of returns VaR is measured on (an input, not logged state: supply it again
        after a restart). None removes it, and VaR limits then deny."""
        self._returns = None if returns is None else ReturnsWindow(returns, self.config.var_confidence)

    def set_stale(self, symbol: str, why: str | None) -> None:
        """A live feed's verdict on a symbol's price (an input, like the returns window): while
        stale, only orders that reduce a position pass. None: fresh again."""
        if why is None:
            self.stale.pop(symbol, None)
        else:
            self.stale[symbol] = why

    # --- pre-trade checks -------------------------------------------------------------------

    def check_order(self, order: OrderInitialized, ts_ns: int) -> RiskDenial | None:
        """None when the new order may go out, else the first limit it breaks."""
        return self._check(
            order.symbol, order.side, order.quantity, order.limit_ticks, order.stop_ticks,
            order.reduce_only, ts_ns, 0, True,
        )  # fmt: skip

    def check_update(
        self,
        order: Order,
        quantity: int | None,
        limit_ticks: int | None,
        stop_ticks: int | None,
        ts_ns: int,
    ) -> RiskDenial | None:
        """A modification is checked as the order it would become, its old leaves set aside."""
        qty = order.quantity if quantity is None else quantity
        return self._check(
            order.symbol, order.side, qty - order.filled_qty,
            order.limit_ticks if limit_ticks is None else limit_ticks,
            order.stop_ticks if stop_ticks is None else stop_ticks,
            order.reduce_only, ts_ns, order.leaves_qty if order.is_working else 0, False,
        )  # fmt: skip

    def closing_qty(self, symbol: str, side: Side, quantity: int, replacing: int = 0) -> int:
        """How many of an order's contracts only reduce the position: those on the opposite
        side that the position, less the working orders on the order's side, still covers."""
        pos = self._account.position(symbol)
        if not (pos < 0 if side is _BUY else pos > 0):
            return 0
        book = self._book
        same = (book.working_buy_qty(symbol) if side is _BUY else book.working_sell_qty(symbol))
        return max(0, min(quantity, abs(pos) - same + replacing))

    def _check(
        self,
        sym: str,
        side: Side,
        qty: int,
        limit_ticks: int | None,
        stop_ticks: int | None,
        reduce_only: bool,
        ts_ns: int,
        replacing: int,
        new_order: bool,
    ) -> RiskDenial | None:
        """Exits always pass: an order whose every contract reduces the position is never
        denied by a limit or a trading state. An order through zero is checked for its opening
        part only; when that is denied, the denial says how many contracts close (`closing`)."""
        if sym not in self.limits.contracts:
            return RiskDenial("instrument", "", sym, f"unknown instrument {sym}: no contract spec")
        closing = self.closing_qty(sym, side, qty, replacing)
        if closing == qty:
            return None
        denial = self._check_opening(sym, side, qty, qty - closing, limit_ticks, stop_ticks,
                                     reduce_only, ts_ns, replacing, new_order)  # fmt: skip
        if denial is None or not closing:
            return denial
        return dataclasses.replace(denial, closing=closing)

    def _check_opening(
        self,
        sym: str,
        side: Side,
        qty: int,
        opening: int,
        limit_ticks: int | None,
        stop_ticks: int | None,
        reduce_only: bool,
        ts_ns: int,
        replacing: int,
        new_order: bool,
    ) -> RiskDenial | None:
        lim, st, acct, book = self.limits, self.state, self._account, self._book
        buy = side is _BUY
        pos = acct.position(sym)
        same = (book.working_buy_qty(sym) if buy else book.working_sell_qty(sym)) - replacing
        signed_total = same + qty if buy else -(same + qty)
        tstate = st.trading_state
        if tstate is not _ACTIVE:
            return RiskDenial(
                "trading_state", str(tstate), str(pos + signed_total),
                f"trading state {tstate}: only orders that reduce a position pass; "
                f"{side} {qty} {sym} would take the position from {pos:+d} to "
                f"{pos + signed_total:+d}",
            )  # fmt: skip
        why = self.stale.get(sym)
        if why is not None:
            return RiskDenial(
                "stale_price", "a fresh price", "stale",
                f"no fresh price for {sym} ({why}): only orders that reduce a position pass",
            )  # fmt: skip
        if reduce_only:
            return RiskDenial(
                "reduce_only", "reduce only", str(pos + signed_total),
                f"reduce-only {side} {qty} {sym} would take the position from {pos:+d} to "
                f"{pos + signed_total:+d}" + (f" with {same} working" if same else ""),
            )  # fmt: skip
        sent = st.sent_in_window(ts_ns)
        if sent >= lim.max_order_rate:
            return RiskDenial(
                "max_order_rate", str(lim.max_order_rate), str(sent + 1),
                f"order rate {lim.max_order_rate} per {lim.rate_window_s:g}s: {sent} orders and "
                f"modifications already sent in the last {lim.rate_window_s:g}s",
            )  # fmt: skip
        if new_order and st.orders_today >= lim.max_orders_per_day:
            return RiskDenial(
                "max_orders_per_day", str(lim.max_orders_per_day), str(st.orders_today + 1),
                f"max orders per day {lim.max_orders_per_day}: {st.orders_today} already sent "
                f"on trading day {st.day}",
            )  # fmt: skip
        last = acct.marks.get(sym)
        if last is None:
            return RiskDenial(
                "price", "a last price", "none",
                f"no price for {sym}: checks fail closed until a mark or a fill gives one",
            )  # fmt: skip
        num, den = lim.collar[sym]
        for price, label in ((limit_ticks, "limit"), (stop_ticks, "stop")):
            if price is not None and abs(price - last) * den > abs(last) * num:
                return self._collar_denial(sym, label, price, last)
        max_qty = lim.max_order_qty[sym]
        if opening > max_qty:
            part = f" (its opening part {opening})" if opening != qty else ""
            return RiskDenial(
                "max_order_qty", str(max_qty), str(opening),
                f"max order quantity {max_qty} {sym}: order is {qty}{part}",
            )  # fmt: skip
        max_pos = lim.max_position[sym]
        projected = pos + signed_total
        if abs(projected) > max_pos:
            tail = f" (position {pos:+d}, working {'buys' if buy else 'sells'} {same})" if same else ""
            return RiskDenial(
                "max_position", str(max_pos), str(projected),
                f"max position {max_pos} {sym}: order would take the position to "
                f"{projected:+d}{tail}",
            )  # fmt: skip
        root = lim.root_of.get(sym)
        if root is not None:
            denial = self._root_position(root, buy, qty, replacing)
            if denial is not None:
                return denial
        if lim.max_gross_notional:
            other_side = book.working_sell_qty(sym) if buy else book.working_buy_qty(sym)
            contracts = max(abs(projected), abs(pos - other_side if buy else pos + other_side))
            denial = self._notional(sym, contracts, last)
            if denial is not None:
                return denial
        if lim.max_var_historical or lim.max_var_parametric:
            return self._var(sym, pos + (qty if buy else -qty))
        return None

    def _root_position(self, root: str, buy: bool, qty: int, replacing: int) -> RiskDenial | None:
        """The root's net position across its months (and its own symbol), if every working
        order of the root on the order's side filled, against the root's `max_position`. Net,
        so a roll (the out leg closes the old month before the in leg opens the new one) and a
        calendar spread count what they hold of the root, and never twice."""
        acct, book = self._account, self._book
        members = self.limits.root_members[root]
        held = [(s, acct.position(s)) for s in members]
        net = sum(p for _, p in held)
        same = sum(book.working_buy_qty(s) if buy else book.working_sell_qty(s)
                   for s in members) - replacing  # fmt: skip
        projected = net + same + qty if buy else net - same - qty
        cap = self.limits.root_max_position[root]
        if abs(projected) <= cap:
            return None
        parts = ", ".join(f"{s} {p:+d}" for s, p in held if p) or "flat"
        tail = f", working {'buys' if buy else 'sells'} {same}" if same else ""
        return RiskDenial(
            "max_position", str(cap), str(projected),
            f"max position {cap} {root} across its contract months: order would take {root}'s "
            f"net position to {projected:+d} (held {parts}{tail})",
        )  # fmt: skip

    def _collar_denial(self, sym: str, label: str, price: int, last: int) -> RiskDenial:
        contract = self.limits.contracts[sym]
        pct = self.limits.collar_pct[sym]
        off = abs(Decimal(price - last)) * 100 / abs(Decimal(last)) if last else Decimal("Infinity")
        return RiskDenial(
            "price_collar_pct", f"{pct}%", f"{off:.2f}%",
            f"price collar {pct}% {sym}: {label} price {contract.price(price)} is {off:.2f}% "
            f"from the last price {contract.price(last)}",
        )  # fmt: skip

    def _exposure(self, sym: str) -> int:
        """Worst-case |contracts| of `sym` if every working order on one side filled."""
        pos = self._account.position(sym)
        book = self._book
        return max(abs(pos + book.working_buy_qty(sym)), abs(pos - book.working_sell_qty(sym)))

    def _notional(self, sym: str, contracts: int, last: int) -> RiskDenial | None:
        lim, marks = self.limits, self._account.marks
        total = contracts * abs(last) * lim.tick_value[sym]
        for other, tick_value in lim.tick_value.items():
            if other == sym:
                continue
            contracts = self._exposure(other)
            if contracts:
                mark = marks.get(other)
                if mark is None:
                    return RiskDenial(
                        "price", "a last price", "none",
                        f"no price for {other}: cannot measure gross notional (fails closed)",
                    )  # fmt: skip
                total += contracts * abs(mark) * tick_value
        if total > lim.max_gross_notional:
            cur = self.currency
            return RiskDenial(
                "max_gross_notional", _money(lim.max_gross_notional), _money(total),
                f"max gross notional {_money(lim.max_gross_notional)} {cur}: order would take "
                f"it to {_money(total)} {cur}",
            )  # fmt: skip
        return None

    def exposures(self, override: tuple[str, int] | None = None) -> dict[str, float]:
        """Signed money exposure per instrument at the last prices (VaR's input)."""
        lim, acct = self.limits, self._account
        out: dict[str, float] = {}
        for sym, pos in acct.positions.items():
            if pos.quantity:
                out[sym] = pos.quantity * acct.marks[sym] * lim.tick_size[sym] * lim.point_value[sym]
        if override is not None:
            sym, qty = override
            mark = acct.marks[sym]
            out[sym] = qty * mark * lim.tick_size[sym] * lim.point_value[sym]
        return out

    def _var(self, sym: str, after: int) -> RiskDenial | None:
        lim, window = self.limits, self._returns
        if window is None:
            return RiskDenial(
                "var", "a returns window", "none",
                "VaR limit set but no returns window supplied (fails closed; RiskEngine.set_returns)",
            )  # fmt: skip
        if window.periods < lim.var_min_returns:
            return RiskDenial(
                "var_min_returns", str(lim.var_min_returns), str(window.periods),
                f"VaR needs at least {lim.var_min_returns} returns in the window, it has "
                f"{window.periods}",
            )  # fmt: skip
        exposures = self.exposures((sym, after))
        missing = window.missing(exposures)
        if missing:
            return RiskDenial(
                "var", "returns for every position", ", ".join(missing),
                f"VaR: no returns in the window for {', '.join(missing)} (fails closed)",
            )  # fmt: skip
        conf, cur = f"{self.config.var_confidence:.0%}", self.currency
        for key, kind, cap, measure in (
            ("max_var_historical", "historical", lim.max_var_historical, window.historical),
            ("max_var_parametric", "parametric", lim.max_var_parametric, window.parametric),
        ):
            if cap:
                var = measure(exposures)
                if var > cap:
                    return RiskDenial(
                        key, _money(cap), _money(var),
                        f"{kind} VaR {conf} limit {_money(cap)} {cur}: order would take it to "
                        f"{_money(var)} {cur}",
                    )  # fmt: skip
        return None

    # --- breakers, trading state, trading day -----------------------------------------------

    def breach(self) -> tuple[str, str] | None:
        """(config key, message) of the first circuit breaker tripped now, or None."""
        st, lim = self.state, self.limits
        if st.trading_state is _HALTED or not (lim.daily_loss_limit or lim.max_drawdown):
            return None
        if st.trading_state is _REDUCING and self.config.on_breach == "reduce":
            return None
        equity = self._account.equity()
        cur = self.currency
        loss = st.day_start_equity - equity
        if lim.daily_loss_limit and loss >= lim.daily_loss_limit:
            return "daily_loss_limit", (
                f"daily loss limit {_money(lim.daily_loss_limit)} {cur}: the day's loss is "
                f"{_money(loss)} {cur} (equity {_money(equity)} from {_money(st.day_start_equity)})"
            )
        drawdown = st.peak_equity - equity
        if lim.max_drawdown and drawdown >= lim.max_drawdown:
            return "max_drawdown", (
                f"max drawdown {_money(lim.max_drawdown)} {cur}: equity {_money(equity)} is "
                f"{_money(drawdown)} {cur} below its peak {_money(st.peak_equity)}"
            )
        return None

    def state_change(
        self, state: TradingState, cause: Cause, ts_ns: int, reason: str = "", check: str = ""
    ) -> TradingStateChanged:
        """The event for a change of trading state; raises if the table does not allow it."""
        previous = self.state.trading_state
        check_trading_transition(previous, state, cause)
        return TradingStateChanged(
            ts_ns=ts_ns, change=self.state.changes + 1, previous=previous, state=state,
            cause=cause, check=check, reason=reason,
        )  # fmt: skip

    def day_start(self, ts_ns: int) -> TradingDayStarted | None:
        """The event that opens a new trading day when `ts_ns` is past the current one's close."""
        if ts_ns < self.state.day_end_ns:
            return None
        day, ends = self.calendar.of(ts_ns)
        return TradingDayStarted(ts_ns=ts_ns, day=day, ends_ns=ends, equity=self._account.equity())

    # --- kill switch ------------------------------------------------------------------------

    def kill_plan(self, ts_ns: int, reason: str) -> KillPlan:
        """Activate the kill switch: halt, cancel every working order, flatten every position."""
        events: list[Event] = [
            KillSwitchActivated(ts_ns=ts_ns, activation=self.state.kills + 1, reason=reason)
        ]
        if self.state.trading_state is not _HALTED:
            events.append(self.state_change(_HALTED, Cause.KILL_SWITCH, ts_ns, reason))
        cancel, flatten = self.kill_work()
        return KillPlan(events, cancel, flatten)

    def adding_orders(self) -> list[Order]:
        """Working orders that would grow a position if they filled (what REDUCING cancels)."""
        out = []
        for o in self._book.working():
            pos = self._account.position(o.symbol)
            if o.status is not OrderStatus.PENDING_CANCEL and (pos == 0 or (pos > 0) == (o.side is _BUY)):
                out.append(o)
        return out

    def kill_work(self) -> tuple[list[Order], dict[str, int]]:
        """What the kill switch still has to do: working orders to cancel (its own flatten
        orders excepted) and, per instrument, the contracts that no flatten order covers yet."""
        cancel = [
            o for o in self._book.working()
            if o.tag != KILL_SWITCH_TAG and o.status is not OrderStatus.PENDING_CANCEL
        ]  # fmt: skip
        covering: dict[str, int] = {}
        for o in self._book.working():
            if o.tag == KILL_SWITCH_TAG:
                covering[o.symbol] = covering.get(o.symbol, 0) + o.signed_leaves
        flatten = {}
        for sym in sorted(set(self._account.positions) | set(covering)):
            residual = self._account.position(sym) + covering.get(sym, 0)
            if residual:
                flatten[sym] = -residual
        return cancel, flatten
