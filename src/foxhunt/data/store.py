"""The market-data store: bars and ticks per symbol in one embedded DuckDB file.

Writes merge by default: the new rows replace the stored rows of the same symbol and spec in
the time range they cover (``first_ts <= ts <= last_ts``) and the rest of the series stays, so
re-importing a file is idempotent; ``replace=True`` drops the whole stored series first. Every
write says how it met the stored series (`WriteReport`: the rows it replaced, the gap it left
before or after them) and runs inside one transaction, so a failed import leaves the store
exactly as it was. Given the instrument's tick size, a write checks prices against the tick
grid first (`data.grid`). Every write is logged in ``imports`` with its grid check. Reads go
through Arrow.

DuckDB lets one process write a file or several processes read it, never both: a writer
(``read_only=False``) excludes every other process, readers share. Commands that only read open
the store read-only, so backtests, training and paper runs of one store run side by side, and a
reader neither creates the file nor changes a byte of it. Opening a file another process holds
waits (``wait_s``, default ``FOXHUNT_STORE_WAIT_S`` or 60 s) and then fails with one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from foxhunt.data.contracts import FuturesContract
from foxhunt.data.grid import GridCheck, OffGrid, check_bars, check_ticks
from foxhunt.data.series import Bars, BarSpec, Ticks
from foxhunt.data.timestamps import format_ns
from foxhunt.data.validation import validate_bars, validate_ticks
from foxhunt.errors import ConfigError, DataError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bars (
    symbol VARCHAR NOT NULL, spec VARCHAR NOT NULL, ts BIGINT NOT NULL,
    open DOUBLE NOT NULL, high DOUBLE NOT NULL, low DOUBLE NOT NULL, close DOUBLE NOT NULL,
    volume DOUBLE NOT NULL, buy_volume DOUBLE, sell_volume DOUBLE,
    PRIMARY KEY (symbol, spec, ts));
CREATE TABLE IF NOT EXISTS ticks (
    symbol VARCHAR NOT NULL, ts BIGINT NOT NULL, seq INTEGER NOT NULL,
    price DOUBLE NOT NULL, size DOUBLE NOT NULL, side TINYINT);
CREATE TABLE IF NOT EXISTS imports (
    symbol VARCHAR NOT NULL, kind VARCHAR NOT NULL, spec VARCHAR NOT NULL, source VARCHAR NOT NULL,
    rows BIGINT NOT NULL, first_ts BIGINT NOT NULL, last_ts BIGINT NOT NULL,
    imported_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp);
ALTER TABLE imports ADD COLUMN IF NOT EXISTS grid VARCHAR DEFAULT 'not checked';
ALTER TABLE imports ADD COLUMN IF NOT EXISTS mode VARCHAR DEFAULT 'merge';
CREATE TABLE IF NOT EXISTS contracts (
    symbol VARCHAR PRIMARY KEY, root VARCHAR NOT NULL, year INTEGER NOT NULL,
    month INTEGER NOT NULL, expiry DATE NOT NULL, expiry_source VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS open_interest (
    symbol VARCHAR NOT NULL, spec VARCHAR NOT NULL, ts BIGINT NOT NULL, open_interest DOUBLE NOT NULL,
    PRIMARY KEY (symbol, spec, ts));
CREATE TABLE IF NOT EXISTS continuous (
    root VARCHAR NOT NULL, spec VARCHAR NOT NULL, derivation VARCHAR NOT NULL,
    built_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp, PRIMARY KEY (root, spec));
CREATE TABLE IF NOT EXISTS rolls (
    root VARCHAR NOT NULL, spec VARCHAR NOT NULL, seq INTEGER NOT NULL, roll VARCHAR NOT NULL,
    PRIMARY KEY (root, spec, seq));
"""
_BAR_COLUMNS = "ts, open, high, low, close, volume, buy_volume, sell_volume"
_TS_MIN, _TS_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
_INCOMING = "foxhunt_incoming"
_EXPORTS = (".csv", ".csv.gz", ".parquet", ".pq")
_KIND_ORDER = {"time": 0, "ticks": 1, "volume": 2, "dollar": 3}
_IMPORT_DEFAULTS = {"grid": "not checked", "mode": "merge"}
WAIT_ENV = "FOXHUNT_STORE_WAIT_S"
DEFAULT_WAIT_S = 60.0
"""How long opening the store waits for another process to let go of it: a long import takes
seconds to a minute, and a command that fails at once would have to be retried by hand."""
IMPORT_HINT = "`foxhunt data sample` or `foxhunt data import FILE --symbol SYMBOL`"
GAP_NOTE_NS = 7 * 86_400 * 10**9
"""Gaps between an import and the stored series longer than this are reported: longer than
any weekend or holiday closure of a listed market, so a gap this long is missing data (or a
second, unrelated file) rather than the calendar."""


@dataclass(frozen=True)
class WriteReport:
    """How one write met the series stored before it."""

    rows: int
    first_ts: int
    last_ts: int
    mode: Literal["merge", "replace"]
    replaced: int = 0  # stored rows removed: those in [first_ts, last_ts], or all with replace
    replaced_range: tuple[int, int] | None = None  # the removed rows' first and last ts
    gap_before_ns: int | None = None  # from the stored row before first_ts to first_ts
    gap_after_ns: int | None = None  # from last_ts to the stored row after it
    grid: str = "not checked"
    check: GridCheck | None = None  # the grid check, when one ran

    @property
    def snapped(self) -> dict[str, int]:
        """Rows and prices the write moved onto the tick grid (--off-grid snap)."""
        rows, prices = self.check.snapped if self.check is not None else (0, 0)
        return {"rows": rows, "prices": prices}

    def notes(self, what: str) -> list[str]:
        """One line per thing the user should know: replaced rows, long gaps, the grid."""
        out = []
        if self.replaced:
            lo, hi = self.replaced_range
            how = ("the whole stored series was dropped first (--replace)" if self.mode == "replace"
                   else "the file's rows replace the stored ones in its range (merge; --replace "
                   "drops the whole stored series first)")
            out.append(f"{what}: replaced {self.replaced:,} stored rows from {format_ns(lo)} to "
                       f"{format_ns(hi)}: {how}")
        for gap, side in ((self.gap_before_ns, "before"), (self.gap_after_ns, "after")):
            if gap is not None and gap > GAP_NOTE_NS:
                ref = self.first_ts if side == "before" else self.last_ts
                out.append(f"{what}: a gap of {_duration(gap)} {side} this file's data (at "
                           f"{format_ns(ref)}) separates it from the stored series; it is one "
                           "series now: import into another symbol, or use --replace, if that is "
                           "not meant")
        if "off" in self.grid:
            out.append(f"{what}: {self.grid}")
        snapped = self.check.snap_note(what) if self.check is not None else None
        if snapped:
            out.append(snapped)
        return out


@dataclass(frozen=True)
class SeriesInfo:
    """One stored series; ``spec`` is the bar spec text, or '' for raw ticks."""

    symbol: str
    kind: Literal["bars", "ticks"]
    spec: str
    first_ts: int
    last_ts: int
    rows: int

    def __str__(self) -> str:
        return f"{self.symbol} {self.spec or 'ticks'}"


class MarketStore:
    """Bars and ticks in a DuckDB file, opened on first use; a context manager closes it.

    ``read_only=True`` opens a reader: it shares the file with other readers, needs the file to
    exist and never writes to it. A writer (the default) creates the file and its tables.
    ``wait_s`` bounds the wait for a file another process holds (None: `store_wait_s()`).
    """

    def __init__(self, path: str | Path, *, read_only: bool = False, wait_s: float | None = None):
        self.path = Path(path)
        self.read_only = read_only
        self.wait_s = wait_s
        self._con: duckdb.DuckDBPyConnection | None = None
        self._depth = 0
        self._failed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    @property
    def _db(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = self._open()
        return self._con

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self.read_only and not self.path.is_file():
            raise self._no_store()
        wait = store_wait_s() if self.wait_s is None else max(float(self.wait_s), 0.0)
        start, delay = time.monotonic(), 0.02
        while True:
            try:
                return self._connect()
            except (duckdb.Error, OSError) as e:
                text = str(e)
                if self.read_only and "database does not exist" in text:
                    raise self._no_store() from None
                if "Could not set lock" not in text:
                    raise DataError(f"{self.path}: cannot open the store ({_one_line(e)})") from None
                waited = time.monotonic() - start
                if waited >= wait:
                    raise self._held(text, waited) from None
                time.sleep(min(delay, wait - waited))
                delay = min(delay * 2, 0.5)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if not self.read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(self.path), read_only=self.read_only)
        try:
            con.execute("SET enable_progress_bar = false")
            if self.read_only:
                self._check_tables(con)
            else:
                con.execute(_SCHEMA)
        except BaseException:
            con.close()
            raise
        return con

    def _check_tables(self, con: duckdb.DuckDBPyConnection) -> None:
        have = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        if not {"bars", "ticks", "imports"} <= have:
            raise DataError(f"{self.path}: not a foxhunt store (no bars, ticks and imports "
                            f"tables); import data into it first with {IMPORT_HINT}")

    def _no_store(self) -> DataError:
        return DataError(f"{self.path}: no market store here yet; import data first with "
                         f"{IMPORT_HINT}")

    def _held(self, error: str, waited: float) -> DataError:
        """The one line for a lock we gave up on. DuckDB names the holder's PID, and hints at
        read-only access only when the holders are readers."""
        pid = re.search(r"PID (\d+)", error)
        who = f"another foxhunt process (PID {pid.group(1)})" if pid else "another foxhunt process"
        how = "reading" if "read-only mode" in error else "writing"
        mine = "read it" if self.read_only else "write to it"
        return DataError(
            f"{self.path}: {who} holds the store for {how}; waited {waited:.1f} s to {mine}; "
            f"retry when it has finished, or wait longer with {WAIT_ENV}=SECONDS"
        )

    def write_bars(self, symbol: str, spec: BarSpec | str, bars: Bars, source: str, *,
                   tick_size: float | None = None, off_grid: OffGrid = "error",
                   replace: bool = False) -> WriteReport:
        """Validate (and, given `tick_size`, check the grid under `off_grid`), then merge the
        bars into that series, or with `replace` put them in its place."""
        symbol, spec = _symbol(symbol), _spec(spec)
        validate_bars(bars, source)
        if self.continuous(symbol, spec) is not None:
            raise DataError(f"{source}: {symbol} {spec} is a continuous series derived from "
                            "contract months (foxhunt data continuous); import the contract "
                            f"months (e.g. --symbol {symbol}H24), or delete it first")
        grid, found = "not checked", None
        if tick_size is not None:
            bars, found = check_bars(bars, tick_size, off_grid, source)
            validate_bars(bars, source)  # snapping can take a tiny price to zero
            grid = found.record
        n = len(bars)
        flow = bars.has_flow
        table = pa.table(
            {
                **{k: v for k, v in bars.columns().items() if v is not None},
                "buy_volume": bars.buy_volume if flow else pa.nulls(n, pa.float64()),
                "sell_volume": bars.sell_volume if flow else pa.nulls(n, pa.float64()),
            }
        )
        first, last = int(bars.ts[0]), int(bars.ts[-1])
        where, key = "FROM bars WHERE symbol = ? AND spec = ?", [symbol, str(spec)]
        with self._transaction() as con:
            report = self._place(con, where, key, first, last, replace, n, grid, found)
            self._insert(
                con,
                f"INSERT INTO bars SELECT ?, ?, {_BAR_COLUMNS} FROM {_INCOMING}",
                [symbol, str(spec)],
                table,
            )
            self._log_import(con, symbol, "bars", str(spec), source, report)
        return report

    def write_ticks(self, symbol: str, ticks: Ticks, source: str, *,
                    tick_size: float | None = None, off_grid: OffGrid = "error",
                    replace: bool = False) -> WriteReport:
        """`write_bars` for the ticks of ``symbol``.

        ``seq`` numbers trades that share a timestamp, so reads return them in file order.
        """
        symbol = _symbol(symbol)
        validate_ticks(ticks, source)
        grid, found = "not checked", None
        if tick_size is not None:
            ticks, found = check_ticks(ticks, tick_size, off_grid, source)
            validate_ticks(ticks, source)
            grid = found.record
        n = len(ticks)
        k = np.arange(n, dtype=np.int64)
        run_start = np.where(np.r_[True, ticks.ts[1:] != ticks.ts[:-1]], k, 0)
        seq = (k - np.maximum.accumulate(run_start)).astype(np.int32)
        table = pa.table(
            {
                "ts": ticks.ts,
                "seq": seq,
                "price": ticks.price,
                "size": ticks.size,
                "side": ticks.side if ticks.side is not None else pa.nulls(n, pa.int8()),
            }
        )
        first, last = int(ticks.ts[0]), int(ticks.ts[-1])
        with self._transaction() as con:
            report = self._place(con, "FROM ticks WHERE symbol = ?", [symbol], first, last,
                                 replace, n, grid, found)
            self._insert(
                con,
                f"INSERT INTO ticks SELECT ?, ts, seq, price, size, side FROM {_INCOMING}",
                [symbol],
                table,
            )
            self._log_import(con, symbol, "ticks", "", source, report)
        return report

    @staticmethod
    def _place(con: duckdb.DuckDBPyConnection, where: str, key: list, first: int, last: int,
               replace: bool, rows: int, grid: str,
               check: GridCheck | None = None) -> WriteReport:
        """Remove what the new rows replace, and say how they meet what stays."""
        span = "" if replace else " AND ts BETWEEN ? AND ?"
        params = key if replace else [*key, first, last]
        n, lo, hi = con.execute(f"SELECT count(*), min(ts), max(ts) {where}{span}",
                                params).fetchall()[0]
        con.execute(f"DELETE {where}{span}", params)
        before = con.execute(f"SELECT max(ts) {where} AND ts < ?", [*key, first]).fetchall()[0][0]
        after = con.execute(f"SELECT min(ts) {where} AND ts > ?", [*key, last]).fetchall()[0][0]
        return WriteReport(
            rows, first, last, "replace" if replace else "merge", int(n),
            (int(lo), int(hi)) if n else None,
            None if before is None else first - int(before),
            None if after is None else int(after) - last, grid, check)

    def imports(self, symbol: str | None = None) -> list[dict]:
        """The import log, oldest first: what was written, from where, and its grid check."""
        where, params = ("WHERE symbol = ?", [_symbol(symbol)]) if symbol else ("", [])
        cols = ["symbol", "kind", "spec", "source", "rows", "first_ts", "last_ts", "grid", "mode"]
        with self._reading() as db:
            have = {r[1] for r in db.execute("PRAGMA table_info('imports')").fetchall()}
            select = [c if c in have else f"'{_IMPORT_DEFAULTS[c]}' AS {c}" for c in cols]
            rows = db.execute(f"SELECT {', '.join(select)} FROM imports {where} "
                              "ORDER BY imported_at, rowid", params).fetchall()
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def read_bars(
        self,
        symbol: str,
        spec: BarSpec | str,
        start_ns: int | None = None,
        end_ns: int | None = None,
    ) -> Bars:
        """Bars with ``start_ns <= ts <= end_ns``; flow columns only when every row has them."""
        symbol, spec = _symbol(symbol), _spec(spec)
        with self._reading() as db:
            table = db.sql(
                f"SELECT {_BAR_COLUMNS} FROM bars "
                "WHERE symbol = ? AND spec = ? AND ts BETWEEN ? AND ? ORDER BY ts",
                params=[symbol, str(spec), *_range(start_ns, end_ns)],
            ).to_arrow_table()
        if table.num_rows == 0:
            raise self._missing(symbol, str(spec), start_ns, end_ns)
        if table.column("buy_volume").null_count or table.column("sell_volume").null_count:
            table = table.drop_columns(["buy_volume", "sell_volume"])
        return Bars.from_arrow(table)

    def read_ticks(
        self, symbol: str, start_ns: int | None = None, end_ns: int | None = None
    ) -> Ticks:
        """Ticks with ``start_ns <= ts <= end_ns`` in file order; side 0 where a file had none."""
        symbol = _symbol(symbol)
        with self._reading() as db:
            table = db.sql(
                "SELECT ts, price, size, side FROM ticks "
                "WHERE symbol = ? AND ts BETWEEN ? AND ? ORDER BY ts, seq",
                params=[symbol, *_range(start_ns, end_ns)],
            ).to_arrow_table()
        if table.num_rows == 0:
            raise self._missing(symbol, "", start_ns, end_ns)
        side = table.column("side")
        if side.null_count == len(side):
            table = table.drop_columns(["side"])
        elif side.null_count:
            table = table.set_column(3, "side", side.fill_null(0))
        return Ticks.from_arrow(table)

    def series(self) -> list[SeriesInfo]:
        """Every stored series by symbol: bars (time, tick, volume, dollar; small first), ticks."""
        with self._reading() as db:
            rows = db.execute(
                "SELECT symbol, 'bars', spec, min(ts), max(ts), count(*) "
                "FROM bars GROUP BY symbol, spec UNION ALL "
                "SELECT symbol, 'ticks', '', min(ts), max(ts), count(*) FROM ticks GROUP BY symbol"
            ).fetchall()
        infos = [SeriesInfo(*r) for r in rows]
        return sorted(infos, key=lambda s: (s.symbol, s.kind, *_spec_order(s.spec)))

    # -- contract months and continuous series (docs/futures.md) ----------------------------

    def record_contract(self, contract: FuturesContract) -> None:
        """Register a contract month (its bars are stored under `contract.symbol`); a second
        import of the same month updates its expiry."""
        with self._transaction() as con:
            con.execute("INSERT OR REPLACE INTO contracts VALUES (?, ?, ?, ?, ?, ?)",
                        [contract.symbol, contract.root, contract.year, contract.month,
                         contract.expiry, contract.expiry_source])

    def contracts(self, root: str | None = None) -> list[FuturesContract]:
        """The registered contract months (of `root`), by root then expiry; none in a store
        older than contract months."""
        with self._reading() as db:
            if not _has_table(db, "contracts"):
                return []
            where, params = ("WHERE root = ?", [_symbol(root)]) if root else ("", [])
            rows = db.execute("SELECT root, year, month, expiry, expiry_source FROM contracts "
                              f"{where} ORDER BY root, year, month", params).fetchall()
        return [FuturesContract(*r) for r in rows]

    def write_open_interest(self, symbol: str, spec: BarSpec | str, ts: np.ndarray,
                            values: np.ndarray) -> None:
        """Open interest known at each bar of a series, merged like bars (the range the new
        rows cover is replaced)."""
        symbol, spec = _symbol(symbol), str(_spec(spec))
        table = pa.table({"ts": np.asarray(ts, np.int64), "oi": np.asarray(values, np.float64)})
        with self._transaction() as con:
            con.execute("DELETE FROM open_interest WHERE symbol = ? AND spec = ? AND ts BETWEEN "
                        "? AND ?", [symbol, spec, int(ts[0]), int(ts[-1])])
            self._insert(con, f"INSERT INTO open_interest SELECT ?, ?, ts, oi FROM {_INCOMING}",
                         [symbol, spec], table)

    def read_open_interest(self, symbol: str, spec: BarSpec | str) -> tuple[np.ndarray,
                                                                              np.ndarray] | None:
        """(ts, open interest) of a series, or None where none was imported."""
        with self._reading() as db:
            if not _has_table(db, "open_interest"):
                return None
            rows = db.execute("SELECT ts, open_interest FROM open_interest WHERE symbol = ? AND "
                              "spec = ? ORDER BY ts", [_symbol(symbol), str(_spec(spec))]
                              ).fetchall()
        if not rows:
            return None
        ts, oi = zip(*rows, strict=True)
        return np.asarray(ts, np.int64), np.asarray(oi, np.float64)

    def write_continuous(self, root: str, spec: BarSpec | str, bars: Bars, derivation: dict,
                         rolls: list[dict], *, replace: bool = False) -> WriteReport:
        """Store a continuous series under `root` with how it was derived and its roll table,
        all in one transaction (a failure leaves the store as it was). It replaces an earlier
        continuous series of the same root and spec; a series stored there by an import is
        kept unless `replace`."""
        root, spec = _symbol(root), _spec(spec)
        stored = any(s.symbol == root and s.spec == str(spec) for s in self.series())
        if stored and self.continuous(root, spec) is None and not replace:
            raise DataError(f"{root} {spec} is already stored and is not a continuous series "
                            "(an import put it there); --replace puts the continuous series "
                            "in its place")
        source = f"continuous:{derivation.get('roll')},{derivation.get('adjust')}"
        with self._transaction() as con:
            key = [root, str(spec)]
            con.execute("DELETE FROM continuous WHERE root = ? AND spec = ?", key)
            con.execute("DELETE FROM rolls WHERE root = ? AND spec = ?", key)
            report = self.write_bars(root, spec, bars, source, replace=True)
            con.execute("INSERT INTO continuous (root, spec, derivation) VALUES (?, ?, ?)",
                        [*key, json.dumps(derivation, sort_keys=True)])
            for i, roll in enumerate(rolls):
                con.execute("INSERT INTO rolls VALUES (?, ?, ?, ?)",
                            [*key, i, json.dumps(roll, sort_keys=True)])
        return report

    def continuous(self, root: str, spec: BarSpec | str | None = None) -> dict | None:
        """How the continuous series of `root` (and `spec`; None: the only one) was derived,
        with its roll table under `rolls`; None where there is none."""
        with self._reading() as db:
            if not _has_table(db, "continuous"):
                return None
            where, params = "WHERE root = ?", [_symbol(root)]
            if spec is not None:
                where, params = where + " AND spec = ?", [*params, str(_spec(spec))]
            found = db.execute(f"SELECT spec, derivation, built_at FROM continuous {where} "
                               "ORDER BY spec", params).fetchall()
            if not found:
                return None
            if len(found) > 1:
                raise DataError(f"{root} has continuous series of several bar specs "
                                f"({', '.join(r[0] for r in found)}); choose one with --bars")
            spec_text, derivation, built_at = found[0]
            rolls = db.execute("SELECT roll FROM rolls WHERE root = ? AND spec = ? ORDER BY seq",
                               [_symbol(root), spec_text]).fetchall()
        return {**json.loads(derivation), "root": _symbol(root), "bars": spec_text,
                "built_at": str(built_at), "rolls": [json.loads(r[0]) for r in rolls]}

    def delete_series(self, symbol: str, spec: BarSpec | str | None) -> int:
        """Drop one series (``spec=None``: the ticks); returns the rows deleted."""
        symbol = _symbol(symbol)
        if spec is None:
            where, params, label = "FROM ticks WHERE symbol = ?", [symbol], ""
        else:
            label = str(_spec(spec))
            where, params = "FROM bars WHERE symbol = ? AND spec = ?", [symbol, label]
        with self._reading() as db:
            n = db.execute(f"SELECT count(*) {where}", params).fetchone()[0]
        if n == 0:
            raise self._missing(symbol, label, None, None)
        with self._transaction() as con:
            con.execute(f"DELETE {where}", params)
            if spec is not None:
                for table in ("continuous", "rolls"):
                    con.execute(f"DELETE FROM {table} WHERE root = ? AND spec = ?", params)
        return n

    def export_bars(self, symbol: str, spec: BarSpec | str, out: str | Path) -> int:
        """Write one bar series to .csv, .csv.gz or .parquet/.pq atomically (temp file, rename)."""
        out = Path(out)
        name = out.name.lower()
        if not name.endswith(_EXPORTS):
            raise DataError(f"{out}: unknown export format; use {', '.join(_EXPORTS)}")
        table = self.read_bars(symbol, spec).to_arrow()
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        os.close(fd)
        try:
            if name.endswith((".parquet", ".pq")):
                pq.write_table(table, tmp)
            elif name.endswith(".gz"):
                with pa.CompressedOutputStream(tmp, "gzip") as stream:
                    pacsv.write_csv(table, stream)
            else:
                pacsv.write_csv(table, tmp)
            os.replace(tmp, out)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return table.num_rows

    @contextlib.contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A reader meets a damaged file at its first query, not when it opens (it runs no DDL)."""
        db = self._db
        try:
            yield db
        except duckdb.Error as e:
            raise DataError(f"{self.path}: cannot read the store ({_one_line(e)}); it may be "
                            "damaged: restore it from a backup or import the data again") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Make several writes one all-or-nothing change (e.g. ticks plus the bars made from them).

        Writes inside join it. If any of them fails, nothing is written, even when the caller
        catches that error inside the block: the block then ends with a DataError.
        """
        with self._transaction():
            yield

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if self.read_only:
            raise DataError(f"{self.path}: this store was opened read-only; writing needs "
                            "MarketStore(path) (read_only=False)")
        con = self._db
        if self._depth:
            self._depth += 1
            try:
                yield con
            except BaseException:
                self._failed = True
                raise
            finally:
                self._depth -= 1
            return
        con.begin()
        self._depth, self._failed = 1, False
        try:
            yield con
            if self._failed:
                raise DataError(
                    f"{self.path}: a write in this transaction failed; nothing was written"
                )
            con.commit()
        except BaseException as e:
            with contextlib.suppress(duckdb.Error):
                con.rollback()
            if isinstance(e, duckdb.Error):
                raise DataError(
                    f"{self.path}: write failed, nothing was written ({_one_line(e)})"
                ) from None
            raise
        finally:
            self._depth, self._failed = 0, False

    @staticmethod
    def _insert(con: duckdb.DuckDBPyConnection, sql: str, params: list, table: pa.Table) -> None:
        con.register(_INCOMING, table)
        try:
            con.execute(sql, params)
        finally:
            con.unregister(_INCOMING)

    @staticmethod
    def _log_import(con, symbol: str, kind: str, spec: str, source: str,
                    report: WriteReport) -> None:
        con.execute(
            "INSERT INTO imports (symbol, kind, spec, source, rows, first_ts, last_ts, grid, "
            "mode) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [symbol, kind, spec, source, report.rows, report.first_ts, report.last_ts,
             report.grid, report.mode],
        )

    def _missing(
        self, symbol: str, spec: str, start_ns: int | None, end_ns: int | None
    ) -> DataError:
        what = f"{symbol} {spec or 'ticks'}"
        kind = "bars" if spec else "ticks"
        have = self.series()
        same = next((s for s in have if s.symbol == symbol and s.spec == spec), None)
        if same is not None:
            lo, hi = _range(start_ns, end_ns)
            return DataError(
                f"no {kind} for {what} between {_fmt(lo)} and {_fmt(hi)} in {self.path}; "
                f"it covers {format_ns(same.first_ts)} to {format_ns(same.last_ts)}"
            )
        listing = ", ".join(str(s) for s in have) or "nothing yet"
        return DataError(f"no {kind} for {what} in {self.path}; have: {listing}")


def store_wait_s() -> float:
    """Seconds to wait for a store another process holds: ``FOXHUNT_STORE_WAIT_S``, else 60."""
    raw = os.environ.get(WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(f"{WAIT_ENV}={raw!r}: not a number of seconds; set it to e.g. 60 "
                          "(0: do not wait)")
    return value


def _has_table(db: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the store has table `name`: a reader never adds the tables of newer versions."""
    return bool(db.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                           [name]).fetchone()[0])


def _symbol(symbol: str) -> str:
    s = symbol.strip()
    if not s:
        raise DataError("empty symbol")
    return s


def _spec(spec: BarSpec | str) -> BarSpec:
    return BarSpec.parse(spec) if isinstance(spec, str) else spec


def _spec_order(spec: str) -> tuple[int, float]:
    if not spec:
        return (0, 0.0)
    s = BarSpec.parse(spec)
    return (_KIND_ORDER[s.kind], s.size)


def _range(start_ns: int | None, end_ns: int | None) -> tuple[int, int]:
    return (
        _TS_MIN if start_ns is None else int(start_ns),
        _TS_MAX if end_ns is None else int(end_ns),
    )


def _fmt(ns: int) -> str:
    return "the start" if ns == _TS_MIN else "the end" if ns == _TS_MAX else format_ns(ns)


def _duration(ns: int) -> str:
    days = ns / 86_400e9
    if days >= 365:
        return f"{days / 365.25:.1f} years ({days:,.0f} days)"
    return f"{days:.1f} days"


def _one_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
