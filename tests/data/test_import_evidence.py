"""What an import tells: prices it snapped, bars that look stamped with their opens, a file
without volume (and the features it leaves out)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from foxhunt.data.grid import check_bars, check_ticks
from foxhunt.data.readers import read_bars
from foxhunt.data.series import Bars, Ticks
from foxhunt.data.store import MarketStore
from foxhunt.data.timestamps import open_stamp_evidence
from foxhunt.errors import DataError
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import fit_to_bars

MINUTE = 60 * 1_000_000_000
GLOBEX = ("America/Chicago", "17:00", "16:00")


def _ns(*ymdhm: int) -> int:
    return int(datetime(*ymdhm, tzinfo=UTC).timestamp()) * 1_000_000_000


def _session_minutes(open_stamped: bool) -> np.ndarray:
    """One CME Globex session of 1-minute bars: Sunday 2023-11-12 17:00 to Monday 16:00 Chicago
    (23:00 to 22:00 UTC in November), stamped with each bar's open or its close."""
    opens = _ns(2023, 11, 12, 23, 0) + np.arange(23 * 60, dtype=np.int64) * MINUTE
    return opens if open_stamped else opens + MINUTE


def _bars(ts: np.ndarray, price: float = 4000.0, volume: float | None = 1.0) -> Bars:
    n = len(ts)
    p = np.full(n, price)
    return Bars(ts=ts, open=p.copy(), high=p + 0.5, low=p - 0.5, close=p.copy(),
                volume=np.full(n, 0.0 if volume is None else volume))


def test_open_stamped_globex_bars_give_their_evidence():
    evidence = open_stamp_evidence(_session_minutes(True), *GLOBEX, MINUTE)
    assert evidence is not None
    assert "session open (17:00 America/Chicago): 1, the first at 2023-11-12T23:00" in evidence
    assert "on its close (16:00): 0" in evidence


def test_close_stamped_bars_and_sessions_around_the_clock_say_nothing():
    assert open_stamp_evidence(_session_minutes(False), *GLOBEX, MINUTE) is None
    assert open_stamp_evidence(_session_minutes(True), "UTC", "00:00", "00:00", MINUTE) is None
    day = 24 * 60 * MINUTE
    assert open_stamp_evidence(_session_minutes(True), *GLOBEX, day) is None


def test_summer_time_moves_the_session_open_in_utc():
    july = _ns(2023, 7, 9, 22, 0) + np.arange(90, dtype=np.int64) * MINUTE  # 17:00 CDT
    assert open_stamp_evidence(july, *GLOBEX, MINUTE) is not None
    assert open_stamp_evidence(july + MINUTE, *GLOBEX, MINUTE) is None


def test_a_snap_counts_the_rows_and_prices_it_moved():
    bars = _bars(_session_minutes(False)[:10], price=4000.1)
    bars.open[0] = 4000.0  # on the grid: 3 prices off in row 0, 4 in every other
    snapped, found = check_bars(bars, 0.25, "snap", "x.csv")
    assert found.snapped == (10, 39)
    assert found.snap_note("ES 1min") == ("ES 1min: snapped 10 of 10 rows (39 prices) to the 0.25 "
                                          "grid (--off-grid snap)")
    assert check_bars(bars, 0.25, "keep", "x.csv")[1].snapped == (0, 0)
    assert check_bars(snapped, 0.25, "snap", "x.csv")[1].snap_note("x") is None
    ticks = Ticks(ts=bars.ts, price=np.r_[4000.1, np.full(9, 4000.0)], size=np.ones(10))
    assert check_ticks(ticks, 0.25, "snap", "t.csv")[1].snapped == (1, 1)


def test_the_store_reports_what_a_snap_moved(tmp_path):
    with MarketStore(tmp_path / "s.duckdb") as store:
        report = store.write_bars("ES", "1min", _bars(_session_minutes(False)[:5], 4000.1),
                                  "x.csv", tick_size=0.25, off_grid="snap")
        assert report.snapped == {"rows": 5, "prices": 20}
        assert any("snapped 5 of 5 rows (20 prices)" in n for n in report.notes("ES 1min"))
        plain = store.write_bars("ES", "1min", _bars(_session_minutes(False)[:5]), "y.csv")
        assert plain.snapped == {"rows": 0, "prices": 0}


def test_a_bar_file_without_volume_imports_with_volume_zero(tmp_path):
    path = tmp_path / "novol.csv"
    ts = _session_minutes(False)[:5]
    path.write_text("ts,open,high,low,close\n" + "".join(
        f"{t},4000,4000.5,3999.5,4000.25\n" for t in ts))
    bars = read_bars(path)
    assert np.array_equal(bars.volume, np.zeros(5)) and not bars.has_volume
    assert _bars(ts).has_volume
    flow_only = tmp_path / "flow.csv"
    flow_only.write_text("ts,open,high,low,close,buy_volume,sell_volume\n"
                         f"{ts[0]},1,1,1,1,1,1\n")
    with pytest.raises(DataError, match="no volume"):
        read_bars(flow_only)


def test_features_leave_out_the_volume_group_on_bars_without_volume():
    config = FeatureConfig(groups=["returns", "volume"])
    kept, notices = fit_to_bars(config, _bars(_session_minutes(False)[:5], volume=None))
    assert kept.groups == ["returns"]
    assert len(notices) == 1 and "no volume" in notices[0] and "logvol_16" in notices[0]
    assert fit_to_bars(config, _bars(_session_minutes(False)[:5])) == (config, [])
    assert fit_to_bars(FeatureConfig(), _bars(_session_minutes(False)[:5], volume=None))[1] == []
    with pytest.raises(DataError, match="only volume"):
        fit_to_bars(FeatureConfig(groups=["volume"]), _bars(_session_minutes(False)[:5], volume=None))
