"""Events: the facts the event log stores and every piece of trading state is folded from.

Each event is a small frozen record with a timestamp (int64 ns UTC) and a deterministic
`event_id`: the same fact reported twice (a venue resending a fill, an agent resending an order)
has the same id, so the log keeps it once. Order events name their order by client order id;
prices are integer ticks, quantities whole contracts, money `Decimal`.
"""

from __future__ import annotations

import operator
import string
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import ClassVar

from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.state import Trigger


def event(kind: str, id_format: str):
    """Class decorator of every logged event: a frozen keyword-only record whose `KIND` names
    it in the log and whose `event_id` is `id_format` filled from its fields (and `{KIND}`),
    so the same fact always gets the same id."""

    def wrap(cls):
        cls.KIND, cls.ID_FORMAT = kind, id_format
        cls = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        cls.ID_FIELDS = _id_fields(cls)
        cls.event_id = _id_property(kind, id_format, cls.ID_FIELDS)
        return cls

    return wrap


def _id_property(kind: str, id_format: str, names: tuple[str, ...]) -> property:
    """`event_id` of one class: its format with KIND filled in and the fields as positional
    arguments, read by one attrgetter (every event's id is taken on each commit: this costs a
    third of the generic `Event.event_id`)."""
    parts = []
    order = []
    for literal, name, spec, conv in string.Formatter().parse(id_format):
        parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        if name == "KIND":
            parts.append(format(kind, spec or "").replace("{", "{{").replace("}", "}}"))
            continue
        order.append(name)
        parts.append("{" + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}")
    template = "".join(parts)
    if not order:
        return property(lambda self: template)
    get = operator.attrgetter(*order)
    if len(order) == 1:
        return property(lambda self: template.format(get(self)))
    return property(lambda self: template.format(*get(self)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every logged event. `KIND` names it in the log; `event_id` makes it unique."""

    KIND: ClassVar[str] = ""
    ID_FORMAT: ClassVar[str] = ""
    ts_ns: int

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("ts_ns",)

    @property
    def event_id(self) -> str:
        return self.ID_FORMAT.format(KIND=self.KIND,
                                     **{name: getattr(self, name) for name in self.ID_FIELDS})


def _id_fields(cls: type) -> tuple[str, ...]:
    """The fields `cls.ID_FORMAT` names (looked up once: `dataclasses.fields` per id costs
    more than the format itself)."""
    names = {f.name for f in fields(cls)}
    used = {name for _, name, _, _ in string.Formatter().parse(cls.ID_FORMAT) if name}
    return tuple(sorted(used & names))


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
