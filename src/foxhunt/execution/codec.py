"""Events to and from the log's rows: a kind name and a JSON object of the event's fields.

Decimals are written as strings (exact), enums by value, ints as JSON integers, keys sorted,
no spaces. The codec knows every event class of the trading core (`EVENT_CLASSES`, filled as
the layers define them); an unknown kind or a field that does not fit raises.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from decimal import Decimal
from enum import Enum
from typing import Any

# the layers' events, imported for their classes to register their kinds
import foxhunt.execution.rolls
import foxhunt.orders.events
import foxhunt.portfolio.events
import foxhunt.risk.events  # noqa: F401
from foxhunt.events import EVENT_CLASSES, Event
from foxhunt.orders.errors import TradingError


class EventCodecError(TradingError):
    pass


def _decoder(tp: Any):
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported field type {tp}")
        dec = _decoder(inner[0])
        return lambda v: None if v is None else dec(v)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp
    if tp is Decimal:
        return Decimal
    if tp in (int, str, bool):
        def check(v, tp=tp):
            if type(v) is not tp:
                raise TypeError(f"expected {tp.__name__}, got {v!r}")
            return v
        return check
    raise TypeError(f"unsupported field type {tp}")


def _encode(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Decimal):
        return str(value)
    return value


_PLAIN = (int, str, bool, int | None, str | None, bool | None)
"""Field types JSON takes as they are (no `_encode`)."""

_to_json = json.JSONEncoder(separators=(",", ":"), sort_keys=True, check_circular=False).encode
"""`json.dumps(payload, separators=(",", ":"), sort_keys=True)`, its encoder built once (a
payload holds scalars only: no cycle to look for)."""


class EventCodec:
    """Reads the event classes once (type hints, field order); immutable after, so one per
    process serves every log (`shared()`)."""

    @classmethod
    @functools.cache
    def shared(cls) -> EventCodec:
        """One codec for the process: building one reads every event class's type hints
        (~a third of opening a small log)."""
        return cls()

    def __init__(self):
        self._classes = dict(EVENT_CLASSES)
        self._fields: dict[str, list[tuple[str, Any]]] = {}
        self._encoders: dict[type[Event], list[tuple[str, bool]]] = {}  # (field, plain)
        for cls in self._classes.values():
            hints = typing.get_type_hints(cls)
            self._fields[cls.KIND] = [
                (f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls)
            ]
            self._encoders[cls] = [(f.name, hints[f.name] in _PLAIN)
                                   for f in dataclasses.fields(cls)]  # fmt: skip

    def encode(self, event: Event) -> tuple[str, str]:
        fields = self._encoders.get(type(event))
        if fields is None:
            raise EventCodecError(f"{type(event).__name__} is not an event the log knows")
        payload = {name: getattr(event, name) if plain else _encode(getattr(event, name))
                   for name, plain in fields}  # fmt: skip
        return event.KIND, _to_json(payload)

    def decode(self, kind: str, payload: str) -> Event:
        cls = self._classes.get(kind)
        if cls is None:
            raise EventCodecError(f"unknown event kind {kind!r} in the log")
        data = json.loads(payload)
        try:  # a field added later with a default is absent from older logs' payloads
            return cls(**{name: dec(data[name]) for name, dec in self._fields[kind] if name in data})
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise EventCodecError(f"{kind}: payload does not fit the event ({exc!r})") from None
