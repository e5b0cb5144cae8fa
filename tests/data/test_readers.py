from __future__ import annotations

import gzip

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from foxhunt.data.readers import infer_bar_spec, read_bars, read_ticks
from foxhunt.data.series import BarSpec
from foxhunt.errors import DataError, ValidationError

T0 = 1_378_072_800_000_000_000  # 2013-09-01T22:00:00Z
MIN = 60_000_000_000

BARS_CSV = """ts,open,high,low,close,volume
2013-09-01T17:01:00-05:00,1632.25,1633.00,1632.00,1632.75,120
2013-09-01T17:02:00-05:00,1632.75,1633.25,1632.50,1633.00,80
2013-09-01T17:03:00-05:00,1633.00,1633.00,1632.25,1632.50,95
"""


def bars_csv(*rows: str, header: str = "ts,open,high,low,close,volume") -> str:
    return "\n".join([header, *rows]) + "\n"


GOOD = [
    "1378072860,1632.25,1633.00,1632.00,1632.75,120",
    "1378072920,1632.75,1633.25,1632.50,1633.00,80",
    "1378072980,1633.00,1633.00,1632.25,1632.50,95",
    "1378073040,1632.50,1632.75,1632.25,1632.50,60",
]


def with_row(i: int, row: str) -> list[str]:
    rows = list(GOOD)
    rows[i - 1] = row
    return rows


def error_of(path, **kw) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        read_bars(path, **kw)
    return e.value


def test_reads_bars_csv_with_offsets(write_text):
    bars = read_bars(write_text("es.csv", BARS_CSV))
    assert bars.ts.tolist() == [T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN]
    assert bars.close.tolist() == [1632.75, 1633.0, 1632.5]
    assert bars.volume.tolist() == [120, 80, 95]
    assert not bars.has_flow


def test_column_names_are_case_insensitive_with_aliases(write_text):
    text = bars_csv(
        "1378072860000,1632.25,1633.00,1632.00,1632.75,120,70,50",
        "1378072920000,1632.75,1633.25,1632.50,1633.00,80,20,60",
        header="Timestamp,OPEN,High,low,Close,Vol,Buy_Volume,sell_volume",
    )
    bars = read_bars(write_text("es.csv", text))
    assert bars.ts.tolist() == [T0 + MIN, T0 + 2 * MIN]
    assert bars.buy_volume.tolist() == [70, 20] and bars.sell_volume.tolist() == [50, 60]


def test_separate_date_and_time_columns_are_joined(write_text):
    text = bars_csv(
        "2013-09-01,17:01:00,1632.25,1633.00,1632.00,1632.75,120",
        "2013-09-01,17:02:00,1632.75,1633.25,1632.50,1633.00,80",
        header="Date,Time,Open,High,Low,Close,Volume",
    )
    assert read_bars(write_text("es.csv", text), tz="America/Chicago").ts.tolist() == [
        T0 + MIN,
        T0 + 2 * MIN,
    ]


def test_gzip_csv_and_parquet_read_the_same(tmp_path, write_text):
    plain = read_bars(write_text("es.csv", BARS_CSV))
    gz = tmp_path / "es.csv.gz"
    gz.write_bytes(gzip.compress(BARS_CSV.encode()))
    pq.write_table(plain.to_arrow(), tmp_path / "es.parquet")
    for other in (read_bars(gz), read_bars(tmp_path / "es.parquet")):
        assert other.ts.tolist() == plain.ts.tolist()
        assert other.close.tolist() == plain.close.tolist()


def test_parquet_with_zoned_timestamp_column(tmp_path):
    table = pa.table(
        {
            "time": pa.array(
                [T0 + MIN, T0 + 2 * MIN], type=pa.timestamp("ns", tz="America/Chicago")
            ),
            "open": [1.0, 2.0],
            "high": [2.0, 3.0],
            "low": [0.5, 1.5],
            "close": [1.5, 2.5],
            "volume": [1, 2],
        }
    )
    pq.write_table(table, tmp_path / "b.pq")
    assert read_bars(tmp_path / "b.pq").ts.tolist() == [T0 + MIN, T0 + 2 * MIN]


def test_open_stamped_bars_shift_by_the_inferred_or_declared_spacing(write_text):
    path = write_text("es.csv", bars_csv(*GOOD))
    assert read_bars(path, ts_is_open=True).ts[0] == T0 + 2 * MIN
    assert read_bars(path, ts_is_open=True, spec="5min").ts[0] == T0 + 6 * MIN


def test_naive_timestamps_are_read_in_the_given_zone(write_text):
    text = bars_csv("2013-09-01 17:01:00,1,2,0.5,1.5,1", "2013-12-01 17:02:00,1,2,0.5,1.5,1")
    bars = read_bars(write_text("es.csv", text), tz="America/Chicago")
    assert bars.ts.tolist() == [T0 + MIN, 1_385_938_920_000_000_000]  # CDT then CST


# --- bad input: acceptance criteria --------------------------------------------------------


def test_malformed_row_non_numeric_price(write_text):
    e = error_of(
        write_text(
            "es.csv", bars_csv(*with_row(3, "1378072980,1633.00,1633.OO,1632.25,1632.50,95"))
        )
    )
    assert (e.rule, e.row) == ("non-numeric high", 3)
    assert str(e).endswith("es.csv, row 3: non-numeric high ('1633.OO')")


def test_unsorted_timestamps(write_text):
    e = error_of(
        write_text(
            "es.csv", bars_csv(*with_row(3, "1378072800,1633.00,1633.00,1632.25,1632.50,95"))
        )
    )
    assert (e.rule, e.row) == ("timestamps not sorted", 3)
    assert "es.csv, row 3: timestamps not sorted" in str(e)


def test_duplicate_timestamps(write_text):
    e = error_of(
        write_text(
            "es.csv", bars_csv(*with_row(3, "1378072920,1633.00,1633.00,1632.25,1632.50,95"))
        )
    )
    assert (e.rule, e.row) == ("duplicate timestamp", 3)


def test_ohlc_violation_high_below_close(write_text):
    e = error_of(
        write_text(
            "es.csv", bars_csv(*with_row(2, "1378072920,1632.75,1632.90,1632.50,1633.00,80"))
        )
    )
    assert (e.rule, e.row) == ("high below open or close", 2)
    assert (
        "row 2: high below open or close (open=1632.75 high=1632.9 low=1632.5 close=1633.0)"
        in str(e)
    )


def test_ohlc_violation_low_above_open(write_text):
    e = error_of(
        write_text(
            "es.csv", bars_csv(*with_row(4, "1378073040,1632.50,1632.75,1632.60,1632.70,60"))
        )
    )
    assert (e.rule, e.row) == ("low above open or close", 4)


def test_nan_price(write_text):
    e = error_of(
        write_text("es.csv", bars_csv(*with_row(2, "1378072920,1632.75,1633.25,1632.50,NaN,80")))
    )
    assert (e.rule, e.row) == ("NaN or infinite price", 2)
    assert "close=nan" in str(e)


def test_negative_volume(write_text):
    e = error_of(
        write_text(
            "es.csv", bars_csv(*with_row(4, "1378073040,1632.50,1632.75,1632.25,1632.50,-60"))
        )
    )
    assert (e.rule, e.row) == ("negative volume", 4)


def test_empty_cell_is_a_missing_value(write_text):
    e = error_of(
        write_text("es.csv", bars_csv(*with_row(2, "1378072920,1632.75,1633.25,,1633.00,80")))
    )
    assert (e.rule, e.row) == ("missing low", 2)


def test_wrong_columns_missing_close(write_text):
    path = write_text("es.csv", "ts,open,high,low,last_px,volume\n1378072860,1,2,0.5,1.5,1\n")
    with pytest.raises(DataError) as e:
        read_bars(path)
    assert (
        str(e.value)
        == f"{path}: missing column 'close'; found: ts, open, high, low, last_px, volume"
    )


def test_wrong_columns_lists_every_missing_one_with_aliases(write_text):
    with pytest.raises(
        DataError,
        match=r"t.csv: missing columns 'ts' \(or 'timestamp', .*'price' \(or 'last'\), "
        r"'size' \(or 'volume'.*; found: when, px$",
    ):
        read_ticks(write_text("t.csv", "when,px\n1,2\n"))


def test_empty_file_header_only(write_text):
    path = write_text("es.csv", "ts,open,high,low,close,volume\n")
    with pytest.raises(DataError, match=r"^.*es\.csv: no rows$"):
        read_bars(path)


def test_empty_file_zero_bytes(write_text):
    path = write_text("es.csv", "")
    with pytest.raises(DataError) as e:
        read_bars(path)
    assert str(e.value) == f"{path}: no rows"


def test_naive_timestamps_without_tz(write_text):
    path = write_text("es.csv", bars_csv("2013-09-01 17:01:00,1,2,0.5,1.5,1"))
    with pytest.raises(DataError) as e:
        read_bars(path)
    assert (
        str(e.value)
        == f"{path}: timestamps have no time zone; pass --tz (e.g. --tz America/Chicago)"
    )


def test_row_with_too_few_fields(write_text):
    e = error_of(write_text("es.csv", bars_csv(*with_row(3, "1378072980,1633.00,1633.00,1632.25"))))
    assert (e.rule, e.row) == ("wrong number of fields", 3)


def test_bad_number_far_into_a_big_file_is_found(write_text):
    rows = [f"{1378072860 + 60 * i},1,2,0.5,1.5,{i}" for i in range(60_000)]
    rows[55_554] = rows[55_554].rsplit(",", 1)[0] + ",12x"
    e = error_of(write_text("big.csv", bars_csv(*rows)))
    assert (e.rule, e.row) == ("non-numeric volume", 55_555)


def test_unknown_suffix_missing_file_and_corrupt_parquet(tmp_path, write_text):
    with pytest.raises(DataError, match="unknown file type"):
        read_bars(write_text("es.xlsx", "x"))
    with pytest.raises(DataError, match="no such file"):
        read_bars(tmp_path / "absent.csv")
    with pytest.raises(DataError, match="not a readable Parquet file") as e:
        read_bars(write_text("es.parquet", "not parquet"))
    assert "\n" not in str(e.value)


# --- ticks ---------------------------------------------------------------------------------


def test_reads_ticks_with_side_words_and_shared_timestamps(write_text):
    text = (
        "Time,Price,Qty,Side\n"
        "2013-09-01T22:00:00.083Z,1632.25,3,B\n"
        "2013-09-01T22:00:00.083Z,1632.00,1,sell\n"
        "2013-09-01T22:00:00.100Z,1632.25,2,\n"
    )
    ticks = read_ticks(write_text("t.csv", text))
    assert ticks.ts.tolist() == [T0 + 83_000_000, T0 + 83_000_000, T0 + 100_000_000]
    assert ticks.price.tolist() == [1632.25, 1632.0, 1632.25]
    assert ticks.size.tolist() == [3, 1, 2]
    assert ticks.side.tolist() == [1, -1, 0]


def test_ticks_without_side_and_ms_epochs(write_text):
    ticks = read_ticks(
        write_text(
            "t.csv", "timestamp,last,volume\n1378072800083,1632.25,3\n1378072800090,1632.5,1\n"
        )
    )
    assert ticks.side is None and ticks.ts.tolist() == [T0 + 83_000_000, T0 + 90_000_000]


def test_unknown_side_names_the_row(write_text):
    with pytest.raises(ValidationError) as e:
        read_ticks(write_text("t.csv", "ts,price,size,side\n1,1,1,B\n2,1,1,X\n"), ts_unit="s")
    assert (e.value.rule, e.value.row) == ("unknown side", 2)


def test_unsorted_ticks_name_the_row(write_text):
    with pytest.raises(ValidationError) as e:
        read_ticks(write_text("t.csv", "ts,price,size\n5,1,1\n5,1,1\n4,1,1\n"), ts_unit="s")
    assert (e.value.rule, e.value.row) == ("timestamps not sorted", 3)


# --- bar spacing ---------------------------------------------------------------------------


def test_infer_bar_spec_from_median_spacing_despite_gaps():
    ts = T0 + MIN * np.array([1, 2, 3, 4, 65, 66, 67, 68, 200])
    assert infer_bar_spec(ts) == BarSpec.parse("1min")
    assert str(infer_bar_spec(T0 + 5 * MIN * np.arange(10))) == "5min"
    day = 86_400 * 10**9
    assert str(infer_bar_spec(T0 + day * np.array([0, 1, 2, 3, 6, 7]))) == "1d"


def test_infer_bar_spec_refuses_irregular_and_short_series():
    with pytest.raises(DataError, match="irregular"):
        infer_bar_spec(T0 + np.array([0, 60, 97, 130, 171, 211, 260]) * 10**9)
    with pytest.raises(DataError, match="at least 3 bars"):
        infer_bar_spec(np.array([T0, T0 + MIN]))
    with pytest.raises(DataError, match="outside 1s..1d"):
        infer_bar_spec(np.array([T0, T0 + 1000, T0 + 2000]))
