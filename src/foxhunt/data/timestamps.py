"""Turn whatever a data file calls time into int64 nanoseconds UTC (docs/domain.md#time).

Row numbers in errors are 1-based data rows, header excluded: element ``i`` is row ``i + 1``.

Numeric epochs with ``unit='auto'`` are read by the magnitude of the largest ``|value|``:
below 1e11 seconds, below 1e14 milliseconds, below 1e17 microseconds, else nanoseconds. One
unit is chosen for the whole column, and the rule is unambiguous for dates between
1973-03-03 and 5138-11-16. Fractional epochs are rounded to the finest decimal step the float
can hold (for seconds since 1970 today: the microsecond), so 1378072800.083 reads as .083000.

Naive local times (no zone or offset) need ``tz``. They are converted per UTC offset, not per
row: the zone's transitions over the data's range are found once, and each row takes the offset
of its segment. Wall times skipped when clocks spring forward are read with the offset before
the jump (as ``zoneinfo`` does with ``fold=0``); wall times repeated when clocks fall back are
read as the first occurrence, unless the rows step back in time inside the repeated hour,
which marks the rows from that step on as the second occurrence.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from foxhunt.errors import DataError, ValidationError

TsUnit = Literal["auto", "s", "ms", "us", "ns", "iso"]

NS_PER = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_AUTO_LIMITS = ((1e11, "s"), (1e14, "ms"), (1e17, "us"))
_UTC_NS = pa.timestamp("ns", tz="UTC")
_NAIVE_NS = pa.timestamp("ns")
_DAY_S = 86_400
_UNPARSEABLE = "unparseable timestamp"
_ISO_HINT = "expected epoch numbers or ISO 8601 like 2013-09-01T17:00:00-05:00"


def to_utc_ns(
    values,
    *,
    unit: TsUnit = "auto",
    tz: str | None = None,
    source: str,
) -> np.ndarray:
    """Parse epochs, ISO 8601 strings or datetimes into int64 ns UTC.

    ``values``: numbers, strings, datetimes, a numpy array or a pyarrow array. Strings with a
    zone or offset ('Z', '-05:00') are exact; naive strings, naive datetimes and dates are
    local times in ``tz`` and fail without it. ``source`` names the input in errors.
    """
    if unit not in ("auto", "iso", *NS_PER):
        raise DataError(
            f"{source}: unknown timestamp unit {unit!r}; use auto, s, ms, us, ns or iso"
        )
    arr = _as_arrow(values, source)
    if arr.null_count:
        row = int(np.argmax(arr.is_null().to_numpy(zero_copy_only=False))) + 1
        raise ValidationError(_UNPARSEABLE, row, source, "empty")
    t = arr.type
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return _ints(pc.cast(arr, _UTC_NS))
        return localize(_ints(pc.cast(arr, _NAIVE_NS)), tz, source)
    if pa.types.is_date(t):
        return localize(_ints(pc.cast(pc.cast(arr, pa.timestamp("s")), _NAIVE_NS)), tz, source)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        if unit == "iso":
            raise DataError(
                f"{source}: timestamps are numbers, not ISO 8601 strings; use a numeric unit"
            )
        return _from_epoch(arr.to_numpy(zero_copy_only=False), unit, source)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _from_strings(pc.utf8_trim_whitespace(arr), unit, tz, source)
    raise DataError(f"{source}: timestamps of type {t} are not understood; {_ISO_HINT}")


def localize(local_ns: np.ndarray, tz: str | None, source: str) -> np.ndarray:
    """Naive wall-clock ns in ``tz`` -> ns UTC, vectorised per UTC-offset segment (module doc)."""
    if tz is None:
        raise DataError(
            f"{source}: timestamps have no time zone; pass --tz (e.g. --tz America/Chicago)"
        )
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise DataError(
            f"{source}: unknown time zone {tz!r}; use an IANA name like America/Chicago"
        ) from None
    local = np.asarray(local_ns, dtype=np.int64)
    if local.size == 0:
        return local.copy()
    first_s = int(local.min() // NS_PER["s"]) - 2 * _DAY_S
    last_s = int(local.max() // NS_PER["s"]) + 2 * _DAY_S
    start_off, transitions = _transitions(zone, first_s, last_s)
    if not transitions:
        return local - start_off
    utc = np.array([t for t, _, _ in transitions], dtype=np.int64)
    before = np.array([b for _, b, _ in transitions], dtype=np.int64)
    after = np.array([a for _, _, a in transitions], dtype=np.int64)
    switch_wall = utc + np.maximum(before, after)
    seg_offsets = np.concatenate([[start_off], after])
    offset = seg_offsets[np.searchsorted(switch_wall, local, side="right")]
    for t, b, a in transitions:
        if a >= b:
            continue
        repeated = (local >= t + a) & (local < t + b)
        if not repeated.any():
            continue
        back = np.flatnonzero(repeated[1:] & (local[1:] < local[:-1]))
        if back.size:
            second = repeated.copy()
            second[: back[0] + 1] = False
            offset[second] = a
    return local - offset


def format_ns(ns: int) -> str:
    """One timestamp as ISO 8601 UTC, for messages."""
    return str(np.datetime64(int(ns), "ns")) + "Z"


def _as_arrow(values, source: str) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    arr = np.asarray(values)
    if arr.dtype == object:
        try:
            return pa.array(arr.tolist())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            bad = first_failing_index(len(arr), lambda lo, hi: pa.array(arr[lo:hi].tolist()))
            raise ValidationError(_UNPARSEABLE, bad + 1, source, repr(arr[bad])) from None
    if arr.dtype.kind == "M":
        return pa.array(arr.astype("datetime64[ns]"))
    return pa.array(arr)


def _ints(ts: pa.Array) -> np.ndarray:
    return ts.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _from_strings(s: pa.Array, unit: str, tz: str | None, source: str) -> np.ndarray:
    """The first value picks the reading (a failed Arrow cast costs as much as a full parse)."""
    head = s[:1]
    if unit != "iso" and (unit != "auto" or _parses(head, pa.float64())):
        for num in (pa.int64(), pa.float64()):
            if _parses(head, num):
                try:
                    return _from_epoch(pc.cast(s, num).to_numpy(zero_copy_only=False), unit, source)
                except pa.ArrowInvalid:
                    continue
        _raise_unparseable(s, pa.float64(), source, "is not a number")
    for mode in (_UTC_NS, _NAIVE_NS):
        if _parses(head, mode):
            try:
                ns = _ints(pc.cast(s, mode))
            except pa.ArrowInvalid:
                _raise_unparseable(
                    s, mode, source, f"is not ISO 8601 like row 1 ({head[0].as_py()!r})"
                )
            return ns if mode is _UTC_NS else localize(ns, tz, source)
    raise ValidationError(_UNPARSEABLE, 1, source, f"{head[0].as_py()!r}; {_ISO_HINT}")


def _raise_unparseable(s: pa.Array, ty: pa.DataType, source: str, why: str) -> None:
    bad = first_failing_index(len(s), lambda lo, hi: pc.cast(s[lo:hi], ty))
    raise ValidationError(_UNPARSEABLE, bad + 1, source, f"{s[bad].as_py()!r} {why}")


def _parses(s: pa.Array, ty: pa.DataType) -> bool:
    try:
        pc.cast(s, ty)
    except pa.ArrowInvalid:
        return False
    return True


def _from_epoch(v: np.ndarray, unit: str, source: str) -> np.ndarray:
    if v.dtype.kind == "f":
        bad = ~np.isfinite(v)
        if bad.any():
            row = int(np.argmax(bad))
            raise ValidationError(_UNPARSEABLE, row + 1, source, repr(float(v[row])))
    peak = float(np.max(np.abs(v))) if v.size else 0.0
    if unit == "auto":
        unit = next((u for limit, u in _AUTO_LIMITS if peak < limit), "ns")
    factor = NS_PER[unit]
    limit = np.iinfo(np.int64).max // factor
    out_of_range = np.abs(v) > limit if v.dtype.kind == "f" else (v > limit) | (v < -limit)
    if out_of_range.any():
        row = int(np.argmax(out_of_range))
        raise ValidationError(
            "timestamp out of range", row + 1, source, f"{v[row]} {unit} since 1970"
        )
    if v.dtype.kind != "f":
        return v.astype(np.int64) * factor
    whole = np.floor(v)
    quantum = 10 ** max(0, int(np.ceil(np.log10(max(float(np.spacing(peak)) * factor, 1.0)))))
    frac = np.rint((v - whole) * (factor / quantum)).astype(np.int64) * quantum
    return whole.astype(np.int64) * factor + frac


def first_failing_index(n: int, attempt: Callable[[int, int], object]) -> int:
    """Index of the first element on which an element-wise ``attempt(lo, hi)`` fails.

    For error messages only: bisects over windows, so the probes touch O(n) elements in all.
    """
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            attempt(lo, mid)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            hi = mid
        else:
            lo = mid
    return lo


def open_stamp_evidence(ts: np.ndarray, tz: str, session_open: str, session_close: str,
                        bar_ns: int) -> str | None:
    """Why time bars stamped as closes look stamped with their opens, or None.

    The heuristic (docs/domain.md#time): in a session that shuts for part of the day (open !=
    close, e.g. CME Globex 17:00-16:00 Chicago), a bar stamped with its close can end at the
    session's close but never at its open, since it would have traded while the market was shut;
    a bar stamped with its open starts every session at the open and never sits on the close.
    So more bars at the session open than at its close (wall clock in `tz`, to the nanosecond)
    is the evidence. Bars of a day or longer, and sessions around the clock, say nothing.
    """
    ts = np.asarray(ts, dtype=np.int64)
    opens, closes = (_clock_ns(t) for t in (session_open, session_close))
    if opens == closes or not 0 < bar_ns < _DAY_S * NS_PER["s"] or ts.size == 0:
        return None
    zone = ZoneInfo(tz)
    hours, where = np.unique(np.floor_divide(ts, 3600 * NS_PER["s"]), return_inverse=True)
    offsets = np.array([_offset_ns(zone, int(h) * 3600) for h in hours], dtype=np.int64)
    clock = np.mod(ts + offsets[where], _DAY_S * NS_PER["s"])
    at_open, at_close = clock == opens, clock == closes
    if not at_open.any() or at_open.sum() <= at_close.sum():
        return None
    first = int(ts[int(np.argmax(at_open))])
    return (f"bars on the session open ({session_open} {tz}): {int(at_open.sum()):,}, the first "
            f"at {format_ns(first)}; on its close ({session_close}): {int(at_close.sum()):,}; a "
            "bar stamped with its close cannot end at the open")


def _clock_ns(hh_mm: str) -> int:
    h, m = hh_mm.split(":")
    return (int(h) * 60 + int(m)) * 60 * NS_PER["s"]


def _offset_ns(zone: ZoneInfo, utc_s: int) -> int:
    off = datetime.fromtimestamp(utc_s, tz=UTC).astimezone(zone).utcoffset()
    return int(off.total_seconds()) * NS_PER["s"]


def _transitions(
    zone: ZoneInfo, first_s: int, last_s: int
) -> tuple[int, list[tuple[int, int, int]]]:
    """Offset at ``first_s``, and (utc_ns, offset_before, offset_after) of each later change.

    Sampled once a day, then bisected to the second; zones never change offset twice a day.
    """
    first_s = max(first_s, -62_135_596_800 + 2 * _DAY_S)
    last_s = min(last_s, 253_402_300_799 - 2 * _DAY_S)
    start = _offset_ns(zone, first_s)
    out: list[tuple[int, int, int]] = []
    prev_s, prev = first_s, start
    for day_s in range(first_s + _DAY_S, last_s + _DAY_S, _DAY_S):
        cur = _offset_ns(zone, day_s)
        if cur != prev:
            lo, hi = prev_s, day_s
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset_ns(zone, mid) == prev:
                    lo = mid
                else:
                    hi = mid
            out.append((hi * NS_PER["s"], prev, cur))
        prev_s, prev = day_s, cur
    return start, out
