"""Execution: the event log (SQL, append-only), the OMS that turns requests into events and
orders at a venue, and the venue boundary. The top of the trading core: imports orders,
portfolio and risk."""

from foxhunt.execution.codec import EventCodec, EventCodecError
from foxhunt.execution.engine import EngineStopped, TradingEngine
from foxhunt.execution.store import (
    DuplicateEventError,
    EventLogError,
    EventStore,
    SqlEventStore,
    StoredEvent,
    default_log_url,
)
from foxhunt.execution.venue import Venue, VenueReport

__all__ = [
    "DuplicateEventError", "EngineStopped", "EventCodec", "EventCodecError", "EventLogError",
    "EventStore", "SqlEventStore", "StoredEvent", "TradingEngine", "Venue", "VenueReport",
    "default_log_url",
]  # fmt: skip
