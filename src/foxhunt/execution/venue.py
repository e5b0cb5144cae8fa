"""The venue boundary: what the OMS asks of a venue, and what a venue reports back.

A venue (the paper broker, a FIX session, a broker's API) receives orders, cancels and
modifications, and later reports what happened as `VenueReport`s, which the OMS turns into
order events. A venue must not call the OMS from inside `submit`/`cancel`/`modify`: it queues
its reports and they are delivered after the call returns (`TradingEngine.on_report`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from foxhunt.orders.order import Order


class Venue(Protocol):
    def submit(self, order: Order) -> None: ...

    def cancel(self, order: Order) -> None: ...

    def modify(
        self, order: Order, quantity: int | None, limit_ticks: int | None, stop_ticks: int | None
    ) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class VenueReport:
    client_order_id: str
    ts_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted(VenueReport):
    venue_order_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected(VenueReport):
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Triggered(VenueReport):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Filled(VenueReport):
    fill_id: str  # the venue's execution id: a resent report carries the same one
    quantity: int
    price_ticks: int
    commission: Decimal | None = None  # None: the contract's commission per contract


@dataclass(frozen=True, slots=True, kw_only=True)
class Canceled(VenueReport):
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Expired(VenueReport):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Updated(VenueReport):
    update_id: str
    quantity: int
    limit_ticks: int | None = None
    stop_ticks: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRejected(VenueReport):
    reason: str
    request: int | None = None  # None: the order's latest request


@dataclass(frozen=True, slots=True, kw_only=True)
class ModifyRejected(VenueReport):
    reason: str
    request: int | None = None
