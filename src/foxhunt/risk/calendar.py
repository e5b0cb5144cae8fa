"""The trading day: it ends at a fixed local time (16:00 Chicago for CME by default)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

_NS = 1_000_000_000


class TradingDay:
    def __init__(self, tz: str, close: str):
        self.tz = ZoneInfo(tz)
        h, m = close.split(":")
        self.close = time(int(h), int(m))

    def of(self, ts_ns: int) -> tuple[str, int]:
        """(ISO date of the trading day that `ts_ns` belongs to, that day's close in ns).

        A day runs from the previous close (inclusive) to its own close (exclusive), so the
        evening session after a close already belongs to the next day.
        """
        local = datetime.fromtimestamp(ts_ns // _NS, UTC).astimezone(self.tz)
        day = local.date()
        if local.time() >= self.close:
            day += timedelta(days=1)
        end = datetime.combine(day, self.close, tzinfo=self.tz)
        return day.isoformat(), int(end.timestamp()) * _NS
