"""Reading contract months from files: which rows belong to which contract, and its expiry.

`foxhunt data import` stores each contract month as its own bar series under its canonical
symbol (ESH24) and registers it under its root (`MarketStore.record_contract`). A file says
which contract it holds in one of three ways, tried in this order:

1. a `symbol` column (aliases `contract`, `raw_symbol`): its rows are split by symbol, each
   group keeping the file's row order, and each symbol parsed as a contract of the root;
2. the import's `--symbol` itself names a contract month (`--symbol ESH4`, one file);
3. the file's name starts with the contract (`ESH4.csv`, `ESH4_1min.parquet`), when several
   files are imported under a root (`--symbol ES`).

A Databento DBN file of OHLCV records may hold several instruments (a download of ESH4 and
ESM4, or of the parent ES.FUT): each instrument id is one contract, named by the instrument
definitions imported with it (a DBN file of the `definition` schema, which also gives the
expiration) or else by the file's symbology mappings; calendar spreads are left out.

Optional columns: `expiration` (alias `expiry`; the instrument definition's last trading day,
a date or a time; one value per contract) and `open_interest` (alias `oi`; known at each
bar's close), which the open-interest roll rule reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from foxhunt.data.contracts import (
    FuturesContract,
    is_contract_symbol,
    parse_symbol,
    resolve,
    root_of,
)
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.readers import (
    bars_from_table,
    optional_numbers,
    read_dbn_definitions,
    read_dbn_instruments,
    read_table,
)
from foxhunt.data.series import Bars
from foxhunt.data.timestamps import TsUnit, to_utc_ns
from foxhunt.errors import DataError

SYMBOL_COLUMNS = ("symbol", "contract", "raw_symbol")
EXPIRATION_COLUMNS = ("expiration", "expiry")
OI_COLUMNS = ("open_interest", "oi", "openinterest")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ContractBars:
    """One contract month's bars as read from a file, ready to store."""

    contract: FuturesContract
    bars: Bars
    open_interest: np.ndarray | None
    source: str


def wants_contracts(paths: list[Path], symbol: str, registry: InstrumentRegistry) -> bool:
    """Whether an import stores contract months: several files, a contract symbol, or one file
    whose symbol column names contract months of `symbol` (a column that only repeats
    `symbol` is an ordinary single series)."""
    if len(paths) > 1 or is_contract_symbol(symbol, registry):
        return True
    path = paths[0]
    if _is_dbn(path):
        return read_dbn_definitions(path) is not None or len(read_dbn_instruments(path)[0]) > 1
    table, _ = read_table(path)
    names = {n.strip().lower(): n for n in table.column_names}
    column = next((names[a] for a in SYMBOL_COLUMNS if a in names), None)
    if column is None:
        return False
    values = {str(v).strip() for v in pc.unique(table.column(column)).to_pylist()}
    return values != {symbol}


def read_contracts(paths: list[Path], symbol: str, registry: InstrumentRegistry, *,
                   ts_unit: TsUnit = "auto", tz: str | None = None, ts_is_open: bool = False,
                   spec=None) -> list[ContractBars]:
    """Every contract month in `paths` (module docstring), validated, by root then expiry.

    `symbol` is the root the contracts must belong to, or one contract month (then one file).
    Nothing is returned unless every file and every contract reads cleanly; a contract met
    twice is refused, naming both places."""
    contract_symbol = is_contract_symbol(symbol, registry)
    if contract_symbol and len(paths) > 1:
        raise DataError(f"--symbol {symbol} names one contract month but {len(paths)} files "
                        f"were given; import several under their root (--symbol "
                        f"{_root_of(symbol)}) with a symbol column or files named after their "
                        "contracts (ESH4.csv)")
    if not contract_symbol and symbol not in registry:
        registry.get(symbol)  # the unknown-symbol error, listing the known ones
    root = _root_of(symbol) if contract_symbol else symbol
    definitions: dict[int, tuple[str, int | None]] = {}
    bar_paths = []
    for path in paths:
        found = read_dbn_definitions(path) if _is_dbn(path) else None
        if found is None:
            bar_paths.append(path)
        else:
            definitions.update(found)
    if not bar_paths:
        raise DataError(f"{', '.join(map(str, paths))}: instrument definitions only; import them "
                        "together with the bars they define")
    out: dict[str, ContractBars] = {}
    for path in bar_paths:
        if _is_dbn(path):
            groups = _dbn_groups(path, symbol, contract_symbol, len(paths), definitions, registry)
        else:
            groups = _groups(path, symbol, contract_symbol, len(paths))
        for raw, table, source in groups:
            read = _contract_bars(raw, table, source, registry, ts_unit, tz, ts_is_open, spec) \
                if isinstance(table, pa.Table) else _dbn_contract(raw, table, source, registry)
            if read.contract.root != root:
                raise DataError(f"{source}: {raw!r} is a {read.contract.root} contract, not "
                                f"{root}; import it with --symbol {read.contract.root}")
            if read.contract.symbol in out:
                raise DataError(f"{source}: contract {read.contract.symbol} also comes from "
                                f"{out[read.contract.symbol].source}; import each month once")
            out[read.contract.symbol] = read
    return sorted(out.values(), key=lambda c: c.contract)


def _root_of(symbol: str) -> str:
    return parse_symbol(symbol, 2000)[0]


def _is_symbol(text: str) -> bool:
    return root_of(text) is not None


def _groups(path: Path, symbol: str, contract_symbol: bool,
            n_files: int) -> list[tuple[str, pa.Table | None, str]]:
    """(raw contract symbol, its rows, source) for each contract in a CSV/Parquet file."""
    table, source = read_table(path)
    names = {n.strip().lower(): n for n in table.column_names}
    column = next((names[a] for a in SYMBOL_COLUMNS if a in names), None)
    if column is not None:
        col = pc.utf8_trim_whitespace(pc.cast(table.column(column), pa.string()))
        if col.null_count:
            row = int(np.argmax(col.is_null().to_numpy(zero_copy_only=False))) + 1
            raise DataError(f"{source}, row {row}: missing {column}")
        values = np.asarray(col.to_pylist(), dtype=object)
        rest = table.drop_columns([column])
        groups = []
        for raw in dict.fromkeys(values.tolist()):
            rows = np.flatnonzero(values == raw)
            groups.append((raw, rest.take(pa.array(rows)), f"{source} (rows of {raw})"))
        if contract_symbol and {g[0] for g in groups} != {symbol}:
            other = next(g[0] for g in groups if g[0] != symbol)
            raise DataError(f"{source}: its symbol column holds {other!r}, not only {symbol}; "
                            f"import it with --symbol {_root_of(symbol)} to split it by contract")
        return groups
    if contract_symbol:
        return [(symbol, table, source)]
    return [(_name_symbol(path, n_files), table, source)]


def _name_symbol(path: Path, n_files: int) -> str:
    token = re.split(r"[_\-. ]", path.name, maxsplit=1)[0]
    if not token:
        token = path.name
    if not re.fullmatch(r"[A-Za-z0-9]+[FGHJKMNQUVXZfghjkmnquvxz]\d{1,4}", token):
        several = f" (one of {n_files} files)" if n_files > 1 else ""
        raise DataError(f"{path}{several}: cannot tell which contract month it holds; give it a "
                        "symbol column, name it after the contract (ESH4.csv), or import it "
                        "alone with --symbol ESH4")
    return token.upper()


def _contract_bars(raw: str, table: pa.Table, source: str, registry: InstrumentRegistry,
                   ts_unit: TsUnit, tz: str | None, ts_is_open: bool, spec) -> ContractBars:
    bars = bars_from_table(table, source, ts_unit=ts_unit, tz=tz, ts_is_open=ts_is_open,
                           spec=spec)
    oi = optional_numbers(table, source, "open_interest", OI_COLUMNS)
    root = _root_of(raw) if _is_symbol(raw) else raw
    tz = registry.get(root).session.tz if root in registry else "UTC"
    expiry = _expiration(table, source, tz)
    try:
        contract = resolve(raw, registry, int(bars.ts[0]), expiry)
    except DataError as e:
        raise DataError(f"{source}: {e}") from None
    if oi is not None and (oi < 0).any():
        row = int(np.argmax(oi < 0)) + 1
        raise DataError(f"{source}, row {row}: open_interest is negative ({oi[row - 1]:g})")
    return ContractBars(contract, bars, oi, source)


def _is_dbn(path: Path) -> bool:
    return path.name.lower().endswith((".dbn", ".dbn.zst"))


def _dbn_groups(path: Path, symbol: str, contract_symbol: bool, n_files: int,
                definitions: dict[int, tuple[str, int | None]],
                registry: InstrumentRegistry) -> list[tuple[str, tuple, str]]:
    """(raw symbol, (bars, expiry), source) of each outright contract in a DBN OHLCV file. An
    instrument's symbol comes from the definitions imported with it, else the file's symbology
    mappings; a file of one instrument may also be named by --symbol ESH4 or its file name.
    Calendar spreads (ESM4-ESU4) are left out."""
    instruments, mapped = read_dbn_instruments(path)
    groups = []
    for iid, bars in instruments:
        raw, expiration = definitions.get(iid, (mapped.get(iid), None))
        if raw is None and len(instruments) == 1:
            raw = symbol if contract_symbol else _name_symbol(path, n_files)
        if raw is None:
            raise DataError(f"{path}: instrument {iid} has no raw symbol in the file's symbology "
                            "mappings; import it with its instrument definitions (a DBN file "
                            "of the definition schema) beside it")
        if "-" in raw:
            continue
        expiry = None
        if expiration is not None:
            tz = registry.get(_root_of(raw)).session.tz if _is_symbol(raw) and \
                _root_of(raw) in registry else "UTC"
            expiry = datetime.fromtimestamp(expiration / 1e9, tz=UTC).astimezone(
                ZoneInfo(tz)).date()
        groups.append((raw, (bars, expiry), f"{path} ({raw}, instrument {iid})"))
    if not groups:
        raise DataError(f"{path}: only calendar spreads; no outright contract month to import")
    return groups


def _dbn_contract(raw: str, read: tuple, source: str,
                  registry: InstrumentRegistry) -> ContractBars:
    bars, expiry = read
    try:
        contract = resolve(raw, registry, int(bars.ts[0]), expiry)
    except DataError as e:
        raise DataError(f"{source}: {e}") from None
    return ContractBars(contract, bars, None, source)


def _expiration(table: pa.Table, source: str, tz: str) -> date | None:
    """The contract's last trading day from an expiration column: a date as written, a time
    as its date in the session's zone; the same on every row."""
    names = {n.strip().lower(): n for n in table.column_names}
    column = next((names[a] for a in EXPIRATION_COLUMNS if a in names), None)
    if column is None:
        return None
    col = table.column(column).combine_chunks()
    values = {v for v in col.to_pylist()}
    if None in values:
        row = int(np.argmax(col.is_null().to_numpy(zero_copy_only=False))) + 1
        raise DataError(f"{source}, row {row}: missing {column}")
    if len(values) != 1:
        shown = ", ".join(sorted(str(v) for v in values)[:3])
        raise DataError(f"{source}: {column} differs between rows of one contract ({shown}); a "
                        "contract has one expiration")
    value = values.pop()
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(ZoneInfo(tz)).date()
    if isinstance(value, date):
        return value
    text = str(value).strip()
    if _DATE.match(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise DataError(f"{source}: {column} {text!r} is not a date") from None
    ns = to_utc_ns(pa.array([text]), unit="auto", tz="UTC", source=f"{source} ({column})")
    return datetime.fromtimestamp(int(ns[0]) / 1e9, tz=UTC).astimezone(ZoneInfo(tz)).date()
