from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data.timestamps import format_ns, localize, to_utc_ns
from foxhunt.errors import DataError, ValidationError

T0 = 1_378_072_800_000_000_000  # 2013-09-01T22:00:00Z
CHICAGO = "America/Chicago"


def iso(ns) -> list[str]:
    return [format_ns(x) for x in ns]


@pytest.mark.parametrize(
    ("values", "unit"),
    [
        ([1_378_072_800], "s"),
        ([1_378_072_800_000], "ms"),
        ([1_378_072_800_000_000], "us"),
        ([T0], "ns"),
    ],
)
def test_epoch_unit_is_detected_from_magnitude_and_can_be_declared(values, unit):
    assert to_utc_ns(values, source="f").tolist() == [T0]
    assert to_utc_ns(values, unit=unit, source="f").tolist() == [T0]
    assert to_utc_ns([str(v) for v in values], source="f").tolist() == [T0]


def test_fractional_epoch_seconds_keep_their_milliseconds():
    assert to_utc_ns([1_378_072_800.083], source="f").tolist() == [T0 + 83_000_000]


def test_a_declared_unit_overrides_magnitude():
    assert to_utc_ns([1_000], unit="ms", source="f").tolist() == [1_000_000_000]


@pytest.mark.parametrize(
    "text",
    [
        "2013-09-01T17:00:00.083-05:00",
        "2013-09-01T22:00:00.083Z",
        "2013-09-02T03:30:00.083+05:30",
        " 2013-09-01T22:00:00.083Z ",
    ],
)
def test_iso_strings_with_zone_or_offset_are_exact(text):
    assert to_utc_ns([text], source="f").tolist() == [T0 + 83_000_000]


def test_aware_arrow_timestamps_and_datetimes_are_converted_to_utc():
    aware = datetime(2013, 9, 1, 17, tzinfo=ZoneInfo(CHICAGO))
    assert to_utc_ns([aware], source="f").tolist() == [T0]
    arr = pa.array([T0], type=pa.timestamp("ns", tz=CHICAGO))
    assert to_utc_ns(arr, source="f").tolist() == [T0]


def test_naive_timestamps_without_tz_are_refused_with_the_fix():
    with pytest.raises(DataError) as e:
        to_utc_ns(["2013-09-01 17:00:00"], source="es.csv")
    assert (
        str(e.value)
        == "es.csv: timestamps have no time zone; pass --tz (e.g. --tz America/Chicago)"
    )
    with pytest.raises(DataError, match="no time zone"):
        to_utc_ns([datetime(2013, 9, 1, 17)], source="es.csv")


def test_naive_local_times_use_summer_and_winter_offsets():
    got = to_utc_ns(
        ["2013-09-01 17:00:00", "2013-12-01 17:00", "2013-12-02"], tz=CHICAGO, source="f"
    )
    assert iso(got) == [
        "2013-09-01T22:00:00.000000000Z",  # CDT, UTC-5
        "2013-12-01T23:00:00.000000000Z",  # CST, UTC-6
        "2013-12-02T06:00:00.000000000Z",
    ]


def test_dst_gap_and_repeated_hour():
    wall = [
        "2013-03-10 01:59",
        "2013-03-10 02:30",
        "2013-03-10 03:00",  # spring forward at 02:00 CST
        "2013-11-03 00:59",
        "2013-11-03 01:30",
        "2013-11-03 01:00",  # falls back at 02:00 CDT
        "2013-11-03 01:30",
        "2013-11-03 02:00",
    ]
    assert iso(to_utc_ns(wall, tz=CHICAGO, source="f")) == [
        "2013-03-10T07:59:00.000000000Z",
        "2013-03-10T08:30:00.000000000Z",  # a skipped wall time: the offset before the jump
        "2013-03-10T08:00:00.000000000Z",
        "2013-11-03T05:59:00.000000000Z",
        "2013-11-03T06:30:00.000000000Z",  # first 01:30: CDT
        "2013-11-03T07:00:00.000000000Z",  # the step back marks the second 01:00: CST
        "2013-11-03T07:30:00.000000000Z",
        "2013-11-03T08:00:00.000000000Z",
    ]


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([CHICAGO, "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]),
    st.lists(st.integers(0, 3 * 365 * 24 * 4), min_size=1, max_size=300, unique=True),
)
def test_vectorised_localize_matches_zoneinfo_row_by_row(tz, quarter_hours):
    """Sorted distinct wall times never step back, so every row is zoneinfo's fold=0 reading."""
    start = datetime(2012, 1, 1)
    walls = [start + timedelta(minutes=15 * q) for q in sorted(quarter_hours)]
    local = np.array([int((w - datetime(1970, 1, 1)).total_seconds()) * 10**9 for w in walls])
    zone = ZoneInfo(tz)
    expected = [int(w.replace(tzinfo=zone).timestamp()) * 10**9 for w in walls]
    assert localize(local, tz, "f").tolist() == expected


def test_localize_handles_half_a_million_rows_vectorised():
    local = (
        np.datetime64("2013-01-01T00:00", "ns").astype(np.int64) + np.arange(500_000) * 60 * 10**9
    )
    utc = localize(local, CHICAGO, "f")
    offsets = np.unique(local - utc) // 3_600_000_000_000
    assert offsets.tolist() == [-6, -5]


def test_unparseable_timestamp_names_the_data_row():
    with pytest.raises(ValidationError) as e:
        to_utc_ns(["2013-09-01T22:00:00Z", "2013-09-01T22:01:00Z", "yesterday"], source="es.csv")
    assert e.value.rule == "unparseable timestamp" and e.value.row == 3
    assert str(e.value).startswith("es.csv, row 3: unparseable timestamp ('yesterday'")


def test_mixing_aware_and_naive_strings_names_the_odd_row():
    with pytest.raises(ValidationError) as e:
        to_utc_ns(["2013-09-01T22:00:00Z", "2013-09-01 22:01:00"], source="f")
    assert e.value.row == 2


@pytest.mark.parametrize(
    ("values", "row"),
    [
        (["1378072800", "1378072860", "x"], 3),
        ([1.0, float("nan")], 2),
        (["2013-09-01T22:00:00Z", None], 2),
    ],
)
def test_bad_epochs_and_empty_cells_name_the_row(values, row):
    with pytest.raises(ValidationError) as e:
        to_utc_ns(values, source="f")
    assert (e.value.rule, e.value.row) == ("unparseable timestamp", row)


def test_unknown_time_zone_is_a_one_line_error():
    with pytest.raises(DataError, match="unknown time zone 'Mars/Olympus'"):
        to_utc_ns(["2013-09-01 17:00"], tz="Mars/Olympus", source="f")


def test_first_row_is_found_far_into_a_large_column():
    values = [str(1_378_072_800 + i) for i in range(100_000)]
    values[77_777] = "1378O72800"
    with pytest.raises(ValidationError) as e:
        to_utc_ns(values, source="f")
    assert e.value.row == 77_778


def test_utc_datetimes_round_trip_through_format_ns():
    dt = datetime(2013, 9, 1, 22, tzinfo=UTC)
    assert format_ns(to_utc_ns([dt], source="f")[0]) == "2013-09-01T22:00:00.000000000Z"
