"""The venue boundary: what the OMS asks of a venue, and what a venue reports back.

A venue (the paper broker, a FIX session, a broker's API) receives orders, cancels and
modifications, and later reports what happened as `VenueReport`s, which the OMS turns into
order events. A venue must not call the OMS from inside `submit`/`cancel`/`modify`: it queues
its reports and they are delivered after the call returns (`TradingEngine.on_report`).

A `LiveVenue` is one outside this process (a FIX session, a broker's API): it fills on its own
market, can drop and come back, and can be asked what it holds. Its promise, on which restart
recovery stands: a report is in its journal (`history`) before the venue acknowledges it to
the other side (a FIX sequence number, an API's callback returning), so a crash loses none of
what the venue had told us. The client order id is the OMS's own: the venue and the event log
always name an order the same way.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, Protocol

from foxhunt.orders.enums import Side
from foxhunt.orders.errors import TradingError
from foxhunt.orders.order import Order


class VenueError(TradingError):
    """The venue cannot be reached, refused the session, or did not answer in time."""


class Venue(Protocol):
    def submit(self, order: Order) -> None: ...

    def cancel(self, order: Order) -> None: ...

    def modify(
        self, order: Order, quantity: int | None, limit_ticks: int | None, stop_ticks: int | None
    ) -> None: ...

    def reports(self) -> list[VenueReport]:
        """What happened since the last call, in the order the venue said it (non-blocking)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class VenueOrder:
    """A working order as the venue sees it."""

    client_order_id: str
    venue_order_id: str
    symbol: str
    side: Side
    quantity: int  # the order's size now (after any accepted modification)
    filled: int
    limit_ticks: int | None = None
    stop_ticks: int | None = None

    @property
    def leaves(self) -> int:
        return self.quantity - self.filled


class LiveVenue(Venue, Protocol):
    """A venue outside this process. Queries block up to `timeout_s` and raise VenueError when
    the venue does not answer; they never change an order."""

    def connect(self, timeout_s: float) -> None:
        """Open the session (log on) and wait until it is up; VenueError on failure."""
        ...

    def close(self) -> None: ...

    @property
    def connected(self) -> bool: ...

    def take_reconnected(self) -> bool:
        """True once after each reconnect that followed a lost session: time to reconcile."""
        ...

    @property
    def history(self) -> list[VenueReport]:
        """Every report received, from the journal, in order (across restarts)."""
        ...

    def request_status(self, client_order_ids: Sequence[str]) -> None:
        """Ask for the state of these orders; each answer arrives later through `reports()` as
        an `OrderStatusReport`, or `UnknownOrder` when the venue never took it."""
        ...

    def open_orders(self, timeout_s: float) -> list[VenueOrder]: ...

    def positions(self, timeout_s: float) -> dict[str, int]:
        """Net signed contracts per symbol (symbols with none may be left out)."""
        ...


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


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderStatusReport(VenueReport):
    """An answer to a status request (or a mass status): no new fact, the venue's view of the
    order now. `state` is one of STATUS_STATES."""

    venue_order_id: str
    state: str
    filled: int
    leaves: int


STATUS_STATES = ("working", "filled", "canceled", "rejected", "expired")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownOrder(VenueReport):
    """The venue has no order with this client order id: it never took it."""

    reason: str = ""


REPORTS: dict[str, type[VenueReport]] = {
    cls.__name__: cls
    for cls in (Accepted, Rejected, Triggered, Filled, Canceled, Expired, Updated, CancelRejected,
                ModifyRejected, OrderStatusReport, UnknownOrder)
}  # fmt: skip


def report_to_json(report: VenueReport) -> dict[str, Any]:
    """A report as a JSON object (a venue journal's line)."""
    return {"kind": type(report).__name__, "report": asdict(report)}


def report_from_json(rec: Any) -> VenueReport:
    """A report from `report_to_json`'s object, every field checked; ValueError otherwise."""
    if not isinstance(rec, dict) or rec.get("kind") not in REPORTS:
        raise ValueError(f"unknown report {rec.get('kind') if isinstance(rec, dict) else rec!r}")
    return decode_dataclass(REPORTS[rec["kind"]], rec["report"])


_HINTS: dict[type, dict[str, Any]] = {}


def _field(tp: Any, value: Any, name: str) -> Any:
    """`value` read from JSON as the field type `tp`, or ValueError."""
    args = typing.get_args(tp)
    if type(None) in args:
        if value is None:
            return None
        (tp,) = [a for a in args if a is not type(None)]
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(value)
    if tp is Decimal:
        if type(value) not in (str, int):
            raise ValueError(f"{name} is {value!r}, not a decimal")
        return Decimal(value)
    if tp not in (int, str, bool) or type(value) is not tp:
        raise ValueError(f"{name} is {value!r}, not {getattr(tp, '__name__', tp)}")
    return value


def decode_dataclass(cls: type, data: Any) -> Any:
    """A dataclass from its JSON object, every field checked (a damaged line is refused)."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} is {type(data).__name__}, not an object")
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    unknown = set(data) - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has unknown fields {sorted(unknown)}")
    values = {}
    for f in fields:
        if f.name in data:
            values[f.name] = _field(hints[f.name], data[f.name], f.name)
        elif f.default is dataclasses.MISSING:
            raise ValueError(f"{cls.__name__} has no {f.name!r}")
    return cls(**values)
