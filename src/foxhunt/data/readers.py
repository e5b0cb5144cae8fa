"""Read bars and ticks from CSV, Parquet and Databento DBN files, validated before returning.

The format comes from the suffix: ``.csv``, ``.csv.gz``, ``.parquet``, ``.pq``, ``.dbn``,
``.dbn.zst``. Column names are matched case-insensitively with common aliases (see ``_TS``,
``_BAR_COLUMNS``, ``_TICK_COLUMNS``); a file with separate ``date`` and clock-time ``time``
columns has them joined. Rows are never reordered or dropped, so an error's row number is the
file's 1-based data row (header excluded).

A bar file without a volume column imports with volume 0 on every bar: a series whose volume
is 0 throughout carries none (`Bars.has_volume`), and building features leaves out the ones
that need it, with a notice.

Bar timestamps are close times (docs/domain.md#time). Files stamped with the bar's open time
are read with ``ts_is_open=True``, which adds one bar spacing: the declared ``spec`` or, failing
that, the one ``infer_bar_spec`` finds.

DBN: OHLCV records carry the bar's open time in ``ts_event``; they always get the schema's
interval added (ohlcv-1m: +60 s), whatever ``ts_is_open`` says. Trades use ``ts_recv``, the
capture time Databento sorts them by (``ts_event`` can step back across feeds), which is also
when a live system would have known the trade. Prices are fixed-point 1e-9; the aggressor side
'B' is +1, 'A' is -1, 'N' is 0.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import replace
from pathlib import Path

import databento_dbn
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from foxhunt.data.series import NS, Bars, BarSpec, Ticks
from foxhunt.data.timestamps import TsUnit, first_failing_index, to_utc_ns
from foxhunt.data.validation import validate_bars, validate_ticks
from foxhunt.errors import DataError, ValidationError

_TS = ("ts", "timestamp", "datetime", "time", "date")
_BAR_COLUMNS = {
    "open": ("open",),
    "high": ("high",),
    "low": ("low",),
    "close": ("close",),
    "volume": ("volume", "vol"),
}
_FLOW_COLUMNS = {"buy_volume": ("buy_volume",), "sell_volume": ("sell_volume",)}
_TICK_COLUMNS = {"price": ("price", "last"), "size": ("size", "volume", "qty", "quantity")}
_SIDE = ("side", "aggressor", "aggressor_side")
_BUY, _SELL, _UNKNOWN = (
    ("B", "BUY", "BID"),
    ("A", "S", "SELL", "ASK"),
    ("N", "NONE", "U", "UNKNOWN"),
)
_NULLS = ["", "NULL", "null", "NA", "N/A", "#N/A"]
_SUFFIXES = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".dbn": "dbn",
    ".dbn.zst": "dbn",
}

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_DBN_PRICE_SCALE = 1e-9
_DBN_UNDEF_PRICE = np.iinfo(np.int64).max
_DBN_UNDEF_TS = np.iinfo(np.uint64).max
_DBN_TRADES = 0x00
_DBN_OHLCV = {
    0x20: BarSpec.parse("1s"),
    0x21: BarSpec.parse("1min"),
    0x22: BarSpec.parse("1h"),
    0x23: BarSpec.parse("1d"),
}
_DBN_HEADER = [
    ("length", "u1", 0),
    ("rtype", "u1", 1),
    ("publisher_id", "<u2", 2),
    ("instrument_id", "<u4", 4),
    ("ts_event", "<u8", 8),
]
_DBN_OHLCV_FIELDS = _DBN_HEADER + [
    ("open", "<i8", 16),
    ("high", "<i8", 24),
    ("low", "<i8", 32),
    ("close", "<i8", 40),
    ("volume", "<u8", 48),
]
_DBN_TRADE_FIELDS = _DBN_HEADER + [
    ("price", "<i8", 16),
    ("size", "<u4", 24),
    ("side", "u1", 29),
    ("ts_recv", "<u8", 32),
]


def read_bars(
    path: str | Path,
    *,
    ts_unit: TsUnit = "auto",
    tz: str | None = None,
    ts_is_open: bool = False,
    spec: BarSpec | str | None = None,
) -> Bars:
    """OHLCV bars stamped at close; ``spec`` only serves to shift open-stamped files."""
    path, fmt = _locate(path)
    source = str(path)
    if fmt == "dbn":
        bars = _dbn_bars(path, source)
        validate_bars(bars, source)
        return bars
    return bars_from_table(_read_table(path, fmt, source), source, ts_unit=ts_unit, tz=tz,
                           ts_is_open=ts_is_open, spec=spec)


def read_table(path: str | Path) -> tuple[pa.Table, str]:
    """A CSV or Parquet file's table as read for `read_bars`, and its source name; for
    importers that split one file into several series (contract months by a symbol column)."""
    path, fmt = _locate(path)
    if fmt == "dbn":
        raise DataError(f"{path}: a DBN file holds one instrument per file here; import each "
                        "contract month's file with --symbol ROOT+MONTH+YEAR (e.g. ESH4)")
    return _read_table(path, fmt, str(path)), str(path)


def bars_from_table(
    table: pa.Table,
    source: str,
    *,
    ts_unit: TsUnit = "auto",
    tz: str | None = None,
    ts_is_open: bool = False,
    spec: BarSpec | str | None = None,
) -> Bars:
    """`read_bars` of a table already read (its columns matched the same way)."""
    cols = _Columns(table, source)
    prices = {k: v for k, v in _BAR_COLUMNS.items() if k != "volume"}
    cols.require({"ts": _TS, **prices})
    flow = {k: v for k, v in _FLOW_COLUMNS.items() if cols.has(v)}
    if len(flow) == 1:
        missing = next(k for k in _FLOW_COLUMNS if k not in flow)
        raise DataError(f"{source}: has {next(iter(flow))} but no {missing}; give both or neither")
    if flow and not cols.has(_BAR_COLUMNS["volume"]):
        raise DataError(f"{source}: has buy_volume and sell_volume but no volume")
    ts = cols.ts(ts_unit, tz)
    numbers = {k: cols.numbers(k, v) for k, v in {**_BAR_COLUMNS, **flow}.items()
               if k != "volume" or cols.has(v)}
    numbers.setdefault("volume", np.zeros(len(ts)))  # no volume column: Bars.has_volume
    bars = Bars(ts=ts, **numbers)
    validate_bars(bars, source)
    if ts_is_open:
        step = BarSpec.parse(spec) if isinstance(spec, str) else spec
        if step is None:
            try:
                step = infer_bar_spec(bars.ts)
            except DataError as e:
                raise DataError(f"{source}: {e}") from None
        if step.kind != "time":
            raise DataError(f"{source}: ts_is_open needs a time bar spec, got {step}")
        bars = replace(bars, ts=bars.ts + step.ns)
    return bars


def read_ticks(path: str | Path, *, ts_unit: TsUnit = "auto", tz: str | None = None) -> Ticks:
    """Trades: ts, price, size and optional aggressor side (+1 buy, -1 sell, 0 unknown)."""
    path, fmt = _locate(path)
    source = str(path)
    if fmt == "dbn":
        ticks = _dbn_ticks(path, source)
    else:
        cols = _Columns(_read_table(path, fmt, source), source)
        cols.require({"ts": _TS, **_TICK_COLUMNS})
        ticks = Ticks(
            ts=cols.ts(ts_unit, tz),
            **{k: cols.numbers(k, v) for k, v in _TICK_COLUMNS.items()},
            side=cols.side() if cols.has(_SIDE) else None,
        )
    validate_ticks(ticks, source)
    return ticks


def optional_numbers(table: pa.Table, source: str, label: str,
                     aliases: tuple[str, ...]) -> np.ndarray | None:
    """A numeric column checked as `read_bars` checks prices (a missing or non-numeric value
    names its row), or None where the table has no such column."""
    cols = _Columns(table, source)
    return cols.numbers(label, aliases) if cols.has(aliases) else None


def infer_bar_spec(ts: np.ndarray) -> BarSpec:
    """The time-bar spec of sorted close times: median spacing rounded to whole seconds.

    Gaps (nights, weekends, quiet minutes) are fine as long as at least half of all spacings are
    whole multiples of the median; otherwise the bars are irregular and the spec must be declared.
    """
    ts = np.asarray(ts, dtype=np.int64)
    if ts.size < 3:
        raise DataError(
            f"need at least 3 bars to infer the bar spacing, got {ts.size}; declare the spec"
        )
    d = np.diff(ts)
    if (d <= 0).any():
        raise DataError("bar timestamps are not strictly increasing; cannot infer the bar spacing")
    step = round(float(np.median(d)) / NS["s"]) * NS["s"]
    if not NS["s"] <= step <= NS["d"]:
        raise DataError(
            f"median bar spacing {np.median(d) / NS['s']:g}s is outside 1s..1d; declare the spec"
        )
    off_grid = np.abs(d - np.rint(d / step).astype(np.int64) * step) > step // 100
    if off_grid.mean() > 0.5:
        raise DataError(
            f"bar timestamps are irregular: {off_grid.mean():.0%} of spacings are not multiples of "
            f"the median {BarSpec('time', float(step))}; declare the spec"
        )
    return BarSpec("time", float(step))


def _locate(path: str | Path) -> tuple[Path, str]:
    path = Path(path)
    name = path.name.lower()
    fmt = next((f for suffix, f in _SUFFIXES.items() if name.endswith(suffix)), None)
    if fmt is None:
        raise DataError(f"{path}: unknown file type; expected one of {', '.join(_SUFFIXES)}")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    return path, fmt


def _read_table(path: Path, fmt: str, source: str) -> pa.Table:
    table = _read_csv(path, source) if fmt == "csv" else _read_parquet(path, source)
    if table.num_rows == 0:
        raise DataError(f"{source}: no rows")
    return table


def _read_parquet(path: Path, source: str) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"{source}: not a readable Parquet file ({_one_line(e)})") from None


def _read_csv(path: Path, source: str) -> pa.Table:
    """Time columns are read as text (parsed by to_utc_ns); a bad number later in a big file
    makes Arrow's typed read fail without a row, so that case is re-read as text to find it."""
    try:
        with pacsv.open_csv(path) as reader:
            names = reader.schema.names
    except (pa.ArrowException, OSError, EOFError) as e:
        raise _csv_error(e, path, source) from None
    text = {n: pa.string() for n in names if n.strip().lower() in _TS}
    for types in (text, {n: pa.string() for n in names}):
        opts = pacsv.ConvertOptions(
            column_types=types, null_values=_NULLS, strings_can_be_null=True
        )
        try:
            return pacsv.read_csv(path, convert_options=opts)
        except pa.ArrowInvalid as e:
            if not str(e).startswith("CSV conversion error"):
                raise _csv_error(e, path, source) from None
        except (pa.ArrowException, OSError, EOFError) as e:
            raise _csv_error(e, path, source) from None
    raise DataError(f"{source}: not a readable CSV file")


def _csv_error(e: BaseException, path: Path, source: str) -> DataError:
    msg = _one_line(e)
    if msg.startswith("Empty CSV file"):
        return DataError(f"{source}: no rows")
    if msg.startswith("CSV parse error"):
        return ValidationError(
            "wrong number of fields",
            _ragged_row(path),
            source,
            msg.removeprefix("CSV parse error: "),
        )
    return DataError(f"{source}: not a readable CSV file ({msg})")


def _ragged_row(path: Path) -> int | None:
    """The first data row whose field count differs from the header's (for messages only)."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", newline="", encoding="utf-8", errors="replace") as f:
        rows = csv.reader(f)
        width = len(next(rows, []))
        for i, row in enumerate(rows, start=1):
            if len(row) != width:
                return i
    return None


class _Columns:
    """A table's columns by lower-cased name, turned into checked numpy arrays."""

    def __init__(self, table: pa.Table, source: str):
        self.table, self.source = table, source
        self.by_name = {n.strip().lower(): n for n in table.column_names}

    def has(self, aliases: tuple[str, ...]) -> bool:
        return any(a in self.by_name for a in aliases)

    def require(self, columns: dict[str, tuple[str, ...]]) -> None:
        """Name every missing column at once, with its aliases and the columns the file has."""
        missing = []
        for label, aliases in columns.items():
            if not self.has(aliases):
                others = [repr(a) for a in aliases if a != label]
                missing.append(repr(label) + (f" (or {', '.join(others)})" if others else ""))
        if missing:
            raise DataError(
                f"{self.source}: missing column{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}; found: {', '.join(self.table.column_names)}"
            )

    def column(self, label: str, aliases: tuple[str, ...]) -> pa.Array:
        self.require({label: aliases})
        name = next(self.by_name[a] for a in aliases if a in self.by_name)
        return self.table.column(name).combine_chunks()

    def ts(self, unit: TsUnit, tz: str | None) -> np.ndarray:
        explicit = [a for a in _TS if a in self.by_name and a not in ("time", "date")]
        col = self.column("ts", _TS)
        if not explicit and "date" in self.by_name and "time" in self.by_name:
            date, clock = self.column("date", ("date",)), self.column("time", ("time",))
            first = clock.drop_null()[:1].to_pylist()
            if pa.types.is_string(clock.type) and first and ":" in first[0] and "-" not in first[0]:
                col = pc.binary_join_element_wise(
                    pc.utf8_trim_whitespace(date), pc.utf8_trim_whitespace(clock), " "
                )
        return to_utc_ns(col, unit=unit, tz=tz, source=self.source)

    def numbers(self, label: str, aliases: tuple[str, ...]) -> np.ndarray:
        col = self.column(label, aliases)
        if col.null_count:
            row = int(np.argmax(col.is_null().to_numpy(zero_copy_only=False))) + 1
            raise ValidationError(f"missing {label}", row, self.source)
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            s = pc.utf8_trim_whitespace(col)
            try:
                col = pc.cast(s, pa.float64())
            except pa.ArrowInvalid:
                bad = first_failing_index(len(s), lambda lo, hi: pc.cast(s[lo:hi], pa.float64()))
                raise ValidationError(
                    f"non-numeric {label}", bad + 1, self.source, repr(s[bad].as_py())
                ) from None
        elif not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
            raise DataError(f"{self.source}: column {label!r} holds {t}, expected numbers")
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)

    def side(self) -> np.ndarray:
        col = self.column("side", _SIDE)
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
            v = pc.fill_null(pc.cast(col, pa.float64()), 0.0).to_numpy(zero_copy_only=False)
            return np.sign(np.nan_to_num(v)).astype(np.int8)
        s = pc.utf8_upper(pc.utf8_trim_whitespace(pc.cast(col, pa.string())))
        s = pc.fill_null(s, "N")
        buy = pc.is_in(s, pa.array(_BUY)).to_numpy(zero_copy_only=False)
        sell = pc.is_in(s, pa.array(_SELL)).to_numpy(zero_copy_only=False)
        known = buy | sell | pc.is_in(s, pa.array(_UNKNOWN)).to_numpy(zero_copy_only=False)
        if not known.all():
            row = int(np.argmin(known))
            raise ValidationError(
                "unknown side",
                row + 1,
                self.source,
                f"{s[row].as_py()!r}; expected B/BUY, A/S/SELL or N",
            )
        return buy.astype(np.int8) - sell.astype(np.int8)


def _dbn_bars(path: Path, source: str) -> Bars:
    rec, rtype = _dbn_records(path, source, set(_DBN_OHLCV), "bars")
    return Bars(
        ts=rec["ts_event"].astype(np.int64) + _DBN_OHLCV[rtype].ns,
        open=_dbn_price(rec["open"]),
        high=_dbn_price(rec["high"]),
        low=_dbn_price(rec["low"]),
        close=_dbn_price(rec["close"]),
        volume=rec["volume"].astype(np.float64),
    )


def _dbn_ticks(path: Path, source: str) -> Ticks:
    rec, _ = _dbn_records(path, source, {_DBN_TRADES}, "ticks")
    side = rec["side"]
    return Ticks(
        ts=rec["ts_recv"].astype(np.int64),
        price=_dbn_price(rec["price"]),
        size=rec["size"].astype(np.float64),
        side=(side == ord("B")).astype(np.int8) - (side == ord("A")).astype(np.int8),
    )


def _dbn_price(fixed: np.ndarray) -> np.ndarray:
    return np.where(fixed == _DBN_UNDEF_PRICE, np.nan, fixed.astype(np.float64) * _DBN_PRICE_SCALE)


def read_dbn_instruments(path: str | Path) -> tuple[list[tuple[int, Bars]], dict[int, str]]:
    """A DBN OHLCV file of several instruments (a download of ES.FUT, or of ESH4 and ESM4):
    each instrument's bars, by instrument id in order of first appearance, and the raw symbol
    the file's symbology mappings give each id (where they give one: a download by raw symbol
    maps each symbol to its ids; a parent symbol maps to no contract)."""
    path, fmt = _locate(path)
    source = str(path)
    if fmt != "dbn":
        raise DataError(f"{source}: not a DBN file")
    rec, rtype = _dbn_records(path, source, set(_DBN_OHLCV), "bars", split=True)
    out = []
    ids = rec["instrument_id"]
    for iid in dict.fromkeys(ids.tolist()):
        part = rec[ids == iid]
        bars = Bars(ts=part["ts_event"].astype(np.int64) + _DBN_OHLCV[rtype].ns,
                    open=_dbn_price(part["open"]), high=_dbn_price(part["high"]),
                    low=_dbn_price(part["low"]), close=_dbn_price(part["close"]),
                    volume=part["volume"].astype(np.float64))
        validate_bars(bars, f"{source} (instrument {iid})")
        out.append((int(iid), bars))
    symbols: dict[int, str] = {}
    for raw_symbol, intervals in (_dbn_read(path, source)[2].mappings or {}).items():
        for interval in intervals:
            text = str(interval.get("symbol", "")).strip()
            if text.isdigit():
                symbols[int(text)] = str(raw_symbol)
    return out, symbols


def read_dbn_definitions(path: str | Path) -> dict[int, tuple[str, int | None]] | None:
    """The futures in a DBN file of instrument definitions (schema `definition`): instrument
    id -> (raw symbol, expiration in ns UTC or None); None when the file holds no definitions
    (spreads and options are left out: instrument class F only)."""
    path, fmt = _locate(path)
    source = str(path)
    if fmt != "dbn":
        return None
    raw, _, meta = _dbn_read(path, source)
    if meta.schema != databento_dbn.Schema.DEFINITION:
        return None
    decoder = databento_dbn.DBNDecoder()
    try:
        decoder.write(raw)
        records = decoder.decode()
    except (databento_dbn.DBNError, ValueError) as e:
        raise DataError(f"{source}: corrupt DBN definitions ({_one_line(e)})") from None
    out = {}
    for r in records:
        if not isinstance(r, databento_dbn.InstrumentDefMsg | databento_dbn.InstrumentDefMsgV2
                          | databento_dbn.InstrumentDefMsgV1):
            continue
        if str(getattr(r, "instrument_class", "")) not in ("F", "InstrumentClass.FUTURE"):
            continue
        expiration = int(r.expiration)
        out[int(r.instrument_id)] = (str(r.raw_symbol),
                                     None if expiration >= _DBN_UNDEF_TS else expiration)
    return out


def _dbn_read(path: Path, source: str) -> tuple[bytes, int, databento_dbn.Metadata]:
    """A DBN file's decoded bytes, where its records start, and its metadata."""
    try:
        with open(path, "rb") as f:
            compressed = f.read(4) == _ZSTD_MAGIC
        if compressed:
            with pa.input_stream(str(path), compression="zstd") as stream:
                raw = stream.read()
        else:
            raw = path.read_bytes()
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{source}: not a readable DBN file ({_one_line(e)})") from None
    if raw[:3] != b"DBN" or len(raw) < 8:
        raise DataError(f"{source}: not a DBN file (no DBN header)")
    start = 8 + int.from_bytes(raw[4:8], "little")
    try:
        meta = databento_dbn.Metadata.decode(raw[:start])
    except (databento_dbn.DBNError, ValueError) as e:
        raise DataError(f"{source}: corrupt DBN metadata ({_one_line(e)})") from None
    return raw, start, meta


def _dbn_records(path: Path, source: str, rtypes: set[int], what: str,
                 split: bool = False) -> tuple[np.ndarray, int]:
    """The records of the wanted types as a structured array over the decoded bytes.

    A file of one record type (any historical download) is viewed in place; a mixed stream is
    walked record by record to find the wanted ones. Records of several instruments
    interleaved are refused unless `split` (the caller separates them).
    """
    raw, start, meta = _dbn_read(path, source)
    body = np.frombuffer(raw, dtype=np.uint8, offset=min(start, len(raw)))
    if body.size == 0:
        raise DataError(f"{source}: no rows")
    length = int(body[0]) * 4
    if (
        length
        and body.size % length == 0
        and (body[::length] == body[0]).all()
        and (body[1::length] == body[1]).all()
    ):
        offsets = np.arange(0, body.size, length)
    else:
        offsets = _walk(raw, start, source) - start
    found = body[offsets + 1]
    wanted = offsets[np.isin(found, list(rtypes))]
    if wanted.size == 0:
        schema = meta.schema.value if meta.schema is not None else f"rtype {int(found[0]):#04x}"
        need = "ohlcv-1s, ohlcv-1m, ohlcv-1h or ohlcv-1d" if what == "bars" else "trades"
        raise DataError(f"{source}: DBN schema {schema} holds no {what}; {what} come from {need}")
    kinds = np.unique(body[wanted + 1])
    lengths = np.unique(body[wanted])
    if kinds.size > 1 or lengths.size > 1:
        raise DataError(
            f"{source}: mixes record types or sizes for {what}; export one schema per file"
        )
    length = int(lengths[0]) * 4
    fields = _DBN_OHLCV_FIELDS if what == "bars" else _DBN_TRADE_FIELDS
    if length < max(f[2] + np.dtype(f[1]).itemsize for f in fields):
        raise DataError(f"{source}: corrupt DBN records ({length} bytes each)")
    dtype = np.dtype(
        {
            "names": [f[0] for f in fields],
            "formats": [f[1] for f in fields],
            "offsets": [f[2] for f in fields],
            "itemsize": length,
        }
    )
    if wanted.size == offsets.size:
        rec = body.view(dtype)
    else:
        rec = body[(wanted[:, None] + np.arange(length)).ravel()].view(dtype)
    ids = rec["instrument_id"]
    runs = int(np.count_nonzero(np.diff(ids))) + 1
    distinct = np.unique(ids)
    if runs > distinct.size and not split:
        shown = ", ".join(str(i) for i in distinct[:5]) + (", ..." if distinct.size > 5 else "")
        raise DataError(
            f"{source}: interleaves {distinct.size} instruments (ids {shown}); import them as "
            "contract months under their root (--symbol ES), or export one contract or a "
            "continuous symbol (e.g. ES.c.0) per file"
        )
    return rec, int(kinds[0])


def _walk(raw: bytes, start: int, source: str) -> np.ndarray:
    offsets = []
    off, end = start, len(raw)
    while off < end:
        length = raw[off] * 4
        if length == 0 or off + length > end:
            raise DataError(f"{source}: corrupt DBN record at byte {off}")
        offsets.append(off)
        off += length
    return np.asarray(offsets, dtype=np.int64)


def _one_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
