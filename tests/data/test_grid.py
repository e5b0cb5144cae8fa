"""Prices against the instrument's tick grid at import: refused with the row and the choices,
snapped onto it, or kept for data that is not exchange-native."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data.grid import GRID_TOLERANCE, check_bars, check_ticks, off_grid_mask, snap
from foxhunt.data.series import Bars, Ticks
from foxhunt.errors import ValidationError

TS = 1_700_000_000_000_000_000 + np.arange(4) * 60_000_000_000


def bars(close: list[float]) -> Bars:
    c = np.asarray(close)
    return Bars(TS[: len(c)], c, c + 0.5, c - 0.5, c, np.ones(len(c)))


def test_prices_on_the_grid_pass_untouched_and_are_recorded_so():
    b = bars([4000.0, 4000.25, 4000.5])
    out, found = check_bars(b, 0.25, "error", "es.csv")
    assert out is b and found.off_grid_rows == 0 and found.record == "on the 0.25 grid"


def test_decimal_prices_that_binary_cannot_hold_exactly_count_as_on_the_grid():
    prices = np.array([1.09035, 1.0904, 1.12345, 0.98765])  # multiples of 0.00005
    assert not off_grid_mask(prices, 0.00005).any()
    assert off_grid_mask(np.array([1.09036]), 0.00005).all()
    assert GRID_TOLERANCE < 0.01


def test_an_off_grid_file_is_refused_naming_the_first_row_the_count_and_the_choices():
    b = bars([4000.0, 4000.1, 4000.3, 4000.5])
    with pytest.raises(ValidationError) as err:
        check_bars(b, 0.25, "error", "es.csv")
    msg = str(err.value)
    assert msg.startswith("es.csv, row 2: 2 of 4 rows have prices off the tick grid 0.25")
    assert "open=4000.1" in msg and "--off-grid snap" in msg and "--off-grid keep" in msg


def test_snap_rounds_every_price_to_the_nearest_tick_and_says_how_many_rows_moved():
    b = bars([4000.1, 4000.3, 4000.5])
    out, found = check_bars(b, 0.25, "snap", "es.csv")
    np.testing.assert_array_equal(out.open, [4000.0, 4000.25, 4000.5])
    np.testing.assert_array_equal(out.high, [4000.5, 4000.75, 4001.0])
    assert found.record == "2 of 3 rows snapped to the 0.25 grid"


def test_keep_leaves_the_prices_as_they_are_and_records_that():
    b = bars([1.08731, 1.08742])
    out, found = check_bars(b, 0.00005, "keep", "eurusd.csv")
    assert out is b and found.record == "2 of 2 rows kept off the 5e-05 grid"


def test_ticks_follow_the_same_policies():
    t = Ticks(TS[:3], np.array([4000.0, 4000.1, 4000.25]), np.ones(3))
    with pytest.raises(ValidationError, match="row 2: 1 of 3 rows"):
        check_ticks(t, 0.25, "error", "t.csv")
    snapped, found = check_ticks(t, 0.25, "snap", "t.csv")
    np.testing.assert_array_equal(snapped.price, [4000.0, 4000.0, 4000.25])
    assert found.off_grid_rows == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 1e5), min_size=2, max_size=30),
       st.sampled_from([0.25, 0.01, 0.00005, 1 / 32, 10.0]))
def test_snapped_prices_are_on_the_grid_and_keep_their_order(prices, tick):
    p = np.sort(np.asarray(prices))
    s = snap(p, tick)
    assert not off_grid_mask(s, tick).any()
    assert (np.diff(s) >= 0).all() and (np.abs(s - p) <= tick / 2 + 1e-9 * p).all()
