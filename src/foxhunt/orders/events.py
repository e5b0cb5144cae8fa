"""Order events: an order's history, from the OMS's request to its last fill or cancel.

Each names its order by client order id; prices are integer ticks, quantities whole contracts,
money `Decimal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import ClassVar

from foxhunt.events import Event, event
from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.state import Trigger


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderEvent(Event):
    TRIGGER: ClassVar[Trigger]
    client_order_id: str


def order_event(kind: str, trigger: Trigger | None = None, id_suffix: str = ""):
    """`event` for an order's events: the id is `<client order id>:<kind>` then `id_suffix`;
    `trigger` is the move it makes in the order's state machine (none for the first, nor a fill)."""
    def wrap(cls):
        if trigger is not None:
            cls.TRIGGER = trigger
        return event(kind, "{client_order_id}:{KIND}" + id_suffix)(cls)
    return wrap


@order_event("order_initialized")
class OrderInitialized(OrderEvent):
    """The order as the OMS built it from a request; it starts every order's history.

    An order that would cross zero, whose opening part a limit denies, goes out with only its
    closing part (exits always pass): then `quantity` is that part, `requested_quantity` the
    request's, and `trim_reason` the opening part's denial."""

    symbol: str
    side: Side
    quantity: int
    order_type: OrderType
    time_in_force: TimeInForce
    limit_ticks: int | None = None
    stop_ticks: int | None = None
    reduce_only: bool = False
    tag: str = ""  # who asked: a strategy name, "kill_switch", ...
    requested_quantity: int | None = None
    trim_reason: str = ""


@order_event("order_denied", Trigger.DENY)
class OrderDenied(OrderEvent):
    check: str  # the risk limit's config key
    reason: str


@order_event("order_submitted", Trigger.SUBMIT)
class OrderSubmitted(OrderEvent):
    """Sent to the venue."""


@order_event("order_accepted", Trigger.ACCEPT)
class OrderAccepted(OrderEvent):
    venue_order_id: str


@order_event("order_rejected", Trigger.REJECT)
class OrderRejected(OrderEvent):
    reason: str


@order_event("order_triggered", Trigger.TRIGGER)
class OrderTriggered(OrderEvent):
    """A stop order whose trigger price traded."""


@order_event("order_pending_update", Trigger.PENDING_UPDATE, ":{request}")
class OrderPendingUpdate(OrderEvent):
    """An update request sent to the venue; None keeps a field as it is."""

    request: int  # the order's n-th request (cancel or update), from 1
    quantity: int | None = None
    limit_ticks: int | None = None
    stop_ticks: int | None = None


@order_event("order_pending_cancel", Trigger.PENDING_CANCEL, ":{request}")
class OrderPendingCancel(OrderEvent):
    request: int


@order_event("order_updated", Trigger.UPDATE, ":{update_id}")
class OrderUpdated(OrderEvent):
    """The venue changed the order (on request or unasked); `update_id` is the venue's report id."""

    update_id: str
    quantity: int
    limit_ticks: int | None = None
    stop_ticks: int | None = None


@order_event("order_modify_rejected", Trigger.MODIFY_REJECT, ":{request}")
class OrderModifyRejected(OrderEvent):
    request: int
    reason: str


@order_event("order_cancel_rejected", Trigger.CANCEL_REJECT, ":{request}")
class OrderCancelRejected(OrderEvent):
    request: int
    reason: str


@order_event("order_filled", id_suffix=":{fill_id}")
class OrderFilled(OrderEvent):
    """One execution. Carries symbol and side so that a position is folded from fills alone."""

    fill_id: str  # the venue's trade id: the same execution reported twice keeps one id
    symbol: str
    side: Side
    quantity: int
    price_ticks: int
    commission: Decimal
    @property
    def signed_quantity(self) -> int:
        return self.quantity * self.side.sign


@order_event("order_canceled", Trigger.CANCEL)
class OrderCanceled(OrderEvent):
    reason: str = ""


@order_event("order_expired", Trigger.EXPIRE)
class OrderExpired(OrderEvent):
    """The venue ended it: its time in force ran out."""

