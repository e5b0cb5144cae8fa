"""Session-local clock features, vectorised per UTC-offset segment rather than per row.

`SessionClock` finds the zone's offset changes inside the data's span once (probing the zone
once a day and bisecting to the second where the offset changes); rows then look their offset
up with one searchsorted.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np

from foxhunt.data.instruments import Session

NS_PER_S = 1_000_000_000
NS_PER_MIN = 60 * NS_PER_S
S_PER_DAY = 86_400
NS_PER_DAY = S_PER_DAY * NS_PER_S
MIN_PER_DAY = 1440.0
MIN_PER_WEEK = 7 * 1440

def _offset_s(zone: ZoneInfo, sec: int) -> int:
    off = datetime.fromtimestamp(sec, zone).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def offset_changes(tz: str, first_s: int, last_s: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, offsets): offsets[i] (seconds) holds from starts[i-1] (UTC s) on; offsets[0] before.

    Assumes at most one change per UTC day, true of every zone since 1900.
    """
    zone = ZoneInfo(tz)
    grid = range(first_s // S_PER_DAY * S_PER_DAY, last_s // S_PER_DAY * S_PER_DAY + 2 * S_PER_DAY,
                 S_PER_DAY)
    probes = [_offset_s(zone, g) for g in grid]
    starts, offsets = [], [probes[0]]
    for g, before, after in zip(grid, probes, probes[1:], strict=False):
        if before == after:
            continue
        lo, hi = g, g + S_PER_DAY
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if _offset_s(zone, mid) == before else (lo, mid)
        starts.append(hi)
        offsets.append(after)
    return np.asarray(starts, dtype=np.int64), np.asarray(offsets, dtype=np.int64)


class SessionClock:
    """Clock features of timestamps inside [first_ns, last_ns], in `session`'s zone."""

    def __init__(self, session: Session, first_ns: int, last_ns: int):
        self.session = session
        self._starts, self._offsets = offset_changes(
            session.tz, first_ns // NS_PER_S, last_ns // NS_PER_S
        )
        self._open = float(session.minutes("open"))
        self._length = float((session.minutes("close") - session.minutes("open")) % 1440 or 1440)
        self._lut: dict[str, np.ndarray] | None = None

    def utc_offsets_ns(self, ts: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(self._starts, np.floor_divide(ts, NS_PER_S), side="right")
        return self._offsets[idx] * NS_PER_S

    def _local(self, ts: np.ndarray) -> np.ndarray:
        """ts shifted to the session's wall clock (int64 ns)."""
        if len(ts):
            first, last = np.searchsorted(
                self._starts, [int(ts.min()) // NS_PER_S, int(ts.max()) // NS_PER_S],
                side="right")
            if first == last:  # no offset change inside: one offset for every row
                return ts + int(self._offsets[first]) * NS_PER_S
        return ts + self.utc_offsets_ns(ts)

    def features(self, ts: np.ndarray) -> dict[str, np.ndarray]:
        """Time of day, day of week and place in the trading session, in the session's zone.

        A bar is stamped with its close, so a bar closing exactly at the session open belongs
        to the previous session (or the break): minutes since open run over (0, 1440]. The
        trigonometry runs in float32, the output precision, where it is ~10x faster.
        """
        return self._of_local(self._local(ts))

    def write(self, ts: np.ndarray, dst: dict[str, np.ndarray]) -> None:
        """`features(ts)` rounded into the float32 rows dst[name], bit for bit.

        Every feature is a function of the wall-clock time modulo one week; when every stamp
        falls on a whole minute they are looked up in a table of the features of each minute
        of two weeks, built once by `features`' own arithmetic."""
        local = self._local(ts)
        minute = np.floor_divide(local, NS_PER_MIN)
        if len(ts) and np.array_equal(minute * NS_PER_MIN, local):
            idx = minute - int(minute[0]) // MIN_PER_WEEK * MIN_PER_WEEK
            if not (0 <= int(idx.min()) and int(idx.max()) < 2 * MIN_PER_WEEK):
                idx = np.remainder(minute, MIN_PER_WEEK)
            table = self._table()
            for name, row in table.items():
                np.take(row, idx, out=dst[name], mode="clip")
            return
        for name, col in self._of_local(local).items():
            dst[name][...] = col

    def _table(self) -> dict[str, np.ndarray]:
        if self._lut is None:
            grid = np.arange(2 * MIN_PER_WEEK, dtype=np.int64) * NS_PER_MIN
            self._lut = {k: v.astype(np.float32) for k, v in self._of_local(grid).items()}
        return self._lut

    def _of_local(self, local: np.ndarray) -> dict[str, np.ndarray]:
        days = np.floor_divide(local, NS_PER_DAY)
        minute = (local - days * NS_PER_DAY) / NS_PER_MIN
        day_angle = (minute * (2.0 * np.pi / MIN_PER_DAY)).astype(np.float32)
        week_angle = np.mod(days + 3, 7) + minute / MIN_PER_DAY
        week_angle = (week_angle * (2.0 * np.pi / 7.0)).astype(np.float32)
        since = np.mod(minute - self._open, MIN_PER_DAY)
        since[since == 0.0] = MIN_PER_DAY
        to_close = np.maximum(self._length - since, 0.0).astype(np.float32)
        return {
            "tod_sin": np.sin(day_angle),
            "tod_cos": np.cos(day_angle),
            "dow_sin": np.sin(week_angle),
            "dow_cos": np.cos(week_angle),
            "session_elapsed": np.minimum(since, self._length) / self._length,
            "session_to_close": np.log1p(to_close) / np.float32(np.log1p(self._length)),
        }
