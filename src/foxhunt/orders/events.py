"""Events: the facts the event log stores and every piece of trading state is folded from.

Each event is a small frozen record with a timestamp (int64 ns UTC) and a deterministic
`event_id`: the same fact reported twice (a venue resending a fill, an agent resending an order)
has the same id, so the log keeps it once. Order events name their order by client order id;
prices are integer ticks, quantities whole contracts, money `Decimal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import ClassVar

from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.state import Trigger


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every logged event. `KIND` names it in the log; `event_id` makes it unique."""

    KIND: ClassVar[str] = ""
    ts_ns: int

    @property
    def event_id(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderEvent(Event):
    TRIGGER: ClassVar[Trigger]
    client_order_id: str

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:{self.KIND}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderInitialized(OrderEvent):
    """The order as the OMS built it from a request; it starts every order's history."""

    KIND: ClassVar[str] = "order_initialized"
    symbol: str
    side: Side
    quantity: int
    order_type: OrderType
    time_in_force: TimeInForce
    limit_ticks: int | None = None
    stop_ticks: int | None = None
    reduce_only: bool = False
    tag: str = ""  # who asked: a strategy name, "kill_switch", ...


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderDenied(OrderEvent):
    KIND: ClassVar[str] = "order_denied"
    TRIGGER: ClassVar[Trigger] = Trigger.DENY
    check: str  # the risk limit's config key
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderSubmitted(OrderEvent):
    KIND: ClassVar[str] = "order_submitted"
    TRIGGER: ClassVar[Trigger] = Trigger.SUBMIT


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderAccepted(OrderEvent):
    KIND: ClassVar[str] = "order_accepted"
    TRIGGER: ClassVar[Trigger] = Trigger.ACCEPT
    venue_order_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderRejected(OrderEvent):
    KIND: ClassVar[str] = "order_rejected"
    TRIGGER: ClassVar[Trigger] = Trigger.REJECT
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderTriggered(OrderEvent):
    KIND: ClassVar[str] = "order_triggered"
    TRIGGER: ClassVar[Trigger] = Trigger.TRIGGER


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderPendingUpdate(OrderEvent):
    """An update request sent to the venue; None keeps a field as it is."""

    KIND: ClassVar[str] = "order_pending_update"
    TRIGGER: ClassVar[Trigger] = Trigger.PENDING_UPDATE
    request: int  # the order's n-th request (cancel or update), from 1
    quantity: int | None = None
    limit_ticks: int | None = None
    stop_ticks: int | None = None

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:{self.KIND}:{self.request}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderPendingCancel(OrderEvent):
    KIND: ClassVar[str] = "order_pending_cancel"
    TRIGGER: ClassVar[Trigger] = Trigger.PENDING_CANCEL
    request: int

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:{self.KIND}:{self.request}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderUpdated(OrderEvent):
    """The venue changed the order (on request or unasked); `update_id` is the venue's report id."""

    KIND: ClassVar[str] = "order_updated"
    TRIGGER: ClassVar[Trigger] = Trigger.UPDATE
    update_id: str
    quantity: int
    limit_ticks: int | None = None
    stop_ticks: int | None = None

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:{self.KIND}:{self.update_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderModifyRejected(OrderEvent):
    KIND: ClassVar[str] = "order_modify_rejected"
    TRIGGER: ClassVar[Trigger] = Trigger.MODIFY_REJECT
    request: int
    reason: str

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:{self.KIND}:{self.request}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderCancelRejected(OrderEvent):
    KIND: ClassVar[str] = "order_cancel_rejected"
    TRIGGER: ClassVar[Trigger] = Trigger.CANCEL_REJECT
    request: int
    reason: str

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:{self.KIND}:{self.request}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderFilled(OrderEvent):
    """One execution. Carries symbol and side so that a position is folded from fills alone."""

    KIND: ClassVar[str] = "order_filled"
    fill_id: str  # the venue's trade id: the same execution reported twice keeps one id
    symbol: str
    side: Side
    quantity: int
    price_ticks: int
    commission: Decimal

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:{self.KIND}:{self.fill_id}"

    @property
    def signed_quantity(self) -> int:
        return self.quantity * self.side.sign


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderCanceled(OrderEvent):
    KIND: ClassVar[str] = "order_canceled"
    TRIGGER: ClassVar[Trigger] = Trigger.CANCEL
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderExpired(OrderEvent):
    KIND: ClassVar[str] = "order_expired"
    TRIGGER: ClassVar[Trigger] = Trigger.EXPIRE


ORDER_EVENTS: tuple[type[OrderEvent], ...] = (
    OrderInitialized,
    OrderDenied,
    OrderSubmitted,
    OrderAccepted,
    OrderRejected,
    OrderTriggered,
    OrderPendingUpdate,
    OrderPendingCancel,
    OrderUpdated,
    OrderModifyRejected,
    OrderCancelRejected,
    OrderFilled,
    OrderCanceled,
    OrderExpired,
)
