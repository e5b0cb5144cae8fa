"""The OMS of one account: orders go out through risk, everything is an event in the log.

Every change follows one path: decide -> build the events -> apply them to the in-memory state
(each event is checked completely before it changes anything) -> append them to the log in one
transaction -> only then act on the outside world (send, cancel, modify at the venue). State is
never changed any other way, so folding the log (`TradingEngine(store, ...)`) rebuilds exactly
the state the live engine had.

If an append fails, or a batch fails half-way, the engine folds the log again (which holds none
of the batch) and raises: memory and log never disagree. If even that fails the engine stops
and every call raises until it is rebuilt from the log.

No clock and no global state: every call takes the time (int64 ns UTC) it happens at.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from foxhunt.errors import UnknownSymbolError
from foxhunt.events import Event
from foxhunt.execution import venue as v
from foxhunt.execution.observe import OrderTelemetry
from foxhunt.execution.rolls import RollBook, RollEvent
from foxhunt.execution.store import EventLogError, EventStore, StoredEvent
from foxhunt.orders.book import OrderBook
from foxhunt.orders.contract import Contract, Price
from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.errors import DuplicateOrderError, OrderRequestError, TradingError
from foxhunt.orders.events import (
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderEvent,
    OrderExpired,
    OrderFilled,
    OrderInitialized,
    OrderModifyRejected,
    OrderPendingCancel,
    OrderPendingUpdate,
    OrderRejected,
    OrderSubmitted,
    OrderTriggered,
    OrderUpdated,
)
from foxhunt.orders.order import Order, OrderRequest
from foxhunt.orders.state import OrderStatus
from foxhunt.portfolio.account import Account
from foxhunt.portfolio.events import AccountOpened, PositionAdopted, PriceMarked
from foxhunt.risk.config import RiskConfig
from foxhunt.risk.engine import KILL_SWITCH_TAG, RiskDenial, RiskEngine
from foxhunt.risk.events import Cause, DrawdownReset, ModifyDenied, TradingState
from foxhunt.telemetry import enabled as telemetry_on


def _as_requested(init: OrderInitialized) -> OrderInitialized:
    """The request an order was built from (a trimmed order went out smaller)."""
    if init.requested_quantity is None:
        return init
    return dataclasses.replace(init, quantity=init.requested_quantity, requested_quantity=None,
                               trim_reason="")  # fmt: skip


class EngineStopped(TradingError):
    """The engine could not make memory agree with the log; rebuild it from the log."""


class TradingEngine:
    """Orders, positions and risk state of one account, folded from its event log."""

    def __init__(
        self,
        store: EventStore,
        contracts: Mapping[str, Contract],
        risk: RiskConfig | None = None,
        *,
        venue: v.Venue | None = None,
        order_prefix: str = "O",
    ):
        self.store = store
        self.contracts = dict(contracts)
        self.risk_config = risk or RiskConfig()
        self.venue = venue
        self.order_prefix = order_prefix
        self._stopped = ""
        self._in_venue_call = False
        self._returns: Mapping[str, Any] | None = None
        self._stale: dict[str, str] = {}
        self._telemetry: OrderTelemetry | None = None
        self._fold()

    @classmethod
    def open(
        cls,
        store: EventStore,
        contracts: Mapping[str, Contract],
        risk: RiskConfig | None = None,
        *,
        account: str = "default",
        currency: str = "USD",
        starting_cash: Decimal | int | str = Decimal(100_000),
        ts_ns: int = 0,
        venue: v.Venue | None = None,
    ) -> TradingEngine:
        """Fold the log; a new log is opened with `starting_cash`. An existing log keeps its
        own starting cash, and must be for the same account and currency."""
        engine = cls(store, contracts, risk, venue=venue)
        acct = engine.account
        if not acct.is_open:
            engine._commit([AccountOpened(ts_ns=ts_ns, account=account, currency=currency,
                                          starting_cash=Decimal(starting_cash))])  # fmt: skip
        elif (acct.name, acct.currency) != (account, currency):
            raise TradingError(
                f"the event log is account {acct.name!r} in {acct.currency}, "
                f"not {account!r} in {currency}"
            )
        return engine

    # --- folding the log --------------------------------------------------------------------

    def _fold(self) -> None:
        """Build the state from nothing by applying every stored event in order."""
        self.book = OrderBook()
        self.account = Account(self.contracts)
        self.risk = RiskEngine(self.risk_config, self.account, self.book)
        self.rolls = RollBook()
        if self._returns is not None:
            self.risk.set_returns(self._returns)
        for symbol, why in self._stale.items():
            self.risk.set_stale(symbol, why)
        self._seen: set[str] = set()
        self._deferred: list[Event] = []
        self.seq = 0
        for seq, event in self.store.read():
            try:
                self._apply(event)
            except Exception as exc:
                raise EventLogError(
                    f"event {seq} ({event.event_id}) of the log does not apply: {exc}"
                ) from exc
            self._seen.add(event.event_id)
            self.seq = seq
        self._next_n = len(self.book)

    def _apply(self, event: Event) -> None:
        if isinstance(event, OrderEvent):
            if isinstance(event, OrderFilled):
                self.account.check_fill(event)
            order = self.book.apply(event)
            if self.rolls.legs:
                self.rolls.on_order(order)
        elif isinstance(event, RollEvent):
            self.rolls.apply(event)
            return
        self.account.apply(event)
        self.risk.apply(event)

    def _commit(self, events: list[Event], *, defer: bool = False) -> list[Event]:
        """Apply then append `events` (those not already in the log); returns what was new.

        With `defer`, the events are applied and held back: they go to the log with the next
        append (before its own events, in one transaction) or at `flush()`. Only facts that can
        be produced again by running the same input again may be deferred (a bar's mark): a
        crash loses them from the log, never from what the log's reader can rebuild."""
        if self._stopped:
            raise EngineStopped(f"trading engine stopped: {self._stopped}; rebuild it from the log")
        seen = self._seen
        if len(events) == 1:  # most commits (a bar's mark, a report)
            ids = {events[0].event_id}
            fresh = [] if ids <= seen else list(events)
        else:
            fresh, ids = [], set()
            for e in events:
                eid = e.event_id
                if eid not in seen and eid not in ids:
                    fresh.append(e)
                    ids.add(eid)
        if not fresh:
            return fresh
        applied = 0
        try:
            for e in fresh:
                self._apply(e)
                applied += 1
            if defer:
                self._deferred.extend(fresh)
            else:
                self.seq = self.store.append([*self._deferred, *fresh])
                self._deferred.clear()
        except Exception:
            if applied:
                self._refold()
            raise
        self._seen |= ids
        return fresh

    def flush(self) -> None:
        """Append the deferred events (one transaction)."""
        if not self._deferred:
            return
        try:
            self.seq = self.store.append(self._deferred)
        except Exception:
            self._refold()
            raise
        self._deferred.clear()

    def foreign_writes(self) -> bool:
        """Another writer (an operator's `foxhunt risk` command) appended to the log since this
        engine last read or wrote it."""
        return self.store.latest_seq() > self.seq

    def holds_deferred(self, kind: type[Event]) -> bool:
        """Whether an applied event of `kind` waits for the next append."""
        return any(isinstance(e, kind) for e in self._deferred)

    @property
    def deferred(self) -> int:
        """How many applied events wait for the next append."""
        return len(self._deferred)

    def follow(self) -> list[StoredEvent]:
        """Apply what another writer appended since this engine last read the log, and make the
        next append follow it: a view (a dashboard's) kept current, or an operator's command
        made on the log as it is now, without folding the whole log again."""
        new: list[StoredEvent] = []
        while (latest := self.store.sync()) != self.seq:
            for seq, event in self.store.read(self.seq):
                if seq > latest:
                    break
                if event.event_id not in self._seen:
                    self._apply(event)
                    self._seen.add(event.event_id)
                self.seq = seq
                new.append(StoredEvent(seq, event))
        return new

    def _refold(self) -> None:
        """Fold the log again after a failed append; the deferred events that the log does not
        hold are applied again on top and stay deferred."""
        held = self._deferred
        try:
            self.store.sync()
            self._fold()
            for e in held:
                if e.event_id not in self._seen:
                    self._apply(e)
                    self._seen.add(e.event_id)
                    self._deferred.append(e)
        except Exception as exc:
            self._stopped = f"the log could not be folded again ({exc})"
            raise EngineStopped(f"trading engine stopped: {self._stopped}") from exc

    def _begin(self, ts_ns: int) -> None:
        if self._stopped:
            raise EngineStopped(f"trading engine stopped: {self._stopped}; rebuild it from the log")
        if self._in_venue_call:
            raise TradingError(
                "the venue called the OMS from inside a call to it; queue reports and deliver "
                "them after the call returns"
            )
        if not self.account.is_open:
            raise TradingError("the event log has no account yet: open it with TradingEngine.open")
        start = self.risk.day_start(ts_ns)
        if start is not None:
            self._commit([start])

    # --- orders -----------------------------------------------------------------------------

    def _contract(self, symbol: str) -> Contract:
        try:
            return self.contracts[symbol]
        except KeyError:
            raise UnknownSymbolError(
                f"unknown symbol {symbol!r}; this account trades {', '.join(sorted(self.contracts))}"
            ) from None

    def _new_id(self, prefix: str | None = None) -> str:
        while True:
            self._next_n += 1
            cid = f"{prefix or self.order_prefix}-{self._next_n}"
            if cid not in self.book:
                return cid

    def _ticks(self, contract: Contract, price: Price | None) -> int | None:
        return None if price is None else contract.to_ticks(price)

    def submit(self, request: OrderRequest, ts_ns: int) -> Order:
        """Check a new order against the risk limits; send it, or log why it was denied. An
        order through zero whose opening part is denied goes out with its closing part only
        (`order.quantity` smaller than asked, `order.reason` says why).

        A request whose client order id is already in the book returns that order and sends
        nothing (a resend after a crash or a retry is not doubled); with different terms it
        raises DuplicateOrderError. A denied order is DENIED with the reason in `order.reason`.
        """
        return self.submit_many([request], ts_ns)[0]

    def submit_many(self, requests: list[OrderRequest], ts_ns: int) -> list[Order]:
        """`submit` for several orders with one durable append (group commit): each is checked
        against risk in turn, seeing the ones before it; all their events (and any deferred
        ones) go to the log in one transaction; then the orders that passed are sent, in
        order. Every order is in the log before it leaves. All or nothing: a request that
        raises, or an append that fails, leaves memory as the log has it and sends none."""
        if not telemetry_on():
            return self._submit_many(requests, ts_ns, None)
        tel = self._observer()
        with tel.span("foxhunt.orders.submit", {"foxhunt.orders": len(requests)}):
            return self._submit_many(requests, ts_ns, tel)

    def _observer(self) -> OrderTelemetry:
        if self._telemetry is None:
            self._telemetry = OrderTelemetry()
        return self._telemetry

    def _submit_many(self, requests: list[OrderRequest], ts_ns: int,
                     tel: OrderTelemetry | None) -> list[Order]:  # fmt: skip
        self._begin(ts_ns)
        orders: list[Order] = []
        fresh: list[Event] = []
        try:
            for request in requests:
                events, order = self._order_events(request, ts_ns, tel)
                for e in events:
                    self._apply(e)
                    fresh.append(e)
                orders.append(order or self.book.get(events[0].client_order_id))
            if fresh and tel is not None:
                with tel.span("foxhunt.orders.log_append", {"foxhunt.events": len(fresh)}):
                    self._append_fresh(fresh)
            elif fresh:
                self._append_fresh(fresh)
        except Exception:
            if fresh:
                self._refold()
            raise
        self._seen.update(e.event_id for e in fresh)
        sent = {e.client_order_id for e in fresh if isinstance(e, OrderSubmitted)}
        for order in orders:
            if order.client_order_id not in sent:
                continue
            if tel is None:
                self._call_venue("submit", order)
                continue
            with tel.span("foxhunt.order.send", {"foxhunt.order.id": order.client_order_id}):
                self._call_venue("submit", order)
            tel.sent(order)
        if tel is not None:
            tel.submitted_call(len(sent), sum(isinstance(e, OrderDenied) for e in fresh))
        return orders

    def _append_fresh(self, fresh: list[Event]) -> None:
        self.seq = self.store.append([*self._deferred, *fresh])
        self._deferred.clear()

    def _order_events(self, request: OrderRequest, ts_ns: int, tel: OrderTelemetry | None
                      ) -> tuple[list[OrderEvent], Order | None]:  # fmt: skip
        """The events of one new order given the state now (the risk check included), or
        (no events, the order already in the book) for a resend of the same request."""
        if request.tag == KILL_SWITCH_TAG:
            raise OrderRequestError(f"tag {KILL_SWITCH_TAG!r} is reserved for the kill switch")
        contract = self._contract(request.symbol)
        cid = request.client_order_id or self._new_id()
        init = OrderInitialized(
            ts_ns=ts_ns, client_order_id=cid, symbol=request.symbol, side=request.side,
            quantity=request.quantity, order_type=request.order_type,
            time_in_force=request.time_in_force,
            limit_ticks=self._ticks(contract, request.limit_price),
            stop_ticks=self._ticks(contract, request.stop_price),
            reduce_only=request.reduce_only, tag=request.tag,
        )  # fmt: skip
        if cid in self.book:
            existing = self.book.get(cid)
            if _as_requested(existing.init) == dataclasses.replace(init, ts_ns=existing.init.ts_ns):
                return [], existing
            raise DuplicateOrderError(
                f"client order id {cid!r} is already used by {existing!r}; this request differs"
            )
        if tel is None:
            denial = self.risk.check_order(init, ts_ns)
        else:
            with tel.span("foxhunt.order.risk_check") as span:
                denial = self.risk.check_order(init, ts_ns)
                tel.risk_checked(span, init, denial)
        if denial is not None and denial.closing:
            init = dataclasses.replace(
                init, quantity=denial.closing, requested_quantity=init.quantity,
                trim_reason=f"{denial.message}; sent {denial.closing} of {init.quantity}, the "
                "contracts that reduce the position",
            )  # fmt: skip
        elif denial is not None:
            return [init, OrderDenied(ts_ns=ts_ns, client_order_id=cid, check=denial.check,
                                      reason=denial.message)], None  # fmt: skip
        return [init, OrderSubmitted(ts_ns=ts_ns, client_order_id=cid)], None

    def target_position(
        self, symbol: str, target: int, ts_ns: int, *, client_order_id: str | None = None,
        tag: str = "",
    ) -> Order | None:  # fmt: skip
        """An agent's decision as a target position: a market order for the difference between
        the target and the position plus working orders; None when they already agree."""
        self._contract(symbol)
        current = self.account.position(symbol) + sum(
            o.signed_leaves for o in self.book.working(symbol)
        )
        delta = target - current
        if delta == 0:
            return None
        request = OrderRequest(symbol, Side.of(delta), abs(delta), client_order_id=client_order_id,
                               tag=tag)  # fmt: skip
        return self.submit(request, ts_ns)

    def cancel(self, client_order_id: str, ts_ns: int) -> Order:
        """Ask the venue to cancel; a no-op for an order already ended or already canceling.
        Canceling is never blocked by risk."""
        self._begin(ts_ns)
        order = self.book.get(client_order_id)
        if not order.is_working or order.status is OrderStatus.PENDING_CANCEL:
            return order
        self._commit([OrderPendingCancel(ts_ns=ts_ns, client_order_id=client_order_id,
                                         request=order.requests + 1)])  # fmt: skip
        self._call_venue("cancel", order)
        return order

    def modify(
        self,
        client_order_id: str,
        ts_ns: int,
        *,
        quantity: int | None = None,
        limit_price: Price | None = None,
        stop_price: Price | None = None,
    ) -> RiskDenial | None:
        """Ask the venue to change a working order; the risk engine checks the order it would
        become. Returns the denial (also logged as ModifyDenied) or None when sent."""
        self._begin(ts_ns)
        order = self.book.get(client_order_id)
        if not order.is_working or order.is_pending:
            raise OrderRequestError(
                f"order {client_order_id} is {order.status}: only a working order with no "
                "request outstanding can be modified"
            )
        contract = self._contract(order.symbol)
        limit, stop = self._ticks(contract, limit_price), self._ticks(contract, stop_price)
        denial = self.risk.check_update(order, quantity, limit, stop, ts_ns)
        if denial is not None:
            self._commit([ModifyDenied(ts_ns=ts_ns, client_order_id=client_order_id,
                                       check=denial.check, reason=denial.message)])  # fmt: skip
            return denial
        self._commit([OrderPendingUpdate(
            ts_ns=ts_ns, client_order_id=client_order_id, request=order.requests + 1,
            quantity=quantity, limit_ticks=limit, stop_ticks=stop,
        )])  # fmt: skip
        self._call_venue("modify", order, quantity, limit, stop)
        return None

    def _call_venue(self, method: str, order: Order, *args: Any) -> None:
        if self.venue is None:
            return
        self._in_venue_call = True
        try:
            getattr(self.venue, method)(order, *args)
        finally:
            self._in_venue_call = False

    # --- what the venue reports -------------------------------------------------------------

    def on_report(self, report: v.VenueReport, *, defer: bool = False) -> Event | None:
        """Turn a venue report into its order event and apply it; None for a report already
        applied (a resend) and for a cancel or modify rejected because the order had already
        ended. An event the order's state does not allow raises IllegalTransition and changes
        nothing. With `defer` the event is logged with the next append (see `_commit`): only
        for a venue whose journal keeps every report, which reconciliation offers again."""
        if not telemetry_on():
            return self._on_report(report, defer)
        tel = self._observer()
        with tel.span("foxhunt.order.report") as span:
            event = self._on_report(report, defer)
            tel.report(report, event, span)
            return event

    def _on_report(self, report: v.VenueReport, defer: bool) -> Event | None:
        self._begin(report.ts_ns)
        order = self.book.get(report.client_order_id)
        if order.is_terminal and isinstance(report, v.CancelRejected | v.ModifyRejected):
            return None  # "too late": the order's end (a fill, say) already answered the request
        event = self._event_for(report, order)
        if not self._commit([event], defer=defer):
            return None
        if isinstance(event, OrderFilled):
            self._check_breakers(report.ts_ns)
        if self.risk.state.kill_active:
            self._enforce_kill(report.ts_ns)
        return event

    def _event_for(self, r: v.VenueReport, order: Order) -> OrderEvent:
        base = {"ts_ns": r.ts_ns, "client_order_id": r.client_order_id}
        if isinstance(r, v.Filled):
            commission = r.commission
            if commission is None:
                commission = self._contract(order.symbol).commission_for(r.quantity)
            return OrderFilled(**base, fill_id=r.fill_id, symbol=order.symbol, side=order.side,
                               quantity=r.quantity, price_ticks=r.price_ticks,
                               commission=commission)  # fmt: skip
        if isinstance(r, v.Accepted):
            return OrderAccepted(**base, venue_order_id=r.venue_order_id)
        if isinstance(r, v.Rejected):
            return OrderRejected(**base, reason=r.reason)
        if isinstance(r, v.Triggered):
            return OrderTriggered(**base)
        if isinstance(r, v.Canceled):
            return OrderCanceled(**base, reason=r.reason)
        if isinstance(r, v.Expired):
            return OrderExpired(**base)
        if isinstance(r, v.Updated):
            return OrderUpdated(**base, update_id=r.update_id, quantity=r.quantity,
                                limit_ticks=r.limit_ticks, stop_ticks=r.stop_ticks)  # fmt: skip
        if isinstance(r, v.CancelRejected):
            return OrderCancelRejected(**base, request=r.request or order.requests, reason=r.reason)
        if isinstance(r, v.ModifyRejected):
            return OrderModifyRejected(**base, request=r.request or order.requests, reason=r.reason)
        raise TradingError(f"unknown venue report {type(r).__name__}")

    # --- prices, breakers, trading state, kill switch ----------------------------------------

    def mark(self, symbol: str, price: Price, ts_ns: int, *, defer: bool = False) -> None:
        """The instrument's last price (a bar close, a trade): logged, then the breakers run.
        With `defer` the mark is applied now and logged with the next append (see `_commit`);
        a breaker it trips is logged at once, the mark with it."""
        self._begin(ts_ns)
        ticks = self._contract(symbol).to_ticks(price)
        if self._commit([PriceMarked(ts_ns=ts_ns, symbol=symbol, price_ticks=ticks)],
                        defer=defer):
            self._check_breakers(ts_ns)

    def _check_breakers(self, ts_ns: int) -> None:
        hit = self.risk.breach()
        if hit is None:
            return
        key, message = hit
        if self.risk_config.on_breach == "reduce":
            self._commit([self.risk.state_change(TradingState.REDUCING, Cause.BREAKER, ts_ns,
                                                 message, check=key)])  # fmt: skip
            self._kill_orders(self.risk.adding_orders(), {}, ts_ns)
            return
        self._commit([self.risk.state_change(TradingState.HALTED, Cause.BREAKER, ts_ns,
                                             message, check=key)])  # fmt: skip
        self.kill(ts_ns, f"{key} breaker: {message}")

    def set_trading_state(self, state: TradingState, ts_ns: int, reason: str = "") -> None:
        """An operator's change of trading state (leaving HALTED also ends the kill switch)."""
        self._begin(ts_ns)
        self._commit([self.risk.state_change(state, Cause.MANUAL, ts_ns, reason)])

    def reset_drawdown(self, ts_ns: int, reason: str = "") -> None:
        """Measure the drawdown from the equity now on (an operator's decision, logged)."""
        self._begin(ts_ns)
        self._commit([DrawdownReset(ts_ns=ts_ns, reset=self.risk.state.drawdown_resets + 1,
                                    peak=self.account.equity(), reason=reason)])  # fmt: skip

    def set_returns(self, returns: Mapping[str, Any] | None) -> None:
        """The returns window for the VaR limits (an input: supply it again after a restart)."""
        self.risk.set_returns(returns)
        self._returns = returns

    # --- rolls (execution.roller drives them) ---------------------------------------------

    def record_roll(self, event: RollEvent) -> None:
        """A roll's start or end: checked against the roll's state machine, then logged
        (`IllegalRollTransition` changes nothing)."""
        self._begin(event.ts_ns)
        self._commit([event])

    # --- an operator adopting the venue's view (after a reconciliation found them apart) -----

    def adopt_position(self, symbol: str, quantity: int, ts_ns: int, reason: str) -> None:
        """The log's position in `symbol` becomes the venue's `quantity`, the difference booked
        at the last price (a logged `PositionAdopted`)."""
        self._begin(ts_ns)
        contract = self._contract(symbol)
        last = self.account.marks.get(symbol)
        if last is None:
            raise TradingError(f"no price for {symbol} to book the adopted position at; "
                               "let the feed mark it first")
        self._commit([PositionAdopted(ts_ns=ts_ns, symbol=contract.symbol, quantity=quantity,
                                      price_ticks=last, reason=reason)])  # fmt: skip

    def adopt_order(self, order: v.VenueOrder, ts_ns: int, reason: str) -> Order:
        """A working order the venue has and the log does not: logged as sent and accepted,
        for what is left of it, passing no check (it is already at the venue)."""
        self._begin(ts_ns)
        self._contract(order.symbol)
        kind = (OrderType.STOP if order.stop_ticks is not None else
                OrderType.LIMIT if order.limit_ticks is not None else OrderType.MARKET)
        cid = order.client_order_id
        self._commit([
            OrderInitialized(ts_ns=ts_ns, client_order_id=cid, symbol=order.symbol,
                             side=order.side, quantity=order.leaves, order_type=kind,
                             time_in_force=TimeInForce.GTC, limit_ticks=order.limit_ticks,
                             stop_ticks=order.stop_ticks, tag="adopted", trim_reason=reason),
            OrderSubmitted(ts_ns=ts_ns, client_order_id=cid),
            OrderAccepted(ts_ns=ts_ns, client_order_id=cid, venue_order_id=order.venue_order_id),
        ])  # fmt: skip
        return self.book.get(cid)

    def drop_order(self, client_order_id: str, ts_ns: int, reason: str) -> Order:
        """A working order of the log that the venue does not have: ended in the log (rejected
        if the venue never acknowledged it, else canceled)."""
        order = self.book.get(client_order_id)
        report: v.VenueReport = (
            v.Rejected(client_order_id=client_order_id, ts_ns=ts_ns, reason=reason)
            if order.status is OrderStatus.SUBMITTED else
            v.Canceled(client_order_id=client_order_id, ts_ns=ts_ns, reason=reason))
        self.on_report(report)
        return self.book.get(client_order_id)

    def set_stale(self, symbol: str, why: str | None) -> None:
        """A feed's verdict that `symbol` has no fresh price (None: fresh again); an input that
        survives a refold. While stale, orders that add risk are denied, reducing ones pass."""
        self.risk.set_stale(symbol, why)
        if why is None:
            self._stale.pop(symbol, None)
        else:
            self._stale[symbol] = why

    def kill(self, ts_ns: int, reason: str) -> list[Order]:
        """Halt, cancel every working order and flatten every position with market orders that
        pass no check. Until an operator leaves HALTED, every report is followed by the same
        work for whatever is still open (a fill that raced a cancel, a rejected flatten).
        Returns the flatten orders sent."""
        self._begin(ts_ns)
        plan = self.risk.kill_plan(ts_ns, reason)
        self._commit(plan.events)
        return self._kill_orders(plan.cancel, plan.flatten, ts_ns)

    def _enforce_kill(self, ts_ns: int) -> None:
        cancel, flatten = self.risk.kill_work()
        if cancel or flatten:
            self._kill_orders(cancel, flatten, ts_ns)

    def _kill_orders(self, cancel: list[Order], flatten: dict[str, int], ts_ns: int) -> list[Order]:
        events: list[Event] = [
            OrderPendingCancel(ts_ns=ts_ns, client_order_id=o.client_order_id,
                               request=o.requests + 1)
            for o in cancel
        ]  # fmt: skip
        ids = []
        for symbol, qty in flatten.items():
            cid = self._new_id("K")
            ids.append(cid)
            events.append(OrderInitialized(
                ts_ns=ts_ns, client_order_id=cid, symbol=symbol, side=Side.of(qty),
                quantity=abs(qty), order_type=OrderType.MARKET, time_in_force=TimeInForce.GTC,
                reduce_only=True, tag=KILL_SWITCH_TAG,
            ))  # fmt: skip
            events.append(OrderSubmitted(ts_ns=ts_ns, client_order_id=cid))
        self._commit(events)
        for o in cancel:
            self._call_venue("cancel", o)
        sent = [self.book.get(cid) for cid in ids]
        for o in sent:
            self._call_venue("submit", o)
        return sent

    # --- reading ----------------------------------------------------------------------------

    @property
    def trading_state(self) -> TradingState:
        return self.risk.trading_state

    def snapshot(self) -> dict[str, Any]:
        """All state, as plain data: equal for two engines that folded the same log."""
        return {
            "seq": self.seq,
            "book": self.book.snapshot(),
            "account": self.account.snapshot(),
            "risk": self.risk.state.snapshot(),
            "rolls": self.rolls.snapshot(),
            "seen": sorted(self._seen),
        }
