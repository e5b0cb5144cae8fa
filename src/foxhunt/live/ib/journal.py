"""The IB venue's journal: what it sent and every report it received, one JSON line each.

Two kinds of line: `order` (our client order id <-> IB's integer order id and the order's
terms, written before the order goes to TWS, so a restart can name IB's orders) and `report`
(a report, written and synced before the OMS can read it). A torn last line (the process died
writing it) is dropped; any other damaged line is an error naming the file and the line.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from foxhunt.execution import venue as v
from foxhunt.fileio import read_json_lines
from foxhunt.orders.enums import OrderType, Side, TimeInForce

_datasync = getattr(os, "fdatasync", os.fsync)


@dataclass(frozen=True, slots=True, kw_only=True)
class SentOrder:
    """An order as it went to TWS: IB's order id and our terms."""

    client_order_id: str
    order_id: int
    symbol: str
    side: Side
    quantity: int
    order_type: OrderType
    time_in_force: TimeInForce
    limit_ticks: int | None = None
    stop_ticks: int | None = None


class JournalError(v.VenueError):
    """The IB venue's journal cannot be read back or written."""


class Journal:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.orders: list[SentOrder] = []
        self.reports: list[v.VenueReport] = []
        if self.path.exists():
            self._read()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise JournalError(f"IB venue journal {self.path}: cannot open it "
                               f"({exc.strerror or exc})") from None  # fmt: skip

    def _read(self) -> None:
        read_json_lines(self.path, self._apply, lambda m: JournalError(
            f"IB venue journal {m}; move the file aside (the event log holds every report it "
            "applied)"))

    def _apply(self, rec: Any) -> None:
        if not isinstance(rec, dict):
            raise TypeError("not an object")
        if rec.get("op") == "order":
            self.orders.append(v.decode_dataclass(SentOrder, rec["order"]))
        elif rec.get("op") == "report":
            self.reports.append(v.report_from_json(rec["report"]))
        else:
            raise ValueError(f"unknown op {rec.get('op')!r}")

    def write_order(self, sent: SentOrder) -> None:
        data = {**asdict(sent), "side": sent.side.value, "order_type": sent.order_type.value,
                "time_in_force": sent.time_in_force.value}  # fmt: skip
        self._write({"op": "order", "order": data})
        self.orders.append(sent)

    def write_report(self, report: v.VenueReport) -> None:
        self._write({"op": "report", "report": v.report_to_json(report)})
        self.reports.append(report)

    def _write(self, rec: dict[str, Any]) -> None:
        """One line, flushed and synced: on disk before anyone reads it."""
        try:
            self._fh.write(json.dumps(rec, default=str) + "\n")
            self._fh.flush()
            _datasync(self._fh.fileno())
        except (OSError, ValueError) as exc:
            raise JournalError(f"IB venue journal {self.path}: cannot write it ({exc})") from None

    def close(self) -> None:
        self._fh.close()
