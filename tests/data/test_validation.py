from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from foxhunt.data.series import Ticks
from foxhunt.data.validation import validate_bars, validate_ticks
from foxhunt.errors import DataError, ValidationError


def broken(bars, column: str, row: int, value):
    """`bars` with 1-based `row` of `column` set to `value`."""
    col = getattr(bars, column).copy()
    col[row - 1] = value
    return replace(bars, **{column: col})


def rule_and_row(call) -> tuple[str, int | None]:
    with pytest.raises(ValidationError) as e:
        call()
    return e.value.rule, e.value.row


def test_good_bars_pass(make_bars):
    validate_bars(make_bars(5), "f")
    validate_bars(make_bars(5, flow=True), "f")


@pytest.mark.parametrize(
    ("column", "value", "rule"),
    [
        ("high", 100.0, "high below open or close"),  # row 3: open 101.5, close 102
        ("low", 102.0, "low above open or close"),
        ("close", np.nan, "NaN or infinite price"),
        ("open", np.inf, "NaN or infinite price"),
        ("low", 0.0, "price not positive"),
        ("volume", -1.0, "negative volume"),
        ("volume", np.nan, "volume is NaN or infinite"),
    ],
)
def test_each_bar_rule_names_its_row(make_bars, column, value, rule):
    bars = broken(make_bars(5), column, 3, value)
    with pytest.raises(ValidationError) as e:
        validate_bars(bars, "es.csv")
    assert (e.value.rule, e.value.row) == (rule, 3)
    assert str(e.value).startswith(f"es.csv, row 3: {rule} (")


def test_unsorted_timestamps_name_the_row_that_steps_back(make_bars):
    bars = make_bars(5)
    ts = bars.ts.copy()
    ts[3] = ts[1] - 1
    assert rule_and_row(lambda: validate_bars(replace(bars, ts=ts), "f")) == (
        "timestamps not sorted",
        4,
    )


def test_duplicate_timestamp_names_the_repeat(make_bars):
    bars = make_bars(5)
    ts = bars.ts.copy()
    ts[2] = ts[1]
    with pytest.raises(ValidationError) as e:
        validate_bars(replace(bars, ts=ts), "f")
    assert (e.value.rule, e.value.row) == ("duplicate timestamp", 3)
    assert "2013-09-01T22:02:00.000000000Z, previous row 2013-09-01T22:02:00.000000000Z" in str(
        e.value
    )


def test_the_first_offending_row_wins_across_rules(make_bars):
    bars = broken(broken(make_bars(6), "volume", 5, -1.0), "high", 4, 1.0)
    assert rule_and_row(lambda: validate_bars(bars, "f")) == ("high below open or close", 4)


def test_nan_is_reported_as_nan_not_as_an_ohlc_violation(make_bars):
    bars = broken(make_bars(4), "high", 2, np.nan)
    assert rule_and_row(lambda: validate_bars(bars, "f")) == ("NaN or infinite price", 2)


def test_flow_columns_are_checked(make_bars):
    bars = broken(make_bars(4, flow=True), "sell_volume", 2, -3.0)
    assert rule_and_row(lambda: validate_bars(bars, "f")) == ("negative sell_volume", 2)


def test_empty_bars_have_no_rows(make_bars):
    with pytest.raises(DataError, match=r"^f: no rows$"):
        validate_bars(make_bars(3).slice(0, 0), "f")


def ticks(ts=(1, 2, 2, 3), price=(10.0, 10.25, 10.0, 10.5), size=(1, 2, 3, 4), side=None) -> Ticks:
    return Ticks(
        np.array(ts),
        np.array(price),
        np.array(size, dtype=float),
        None if side is None else np.array(side),
    )


def test_ticks_may_share_a_timestamp():
    validate_ticks(ticks(side=(1, -1, 0, 1)), "f")


@pytest.mark.parametrize(
    ("kwargs", "rule", "row"),
    [
        ({"ts": (1, 3, 2, 4)}, "timestamps not sorted", 3),
        ({"price": (10.0, np.nan, 10.0, 10.0)}, "NaN or infinite price", 2),
        ({"price": (10.0, 10.0, -1.0, 10.0)}, "price not positive", 3),
        ({"size": (1, 2, 3, 0)}, "size not positive", 4),
        ({"size": (1, np.inf, 3, 1)}, "NaN or infinite size", 2),
        ({"side": (1, 2, 0, 0)}, "side not -1, 0 or +1", 2),
    ],
)
def test_each_tick_rule_names_its_row(kwargs, rule, row):
    assert rule_and_row(lambda: validate_ticks(ticks(**kwargs), "f")) == (rule, row)


def test_validation_is_vectorised_over_a_million_rows(make_bars):
    bars = make_bars(1_000_000)
    validate_bars(bars, "f")
    assert rule_and_row(lambda: validate_bars(broken(bars, "low", 999_999, 1e9), "f")) == (
        "low above open or close",
        999_999,
    )
