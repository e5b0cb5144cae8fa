"""Session-local clock features, vectorised per UTC-offset segment rather than per row.

The offset of each row comes from the zone's transitions inside the data's span, found by
probing the zone once a day and bisecting to the second where the offset changes; rows then look
their offset up with one searchsorted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np

from foxhunt.data.instruments import Session

NS_PER_S = 1_000_000_000
NS_PER_MIN = 60 * NS_PER_S
S_PER_DAY = 86_400
NS_PER_DAY = S_PER_DAY * NS_PER_S
MIN_PER_DAY = 1440.0


def _offset_s(zone: ZoneInfo, sec: int) -> int:
    off = datetime.fromtimestamp(sec, UTC).astimezone(zone).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def utc_offsets_ns(ts: np.ndarray, tz: str) -> np.ndarray:
    """UTC offset (ns) of the zone `tz` at each timestamp (int64 ns UTC)."""
    if len(ts) == 0:
        return np.zeros(0, dtype=np.int64)
    zone = ZoneInfo(tz)
    sec = np.floor_divide(ts, NS_PER_S)
    first = int(sec.min()) // S_PER_DAY * S_PER_DAY
    last = int(sec.max()) // S_PER_DAY * S_PER_DAY + S_PER_DAY
    grid = range(first, last + 1, S_PER_DAY)
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
    idx = np.searchsorted(np.asarray(starts, dtype=np.int64), sec, side="right")
    return np.asarray(offsets, dtype=np.int64)[idx] * NS_PER_S


def calendar_features(ts: np.ndarray, session: Session) -> dict[str, np.ndarray]:
    """Time of day, day of week and position in the trading session, all in the session's zone.

    A bar is stamped with its close, so a bar closing exactly at the session open belongs to the
    previous session (or the break); minutes since open therefore run over (0, 1440].
    """
    local = ts + utc_offsets_ns(ts, session.tz)
    days = np.floor_divide(local, NS_PER_DAY)
    minute = (local - days * NS_PER_DAY) / NS_PER_MIN
    day_angle = minute * (2.0 * np.pi / MIN_PER_DAY)
    weekday = np.mod(days + 3, 7)
    week_angle = (weekday + minute / MIN_PER_DAY) * (2.0 * np.pi / 7.0)

    open_m, close_m = session.minutes("open"), session.minutes("close")
    length = float((close_m - open_m) % 1440 or 1440)
    since = np.mod(minute - open_m, MIN_PER_DAY)
    since[since == 0.0] = MIN_PER_DAY
    to_close = np.maximum(length - since, 0.0)
    return {
        "tod_sin": np.sin(day_angle),
        "tod_cos": np.cos(day_angle),
        "dow_sin": np.sin(week_angle),
        "dow_cos": np.cos(week_angle),
        "session_elapsed": np.minimum(since, length) / length,
        "session_to_close": np.log1p(to_close) / np.log1p(length),
    }
