from __future__ import annotations

import duckdb
import numpy as np
import pytest

from foxhunt.data.readers import read_bars
from foxhunt.data.series import Bars, BarSpec, Ticks
from foxhunt.data.store import MarketStore, SeriesInfo
from foxhunt.errors import ConfigError, DataError, ValidationError

T0 = 1_378_072_800_000_000_000
MIN = 60_000_000_000


def dump(path) -> dict[str, list[tuple]]:
    """Every row of every table, in a fixed order: the store's whole content."""
    with duckdb.connect(str(path), read_only=True) as con:
        return {
            "bars": con.execute("SELECT * FROM bars ORDER BY symbol, spec, ts").fetchall(),
            "ticks": con.execute("SELECT * FROM ticks ORDER BY symbol, ts, seq").fetchall(),
            "imports": con.execute(
                "SELECT * EXCLUDE (imported_at) FROM imports ORDER BY ALL"
            ).fetchall(),
        }


def checksum(path) -> tuple:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM bars").fetchone()


def same_bars(a: Bars, b: Bars) -> None:
    for name, col in a.columns().items():
        other = getattr(b, name)
        assert (col is None) == (other is None), name
        if col is not None:
            np.testing.assert_array_equal(col, other, err_msg=name)


def some_ticks() -> Ticks:
    return Ticks(
        ts=np.array([T0, T0, T0 + 5, T0 + 5, T0 + 9]),
        price=np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
        size=np.array([1.0, 1.0, 2.0, 2.0, 3.0]),
        side=np.array([1, -1, 0, 1, -1], dtype=np.int8),
    )


def test_store_opens_lazily_and_creates_its_directory(tmp_path):
    path = tmp_path / "deep" / "er" / "market.duckdb"
    store = MarketStore(path)
    assert not path.exists()
    with store:
        assert store.series() == []
    assert path.exists()


def test_a_file_that_is_not_a_store_is_a_one_line_error(tmp_path):
    path = tmp_path / "notes.duckdb"
    path.write_text("not a database\n" * 1000)
    with MarketStore(path) as store, pytest.raises(DataError) as e:
        store.series()
    assert str(e.value).startswith(f"{path}: cannot open the store (")
    assert "\n" not in str(e.value)


def test_bars_round_trip(tmp_path, make_bars):
    bars = make_bars(50, flow=True)
    with MarketStore(tmp_path / "s.duckdb") as store:
        assert store.write_bars("ES", "1min", bars, "es.csv").rows == 50
        same_bars(store.read_bars("ES", BarSpec.parse("1min")), bars)
        plain = make_bars(10)
        store.write_bars("NQ", "1min", plain, "nq.csv")
        same_bars(store.read_bars("NQ", "1min"), plain)


def test_ticks_round_trip_in_file_order_with_shared_timestamps(tmp_path):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_ticks("ES", some_ticks(), "t.csv")
        back = store.read_ticks("ES")
    for name in ("ts", "price", "size", "side"):
        np.testing.assert_array_equal(getattr(back, name), getattr(some_ticks(), name))


def test_reimporting_the_same_file_is_idempotent(tmp_path, make_bars):
    path = tmp_path / "s.duckdb"
    bars = make_bars(100, flow=True)
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", bars, "es.csv")
    first = checksum(path)
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", bars, "es.csv")
        store.write_ticks("ES", some_ticks(), "t.csv")
        store.write_ticks("ES", some_ticks(), "t.csv")
        assert [s.rows for s in store.series()] == [100, 5]
    assert checksum(path) == first
    assert len(dump(path)["imports"]) == 4  # the log keeps every import


def test_a_write_replaces_only_the_range_it_covers(tmp_path, make_bars):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(10), "a.csv")  # ts T0+1min .. T0+10min
        newer = make_bars(3, start=T0 + 3 * MIN + MIN // 2)  # 4.5 .. 6.5 min: replaces bars 5 and 6
        store.write_bars("ES", "1min", newer, "b.csv")
        got = store.read_bars("ES", "1min")
    assert ((got.ts - T0) / MIN).tolist() == [1, 2, 3, 4, 4.5, 5.5, 6.5, 7, 8, 9, 10]


def test_failed_import_leaves_the_store_unchanged(tmp_path, make_bars, monkeypatch):
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(20), "a.csv")
        store.write_ticks("ES", some_ticks(), "t.csv")
    before = dump(path)

    def boom(*args, **kwargs):
        raise RuntimeError("disk fell off")

    with MarketStore(path) as store:
        monkeypatch.setattr(MarketStore, "_log_import", staticmethod(boom))
        with pytest.raises(RuntimeError, match="disk fell off"):
            store.write_bars("ES", "1min", make_bars(20, start=T0 + 5 * MIN), "b.csv")
        with pytest.raises(RuntimeError):
            store.write_ticks("ES", some_ticks(), "t.csv")
        monkeypatch.undo()
        same_bars(store.read_bars("ES", "1min"), make_bars(20))
    assert dump(path) == before


def test_failure_between_delete_and_insert_rolls_back(tmp_path, make_bars, monkeypatch):
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(20), "a.csv")
    before = dump(path)
    with MarketStore(path) as store:
        monkeypatch.setattr(
            MarketStore,
            "_insert",
            staticmethod(lambda *a: (_ for _ in ()).throw(KeyboardInterrupt)),
        )
        with pytest.raises(KeyboardInterrupt):
            store.write_bars("ES", "1min", make_bars(20), "a.csv")
    assert dump(path) == before


def test_a_transaction_groups_writes(tmp_path, make_bars):
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        with store.transaction():
            store.write_ticks("ES", some_ticks(), "t.csv")
            store.write_bars("ES", "ticks:2", make_bars(2), "t.csv")
        assert [str(s) for s in store.series()] == ["ES ticks:2", "ES ticks"]


def test_a_failing_write_undoes_the_whole_transaction(tmp_path, make_bars, monkeypatch):
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(5), "a.csv")
    before = dump(path)
    real_insert = MarketStore._insert
    calls = []

    def second_insert_fails(con, sql, params, table):
        calls.append(sql)
        if len(calls) == 2:
            raise RuntimeError("disk fell off")
        real_insert(con, sql, params, table)

    with MarketStore(path) as store:
        monkeypatch.setattr(MarketStore, "_insert", staticmethod(second_insert_fails))
        with pytest.raises(RuntimeError), store.transaction():
            store.write_ticks("ES", some_ticks(), "t.csv")
            store.write_bars("ES", "1min", make_bars(5, start=T0 + MIN), "b.csv")
        calls.clear()
        with pytest.raises(
            DataError, match="a write in this transaction failed; nothing was written"
        ), store.transaction():
            store.write_ticks("ES", some_ticks(), "t.csv")
            try:
                store.write_bars("ES", "1min", make_bars(5, start=T0 + MIN), "b.csv")
            except RuntimeError:
                pass
    assert dump(path) == before


def test_invalid_bars_write_nothing(tmp_path, make_bars):
    path = tmp_path / "s.duckdb"
    bad = make_bars(5)
    bad.high[2] = 1.0
    with MarketStore(path) as store:
        with pytest.raises(ValidationError) as e:
            store.write_bars("ES", "1min", bad, "bad.csv")
        assert (e.value.rule, e.value.row) == ("high below open or close", 3)
        assert store.series() == []
    assert dump(path) == {"bars": [], "ticks": [], "imports": []}


def test_range_reads_are_inclusive(tmp_path, make_bars):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(10), "a.csv")
        store.write_ticks("ES", some_ticks(), "t.csv")
        assert (
            (store.read_bars("ES", "1min", T0 + 3 * MIN, T0 + 5 * MIN).ts - T0) // MIN
        ).tolist() == [3, 4, 5]
        assert len(store.read_bars("ES", "1min", start_ns=T0 + 9 * MIN)) == 2
        assert len(store.read_bars("ES", "1min", end_ns=T0 + MIN)) == 1
        assert store.read_ticks("ES", T0 + 5, T0 + 9).price.tolist() == [3.0, 4.0, 5.0]


def test_missing_series_lists_what_the_store_has(tmp_path, make_bars):
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        with pytest.raises(DataError) as e:
            store.read_bars("ES", "5min")
        assert str(e.value) == f"no bars for ES 5min in {path}; have: nothing yet"
        store.write_bars("ES", "1min", make_bars(3), "a.csv")
        store.write_bars("ES", "ticks:500", make_bars(3), "b.csv")
        store.write_ticks("ES", some_ticks(), "t.csv")
        with pytest.raises(DataError) as e:
            store.read_bars("ES", "5min")
        assert (
            str(e.value) == f"no bars for ES 5min in {path}; have: ES 1min, ES ticks:500, ES ticks"
        )
        with pytest.raises(DataError, match=r"^no ticks for NQ ticks in .*; have: ES 1min"):
            store.read_ticks("NQ")
        with pytest.raises(DataError) as e:
            store.read_bars("ES", "1min", T0 + 100 * MIN)
        assert "between 2013-09-01T23:40:00.000000000Z and the end" in str(e.value)
        assert "it covers 2013-09-01T22:01:00.000000000Z to 2013-09-01T22:03:00.000000000Z" in str(
            e.value
        )


def test_series_listing_and_delete(tmp_path, make_bars):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("NQ", "5min", make_bars(2, step=5 * MIN), "n.csv")
        store.write_bars("ES", "1h", make_bars(4, step=60 * MIN), "a.csv")
        store.write_bars("ES", "1min", make_bars(3), "b.csv")
        store.write_ticks("ES", some_ticks(), "t.csv")
        assert store.series() == [
            SeriesInfo("ES", "bars", "1min", T0 + MIN, T0 + 3 * MIN, 3),
            SeriesInfo("ES", "bars", "1h", T0 + 60 * MIN, T0 + 240 * MIN, 4),
            SeriesInfo("ES", "ticks", "", T0, T0 + 9, 5),
            SeriesInfo("NQ", "bars", "5min", T0 + 5 * MIN, T0 + 10 * MIN, 2),
        ]
        assert store.delete_series("ES", "1h") == 4
        assert store.delete_series("ES", None) == 5
        assert [str(s) for s in store.series()] == ["ES 1min", "NQ 5min"]
        with pytest.raises(DataError, match="no bars for ES 1h"):
            store.delete_series("ES", "1h")


@pytest.mark.parametrize("name", ["es.csv", "es.parquet", "es.csv.gz"])
def test_export_round_trips_through_the_readers(tmp_path, make_bars, name):
    bars = make_bars(30, flow=True)
    out = tmp_path / "exports" / name
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", bars, "a.csv")
        assert store.export_bars("ES", "1min", out) == 30
    same_bars(read_bars(out), bars)
    assert [p.name for p in out.parent.iterdir()] == [name]


def test_export_refuses_unknown_formats_and_leaves_no_temp_file(tmp_path, make_bars, monkeypatch):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(3), "a.csv")
        with pytest.raises(DataError, match=r"es\.xlsx: unknown export format"):
            store.export_bars("ES", "1min", tmp_path / "es.xlsx")
        out = tmp_path / "es.parquet"
        out.write_text("old")
        monkeypatch.setattr(
            "foxhunt.data.store.pq.write_table",
            lambda *a, **k: (_ for _ in ()).throw(OSError("full")),
        )
        with pytest.raises(OSError):
            store.export_bars("ES", "1min", out)
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["es.parquet", "s.duckdb"]


YEAR = 365 * 86_400 * 10**9


def test_an_import_says_which_stored_rows_it_replaced_and_the_rest_stays(tmp_path, make_bars):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(10), "a.csv")  # T0+1 .. T0+10 min
        report = store.write_bars("ES", "1min", make_bars(5, start=T0 + 7 * MIN), "b.csv")
        assert (report.mode, report.replaced, report.rows) == ("merge", 3, 5)
        assert report.replaced_range == (T0 + 8 * MIN, T0 + 10 * MIN)
        assert report.gap_before_ns == MIN and report.gap_after_ns is None
        [note] = report.notes("ES 1min")
        assert note.startswith("ES 1min: replaced 3 stored rows from ") and "--replace" in note
        assert len(store.read_bars("ES", "1min")) == 12


def test_a_long_gap_between_the_stored_series_and_the_import_is_reported(tmp_path, make_bars):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(10), "2013.csv")
        later = store.write_bars("ES", "1min", make_bars(10, start=T0 + 10 * YEAR), "2023.csv")
        earlier = store.write_bars("ES", "1min", make_bars(10, start=T0 - YEAR), "2012.csv")
    assert later.replaced == 0 and later.gap_before_ns == 10 * YEAR - 9 * MIN
    [note] = later.notes("ES 1min")
    assert "a gap of 10.0 years" in note and "before this file's data" in note
    assert earlier.gap_after_ns == YEAR - 9 * MIN and earlier.gap_before_ns is None
    assert "after this file's data" in earlier.notes("ES 1min")[0]


def test_weekend_sized_gaps_are_not_news(tmp_path, make_bars):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(10), "fri.csv")
        monday = store.write_bars("ES", "1min", make_bars(10, start=T0 + 3 * 86_400 * 10**9), "mon.csv")
    assert monday.gap_before_ns > 2 * 86_400 * 10**9 and monday.notes("ES 1min") == []


def test_replace_drops_the_whole_stored_series_first(tmp_path, make_bars):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(10), "a.csv")
        store.write_bars("NQ", "1min", make_bars(4), "nq.csv")
        report = store.write_bars("ES", "1min", make_bars(3, start=T0 + YEAR), "b.csv",
                                  replace=True)
        assert (report.mode, report.replaced, report.gap_before_ns) == ("replace", 10, None)
        assert "the whole stored series was dropped first" in report.notes("ES 1min")[0]
        assert len(store.read_bars("ES", "1min")) == 3 and len(store.read_bars("NQ", "1min")) == 4


def test_the_import_log_records_the_grid_check_and_the_mode(tmp_path, make_bars):
    off = make_bars(3)
    off = Bars(off.ts, off.open + 0.1, off.high + 0.1, off.low + 0.1, off.close + 0.1, off.volume)
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(3), "plain.csv")
        store.write_bars("ES", "1min", make_bars(3), "es.csv", tick_size=0.25)
        store.write_bars("ES", "1min", off, "spot.csv", tick_size=0.25, off_grid="keep",
                         replace=True)
        with pytest.raises(ValidationError, match="off the tick grid"):
            store.write_bars("ES", "1min", off, "bad.csv", tick_size=0.25)
        log = [(r["source"], r["grid"], r["mode"]) for r in store.imports("ES")]
    assert log == [("plain.csv", "not checked", "merge"), ("es.csv", "on the 0.25 grid", "merge"),
                   ("spot.csv", "3 of 3 rows kept off the 0.25 grid", "replace")]


def test_a_store_written_before_the_grid_log_existed_opens_and_gains_it(tmp_path, make_bars):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE imports (symbol VARCHAR NOT NULL, kind VARCHAR NOT NULL, "
                "spec VARCHAR NOT NULL, source VARCHAR NOT NULL, rows BIGINT NOT NULL, "
                "first_ts BIGINT NOT NULL, last_ts BIGINT NOT NULL, imported_at TIMESTAMPTZ "
                "NOT NULL DEFAULT current_timestamp)")
    con.execute("INSERT INTO imports VALUES ('ES', 'bars', '1min', 'old.csv', 1, 0, 0, now())")
    con.close()
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(3), "new.csv", tick_size=0.25)
        log = [(r["source"], r["grid"]) for r in store.imports()]
    assert log == [("old.csv", "not checked"), ("new.csv", "on the 0.25 grid")]


def test_a_reader_never_creates_a_store(tmp_path):
    path = tmp_path / "nowhere" / "market.duckdb"
    with MarketStore(path, read_only=True) as store, pytest.raises(DataError) as e:
        store.series()
    line = str(e.value)
    assert line.startswith(f"{path}: no market store here yet")
    assert "foxhunt data sample" in line and "foxhunt data import" in line and "\n" not in line
    assert not path.parent.exists()


def test_a_reader_leaves_the_file_byte_for_byte(tmp_path, make_bars):
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(20), "a.csv")
        store.write_ticks("ES", some_ticks(), "t.csv")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    with MarketStore(path, read_only=True) as store:
        assert len(store.read_bars("ES", "1min")) == 20 and len(store.read_ticks("ES")) == 5
        assert [s.spec for s in store.series()] == ["1min", ""]
        assert [r["source"] for r in store.imports()] == ["a.csv", "t.csv"]
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before


def test_a_reader_refuses_to_write(tmp_path, make_bars):
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(5), "a.csv")
    with MarketStore(path, read_only=True) as store, pytest.raises(DataError, match="read-only"):
        store.write_bars("ES", "1min", make_bars(5, start=T0 + 100 * MIN), "b.csv")
    assert checksum(path)[0] == 5


def test_a_reader_of_a_file_without_the_tables_says_what_to_do(tmp_path):
    path = tmp_path / "other.duckdb"
    duckdb.connect(str(path)).close()
    with MarketStore(path, read_only=True) as store, pytest.raises(DataError) as e:
        store.series()
    assert "not a foxhunt store" in str(e.value) and "foxhunt data sample" in str(e.value)


def test_a_reader_of_a_store_from_before_the_grid_log_reads_it_as_it_is(tmp_path, make_bars):
    """No schema upgrade on a read: the file stays as the older foxhunt wrote it."""
    path = tmp_path / "old.duckdb"
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(3), "old.csv")
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE imports DROP COLUMN grid")
        con.execute("ALTER TABLE imports DROP COLUMN mode")
    before = path.read_bytes()
    with MarketStore(path, read_only=True) as store:
        [row] = store.imports()
    assert (row["source"], row["grid"], row["mode"]) == ("old.csv", "not checked", "merge")
    assert path.read_bytes() == before


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_wait_setting_is_one_line(tmp_path, make_bars, monkeypatch, value):
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_bars("ES", "1min", make_bars(3), "a.csv")
    monkeypatch.setenv("FOXHUNT_STORE_WAIT_S", value)
    with MarketStore(tmp_path / "s.duckdb", read_only=True) as store, \
            pytest.raises(ConfigError, match="FOXHUNT_STORE_WAIT_S"):
        store.series()


def test_a_reader_of_a_damaged_store_fails_with_one_line(tmp_path, make_bars):
    """A reader runs no DDL on open, so here the damage shows at the first query."""
    path = tmp_path / "s.duckdb"
    with MarketStore(path) as store:
        store.write_bars("ES", "1min", make_bars(2000), "a.csv")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with MarketStore(path, read_only=True) as store, pytest.raises(DataError) as e:
        store.read_bars("ES", "1min")
    assert str(e.value).startswith(f"{path}: cannot read the store (IO Error: ")
    assert "restore it from a backup or import the data again" in str(e.value)
    assert "\n" not in str(e.value)
