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
    ID_FORMAT: ClassVar[str] = "{client_order_id}:{KIND}"
    client_order_id: str


@event("order_initialized", "{client_order_id}:{KIND}")
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


@event("order_denied", "{client_order_id}:{KIND}")
class OrderDenied(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.DENY
    check: str  # the risk limit's config key
    reason: str


@event("order_submitted", "{client_order_id}:{KIND}")
class OrderSubmitted(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.SUBMIT


@event("order_accepted", "{client_order_id}:{KIND}")
class OrderAccepted(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.ACCEPT
    venue_order_id: str


@event("order_rejected", "{client_order_id}:{KIND}")
class OrderRejected(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.REJECT
    reason: str


@event("order_triggered", "{client_order_id}:{KIND}")
class OrderTriggered(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.TRIGGER


@event("order_pending_update", "{client_order_id}:{KIND}:{request}")
class OrderPendingUpdate(OrderEvent):
    """An update request sent to the venue; None keeps a field as it is."""

    TRIGGER: ClassVar[Trigger] = Trigger.PENDING_UPDATE
    request: int  # the order's n-th request (cancel or update), from 1
    quantity: int | None = None
    limit_ticks: int | None = None
    stop_ticks: int | None = None


@event("order_pending_cancel", "{client_order_id}:{KIND}:{request}")
class OrderPendingCancel(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.PENDING_CANCEL
    request: int


@event("order_updated", "{client_order_id}:{KIND}:{update_id}")
class OrderUpdated(OrderEvent):
    """The venue changed the order (on request or unasked); `update_id` is the venue's report id."""

    TRIGGER: ClassVar[Trigger] = Trigger.UPDATE
    update_id: str
    quantity: int
    limit_ticks: int | None = None
    stop_ticks: int | None = None


@event("order_modify_rejected", "{client_order_id}:{KIND}:{request}")
class OrderModifyRejected(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.MODIFY_REJECT
    request: int
    reason: str


@event("order_cancel_rejected", "{client_order_id}:{KIND}:{request}")
class OrderCancelRejected(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.CANCEL_REJECT
    request: int
    reason: str


@event("order_filled", "{client_order_id}:{KIND}:{fill_id}")
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


@event("order_canceled", "{client_order_id}:{KIND}")
class OrderCanceled(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.CANCEL
    reason: str = ""


@event("order_expired", "{client_order_id}:{KIND}")
class OrderExpired(OrderEvent):
    TRIGGER: ClassVar[Trigger] = Trigger.EXPIRE

