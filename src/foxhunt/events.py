"""Events: the base of every fact the event log stores, and the one registry of their kinds.

Each event is a small frozen record with a timestamp (int64 ns UTC) and a deterministic
`event_id`: the same fact reported twice (a venue resending a fill, an agent resending an order)
has the same id, so the log keeps it once. Each layer defines its own events (orders, account,
risk) with `event`, which registers the class under its kind; the log's codec reads them all
from `EVENT_CLASSES`, so a new event class needs no list kept by hand.

`EVENT_CLASSES` is module state, and acceptable as such: it describes code, not a run. It is
filled as each event class is defined, at import, and only read after, like a dataclass's
fields; a second class of a kind is refused.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import ClassVar


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


_classes_by_kind: dict[str, type[Event]] = {}
EVENT_CLASSES: Mapping[str, type[Event]] = MappingProxyType(_classes_by_kind)
"""The event class of each kind the log stores (a read-only view that `event` fills)."""


def event(kind: str, id_format: str):
    """Class decorator of every logged event: a frozen keyword-only record whose `KIND` names
    it in the log and whose `event_id` is `id_format` filled from its fields (and `{KIND}`),
    so the same fact always gets the same id. Registers the class in `EVENT_CLASSES`."""

    def wrap(cls):
        if not kind or kind in _classes_by_kind:
            raise TypeError(f"{cls.__name__}: event kind {kind!r} is empty or taken")
        cls.KIND, cls.ID_FORMAT = kind, id_format
        cls = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        cls.ID_FIELDS = _id_fields(cls)
        cls.event_id = _id_property(kind, id_format, cls.ID_FIELDS)
        _classes_by_kind[kind] = cls
        return cls

    return wrap


def _id_fields(cls: type) -> tuple[str, ...]:
    """The fields `cls.ID_FORMAT` names (looked up once: `dataclasses.fields` per id costs
    more than the format itself)."""
    names = {f.name for f in fields(cls)}
    used = {name for _, name, _, _ in string.Formatter().parse(cls.ID_FORMAT) if name}
    return tuple(sorted(used & names))


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
