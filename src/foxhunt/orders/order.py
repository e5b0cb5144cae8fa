"""An order: built from `OrderInitialized`, changed only by applying its later events.

`Order.apply` checks an event completely before it changes anything: an illegal one raises
`IllegalTransition` (naming the order, its status and the event) and leaves the order as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.errors import IllegalTransition, OrderRequestError
from foxhunt.orders.events import (
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderEvent,
    OrderFilled,
    OrderInitialized,
    OrderModifyRejected,
    OrderPendingCancel,
    OrderPendingUpdate,
    OrderRejected,
    OrderUpdated,
)
from foxhunt.orders.state import PENDING, TERMINAL, WORKING, OrderStatus, Trigger, next_status


@dataclass(frozen=True, slots=True)
class OrderRequest:
    """What a strategy asks for, in prices; the OMS turns it into an order in ticks.

    A `client_order_id` chosen by the caller makes a resend idempotent (e.g. the strategy's name
    and the decision's bar timestamp): the OMS keeps one order per id. Without one the OMS
    numbers orders itself.
    """

    symbol: str
    side: Side
    quantity: int
    order_type: OrderType = OrderType.MARKET
    time_in_force: TimeInForce = TimeInForce.GTC
    limit_price: Decimal | int | float | str | None = None
    stop_price: Decimal | int | float | str | None = None
    reduce_only: bool = False
    client_order_id: str | None = None
    tag: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.quantity, int) or isinstance(self.quantity, bool) or self.quantity <= 0:
            raise OrderRequestError(
                f"{self.symbol} order: quantity must be a whole number of contracts > 0, "
                f"got {self.quantity!r}"
            )
        has_limit, has_stop = self.limit_price is not None, self.stop_price is not None
        want = {OrderType.MARKET: (False, False), OrderType.LIMIT: (True, False),
                OrderType.STOP: (False, True)}[self.order_type]
        if (has_limit, has_stop) != want:
            need = {(False, False): "no price", (True, False): "a limit price and no stop price",
                    (False, True): "a stop price and no limit price"}[want]
            raise OrderRequestError(f"{self.symbol} {self.order_type} order takes {need}")
        if self.order_type is OrderType.STOP and self.time_in_force is TimeInForce.IOC:
            raise OrderRequestError(f"{self.symbol} STOP order cannot be IOC (it waits to trigger)")
        if self.time_in_force is TimeInForce.ATC and self.order_type is not OrderType.MARKET:
            raise OrderRequestError(f"{self.symbol} {self.order_type} order cannot be ATC "
                                    "(only a market order fills at the close)")


class Order:
    """One order's current state, folded from its events."""

    __slots__ = (
        "client_order_id",
        "commission",
        "fill_cost_ticks",
        "fill_ids",
        "filled_qty",
        "init",
        "limit_ticks",
        "order_type",
        "quantity",
        "reason",
        "reduce_only",
        "requests",
        "side",
        "status",
        "stop_ticks",
        "symbol",
        "tag",
        "time_in_force",
        "ts_init",
        "ts_last",
        "venue_order_id",
        "working_status",
    )  # fmt: skip

    def __init__(self, init: OrderInitialized):
        if init.quantity <= 0:
            raise OrderRequestError(f"order {init.client_order_id}: quantity must be > 0")
        self.init = init  # the order as first built: a resend is compared with it
        self.client_order_id = init.client_order_id
        self.symbol = init.symbol
        self.side = init.side
        self.quantity = init.quantity
        self.order_type = init.order_type
        self.time_in_force = init.time_in_force
        self.limit_ticks = init.limit_ticks
        self.stop_ticks = init.stop_ticks
        self.reduce_only = init.reduce_only
        self.tag = init.tag
        self.ts_init = self.ts_last = init.ts_ns
        self.status = self.working_status = OrderStatus.INITIALIZED
        self.filled_qty = 0
        self.fill_cost_ticks = 0  # sum of quantity * price over fills
        self.commission = Decimal(0)
        self.venue_order_id: str | None = None
        self.requests = 0  # cancel and update requests sent so far
        self.fill_ids: set[str] = set()
        self.reason = init.trim_reason  # why it was denied, rejected, canceled or trimmed

    @property
    def leaves_qty(self) -> int:
        return self.quantity - self.filled_qty

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def is_working(self) -> bool:
        """At the venue and able to fill: its leaves count as exposure."""
        return self.status in WORKING

    @property
    def is_pending(self) -> bool:
        return self.status in PENDING

    @property
    def signed_leaves(self) -> int:
        return self.leaves_qty * self.side.sign if self.status in WORKING else 0

    @property
    def avg_fill_ticks(self) -> float | None:
        return self.fill_cost_ticks / self.filled_qty if self.filled_qty else None

    def apply(self, event: OrderEvent) -> None:
        """Apply one event, or raise `IllegalTransition` and change nothing."""
        name = type(event).__name__
        if event.client_order_id != self.client_order_id:
            raise IllegalTransition(
                self.client_order_id, self.status, name, f"the event is for {event.client_order_id}"
            )
        if isinstance(event, OrderInitialized):
            raise IllegalTransition(self.client_order_id, self.status, name, "already initialized")
        trigger = self._fill_trigger(event) if isinstance(event, OrderFilled) else event.TRIGGER
        moved = next_status(self.status, trigger, self.working_status)
        if moved is None:
            raise IllegalTransition(self.client_order_id, self.status, name)
        self._check(event, trigger)
        self._change(event)
        self.status, self.working_status = moved
        self.ts_last = event.ts_ns

    def _illegal(self, event: OrderEvent, detail: str) -> IllegalTransition:
        return IllegalTransition(self.client_order_id, self.status, type(event).__name__, detail)

    def _fill_trigger(self, fill: OrderFilled) -> Trigger:
        if fill.quantity <= 0:
            raise self._illegal(fill, f"fill quantity {fill.quantity} must be > 0")
        if fill.quantity > self.leaves_qty and self.status not in TERMINAL:
            raise self._illegal(
                fill, f"fill of {fill.quantity} exceeds the {self.leaves_qty} contracts left"
            )
        return Trigger.FILL if fill.quantity == self.leaves_qty else Trigger.PARTIAL_FILL

    def _check(self, event: OrderEvent, trigger: Trigger) -> None:
        if trigger is Trigger.TRIGGER and self.order_type is not OrderType.STOP:
            raise self._illegal(event, f"a {self.order_type} order has no trigger")
        if isinstance(event, OrderFilled):
            if (event.symbol, event.side) != (self.symbol, self.side):
                raise self._illegal(
                    event, f"fill is {event.side} {event.symbol}, order is {self.side} {self.symbol}"
                )
            if event.fill_id in self.fill_ids:
                raise self._illegal(event, f"fill {event.fill_id} was already applied")
            lim = self.limit_ticks
            if lim is not None and (event.price_ticks - lim) * self.side.sign > 0:
                raise self._illegal(
                    event, f"fill at {event.price_ticks} ticks is through the limit {lim}"
                )
        elif isinstance(event, OrderPendingUpdate | OrderPendingCancel):
            if event.request != self.requests + 1:
                raise self._illegal(
                    event, f"request {event.request} is not the next one ({self.requests + 1})"
                )
        elif isinstance(event, OrderModifyRejected | OrderCancelRejected) and not (
            1 <= event.request <= self.requests
        ):
            raise self._illegal(event, f"no request {event.request} was sent")
        if isinstance(event, OrderPendingUpdate | OrderUpdated):
            self._check_update(event)

    def _check_update(self, event: OrderPendingUpdate | OrderUpdated) -> None:
        if event.quantity is not None and event.quantity <= self.filled_qty:
            raise self._illegal(
                event, f"quantity {event.quantity} must exceed the {self.filled_qty} already filled"
            )
        if event.limit_ticks is not None and self.order_type is not OrderType.LIMIT:
            raise self._illegal(event, f"a {self.order_type} order has no limit price")
        if event.stop_ticks is not None and self.order_type is not OrderType.STOP:
            raise self._illegal(event, f"a {self.order_type} order has no stop price")

    def _change(self, event: OrderEvent) -> None:
        if isinstance(event, OrderFilled):
            self.filled_qty += event.quantity
            self.fill_cost_ticks += event.quantity * event.price_ticks
            self.commission += event.commission
            self.fill_ids.add(event.fill_id)
        elif isinstance(event, OrderAccepted):
            self.venue_order_id = event.venue_order_id
        elif isinstance(event, OrderPendingUpdate | OrderPendingCancel):
            self.requests = event.request
        elif isinstance(event, OrderUpdated):
            self.quantity = event.quantity
            if event.limit_ticks is not None:
                self.limit_ticks = event.limit_ticks
            if event.stop_ticks is not None:
                self.stop_ticks = event.stop_ticks
        elif isinstance(event, OrderDenied | OrderRejected | OrderCanceled):
            self.reason = event.reason

    def snapshot(self) -> dict[str, Any]:
        """Every field, for comparing two folds of the same log."""
        out = {name: getattr(self, name) for name in self.__slots__}
        out["fill_ids"] = sorted(self.fill_ids)
        return out

    def __repr__(self) -> str:
        price = f" @{self.limit_ticks}" if self.limit_ticks is not None else ""
        price += f" stop {self.stop_ticks}" if self.stop_ticks is not None else ""
        return (
            f"Order({self.client_order_id} {self.side} {self.quantity} {self.symbol} "
            f"{self.order_type}{price} {self.time_in_force} {self.status} "
            f"filled {self.filled_qty})"
        )
