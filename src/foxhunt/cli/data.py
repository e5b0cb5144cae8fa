"""`foxhunt data ...`: import, list, show, export, the bundled ES sample and synthetic markets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from foxhunt.cli.common import (
    BarsOpt,
    FromOpt,
    JsonOpt,
    ToOpt,
    emit_json,
    err,
    fmt_ts,
    out,
    parse_ts,
    resolve_bars,
    rich_table,
    settings_of,
    working,
)
from foxhunt.errors import FoxhuntError

data_app = typer.Typer(help="Import, list, show and export market data.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")


def open_store(ctx: typer.Context, *, write: bool = False):
    """The configured store, read-only unless `write`: a writer locks every other process out,
    so only the commands that store bars ask for one."""
    from foxhunt.data.store import MarketStore

    return MarketStore(settings_of(ctx).store_path, read_only=not write)


def instrument_registry(ctx: typer.Context):
    from foxhunt.data.instruments import InstrumentRegistry

    return InstrumentRegistry.load(settings_of(ctx).instruments_file)


def _bar_specs(values: list[str] | None):
    from foxhunt.data.series import BarSpec

    return [BarSpec.parse(v) for v in values or []]


def _series_rows(infos, store=None) -> list[dict]:
    """One row per stored series. Given the store, grouped by root: a root's own series (a
    continuous one says how it was built), then its contract months by expiry."""
    contracts = {c.symbol: c for c in store.contracts()} if store is not None else {}
    rows = []
    for s in infos:
        c = contracts.get(s.symbol)
        row = {"symbol": s.symbol, "kind": s.kind, "bars": s.spec or "ticks (raw)",
               "first_ts": s.first_ts, "last_ts": s.last_ts, "first": fmt_ts(s.first_ts),
               "last": fmt_ts(s.last_ts), "rows": s.rows, "root": c.root if c else s.symbol}
        if c is not None:
            row.update(contract={"year": c.year, "month": c.month, "code": c.code,
                                 "expiry": c.expiry.isoformat(),
                                 "expiry_source": c.expiry_source})
        elif store is not None and s.spec:
            derived = store.continuous(s.symbol, s.spec)
            if derived is not None:
                row["continuous"] = {"roll": derived["roll"], "adjust": derived["adjust"],
                                     "rolls": len(derived["rolls"])}
        rows.append(row)
    order = {sym: i for i, sym in enumerate(sorted(contracts.values()))}
    return sorted(rows, key=lambda r: (r["root"], "contract" in r,
                                       order.get(contracts.get(r["symbol"]), -1)))


def _series_label(row: dict) -> str:
    if "contract" in row:
        c = row["contract"]
        how = "" if c["expiry_source"] == "definition" else ", by rule"
        return f"{row['bars']} (expires {c['expiry']}{how})"
    if "continuous" in row:
        c = row["continuous"]
        return f"{row['bars']} continuous ({c['roll']} roll, {c['adjust']}, {c['rolls']} rolls)"
    return row["bars"]


def _print_series(title: str, rows: list[dict]) -> None:
    out.print(rich_table(title, ["root", "symbol", "series", "first (UTC)", "last (UTC)", "rows"],
                         [[r["root"], r["symbol"], _series_label(r), r["first"], r["last"],
                           f"{r['rows']:,}"] for r in rows]))


def write_ticks_and_bars(store, symbol: str, ticks, specs, instrument, source: str,
                         off_grid: str = "error", replace: bool = False) -> tuple[list, list, dict]:
    """Check the ticks' grid, resample everything, then write ticks and every bar series in one
    transaction; returns ([(spec, bars)], the writes' notes, the trades snapped to the grid)."""
    from foxhunt.data.grid import check_ticks
    from foxhunt.data.resample import resample

    ticks, found = check_ticks(ticks, instrument.tick_size, off_grid, source)
    series = [(spec, resample(ticks, spec, point_value=instrument.point_value)) for spec in specs]
    grid = {"tick_size": instrument.tick_size, "off_grid": off_grid, "replace": replace}
    rows, prices = found.snapped
    notes = [found.snap_note(f"{symbol} ticks")] if rows else []
    with store.transaction():
        notes += store.write_ticks(symbol, ticks, source, **grid).notes(f"{symbol} ticks")
        for spec, bars in series:
            notes += store.write_bars(symbol, spec, bars, source, **grid).notes(f"{symbol} {spec}")
    return series, notes, {"rows": rows, "prices": prices}


@data_app.command("import")
def data_import(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(
        metavar="FILE", help="CSV, Parquet or Databento DBN file; several for contract months "
        "(each named after its contract, e.g. ESH4.csv, or with a symbol column).")],
    symbol: Annotated[str, typer.Option(
        help="Instrument symbol, e.g. ES; a contract month (ESH4, ESH24, 'ES H4') stores one "
        "contract under its root, and a root with several files or a symbol column of "
        "contract months stores each month as its own series (docs/futures.md).")],
    kind: Annotated[Literal["bars", "ticks"], typer.Option(help="What the file holds.")] = "bars",
    tz: Annotated[str | None, typer.Option(
        help="Zone of naive timestamps, e.g. America/Chicago (default: none; a file of naive "
        "times is then refused, epochs and times with a zone or offset need none).")] = None,
    ts_unit: Annotated[
        Literal["auto", "s", "ms", "us", "ns", "iso"], typer.Option(help="Timestamp encoding.")
    ] = "auto",
    bars: Annotated[
        list[str] | None,
        typer.Option("--bars", help="Ticks: resample into this series (repeatable: 1min, ticks:500, "
                     "volume:10000, dollar:5e7; default: none, the ticks alone). Bars: the series "
                     "name (default: inferred from the bar spacing)."),
    ] = None,
    stamp: Annotated[Literal["close", "open"], typer.Option(
        help="What a bar file's timestamps mark: the bar's close, or its open (then one bar "
        "spacing is added: bars are stored stamped at their close). Left at close, an import "
        "that looks open-stamped (bars on the session open, none on its close) warns.")] = "close",
    ts_is_open: Annotated[bool, typer.Option(
        "--ts-is-open", hidden=True, help="Old name of --stamp open.")] = False,
    off_grid: Annotated[
        Literal["error", "snap", "keep"],
        typer.Option(help="Prices off the instrument's tick grid: refuse the file (error), round "
                     "them to the grid (snap; the import says how many it moved), or keep them "
                     "for data that is not exchange-native (keep; e.g. spot FX)."),
    ] = "error",
    replace: Annotated[bool, typer.Option(
        "--replace", help="Drop the stored series first, instead of merging (the file's rows "
        "replace the stored ones in its time range, the rest stays).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate a file and store it; a bad file names the row and the rule and writes nothing.

    Says what the import replaced, how many prices it snapped to the tick grid, any gap of more
    than a week it leaves in the series, and when a bar file looks stamped with bar opens. A bar
    file needs no volume column (volume is then 0, and features leave out the volume group)."""
    from foxhunt.data.contract_import import wants_contracts
    from foxhunt.data.contracts import is_contract_symbol, parse_symbol, resolve
    from foxhunt.data.readers import infer_bar_spec, read_bars, read_ticks

    registry = instrument_registry(ctx)
    if symbol not in registry and not is_contract_symbol(symbol, registry):
        registry.get(symbol)  # the unknown-symbol error, before any file is read
    specs = _bar_specs(bars)
    if ts_is_open:
        stamp = "open"
    if kind == "bars" and wants_contracts(paths, symbol, registry):
        if len(specs) > 1:
            raise FoxhuntError("--bars: a bar file is one series; give --bars at most once")
        doc = _import_contracts(ctx, paths, symbol, registry, specs[0] if specs else None,
                                ts_unit=ts_unit, tz=tz, stamp=stamp, off_grid=off_grid,
                                replace=replace)
        _print_import(doc, as_json)
        return
    if len(paths) > 1:
        raise FoxhuntError(f"{len(paths)} files given for {symbol} {kind}: several files are "
                           "contract months of one root (bars); import other files one by one")
    path = paths[0]
    contract = kind == "ticks" and is_contract_symbol(symbol, registry)
    instrument = registry.get(parse_symbol(symbol, 2000)[0] if contract else symbol)
    warnings: list[str] = []
    with open_store(ctx, write=True) as store, working(f"importing {path.name} as {symbol}"):
        if kind == "ticks":
            ticks = read_ticks(path, ts_unit=ts_unit, tz=tz)
            contract = resolve(symbol, registry, int(ticks.ts[0])) if contract else None
            stored_as = contract.symbol if contract else symbol
            with store.transaction():
                written, notes, snapped = write_ticks_and_bars(store, stored_as, ticks, specs,
                                                               instrument, str(path), off_grid,
                                                               replace)
                if contract is not None:
                    store.record_contract(contract)
            doc = {"symbol": stored_as, "kind": "ticks", "file": str(path), "ticks": len(ticks),
                   "bars": {str(s): len(b) for s, b in written}, "snapped": snapped,
                   "notes": notes}
        else:
            if len(specs) > 1:
                raise FoxhuntError("--bars: a bar file is one series; give --bars at most once")
            frame = read_bars(path, ts_unit=ts_unit, tz=tz, ts_is_open=stamp == "open",
                              spec=specs[0] if specs else None)
            spec = specs[0] if specs else infer_bar_spec(frame.ts)
            explicit = ts_is_open or _given(ctx, "stamp")
            warnings += [] if explicit else _open_stamp_warnings(frame, spec, instrument, path)
            with store.transaction():
                report = store.write_bars(symbol, spec, frame, str(path),
                                          tick_size=instrument.tick_size, off_grid=off_grid,
                                          replace=replace)
            notes = report.notes(f"{symbol} {spec}")
            if not frame.has_volume:
                notes.append(f"{symbol} {spec}: no volume (0 on every bar): the volume "
                             "features are left out")
            doc = {"symbol": symbol, "kind": "bars", "file": str(path),
                   "bars": {str(spec): len(frame)}, "grid": report.grid, "stamp": stamp,
                   "snapped": report.snapped, "notes": notes}
    doc["warnings"] = warnings
    _print_import(doc, as_json)


def _print_import(doc: dict, as_json: bool) -> None:
    """An import's warnings (stderr), then its JSON document or its lines."""
    for warning in doc["warnings"]:
        err.print(f"warning: {warning}", soft_wrap=True, markup=False, highlight=False)
    if as_json:
        emit_json("data.import", {("file_kind" if k == "kind" else k): v for k, v in doc.items()})
        return
    what = f"{doc['ticks']:,} ticks" if doc["kind"] == "ticks" else "bars"
    if doc.get("contracts"):
        n = len(doc["contracts"])
        out.print(f"imported {n} contract month{'s' if n > 1 else ''} of {doc['symbol']} from "
                  f"{doc['file']}", markup=False)
        out.print(rich_table(f"{doc['symbol']} contract months", ["contract", "expiry", "from",
                                                                   "series", "rows"],
                             [[c["symbol"], c["expiry"], c["expiry_source"], c["bars"],
                               f"{c['rows']:,}"] for c in doc["contracts"]]))
    else:
        series = ", ".join(f"{s} ({n:,} rows)" for s, n in doc["bars"].items())
        out.print(f"imported {what} for {doc['symbol']} from {doc['file']}"
                  + (f": {series}" if series else ""), markup=False)
    for note in doc["notes"]:
        out.print(f"note: {note}", markup=False)


def _import_contracts(ctx: typer.Context, paths: list[Path], symbol: str, registry, spec, *,
                      ts_unit, tz, stamp: str, off_grid: str, replace: bool) -> dict:
    """Store each contract month in `paths` as its own series under its canonical symbol
    (ESH24) and register it under its root, all in one transaction: a bad file or contract
    writes nothing (docs/futures.md#contract-months)."""
    from foxhunt.data.contract_import import read_contracts
    from foxhunt.data.readers import infer_bar_spec

    read = read_contracts(paths, symbol, registry, ts_unit=ts_unit, tz=tz,
                          ts_is_open=stamp == "open", spec=spec)
    root = read[0].contract.root
    instrument = registry.get(root)
    notes: list[str] = []
    rows: dict[str, int] = {}
    contracts, snapped = [], {"rows": 0, "prices": 0}
    busy = working(f"importing {len(read)} {root} contract months")
    with open_store(ctx, write=True) as store, busy, store.transaction():
        for item in read:
            c = item.contract
            try:
                series = spec or infer_bar_spec(item.bars.ts)
            except FoxhuntError as e:
                raise FoxhuntError(f"{item.source}: {e}") from None
            report = store.write_bars(c.symbol, series, item.bars, item.source,
                                      tick_size=instrument.tick_size, off_grid=off_grid,
                                      replace=replace)
            store.record_contract(c)
            if item.open_interest is not None:
                store.write_open_interest(c.symbol, series, item.bars.ts, item.open_interest)
            notes += report.notes(f"{c.symbol} {series}")
            rows[str(series)] = rows.get(str(series), 0) + len(item.bars)
            snapped = {k: snapped[k] + report.snapped[k] for k in snapped}
            contracts.append({"symbol": c.symbol, "root": c.root, "year": c.year,
                              "month": c.month, "expiry": c.expiry.isoformat(),
                              "expiry_source": c.expiry_source, "bars": str(series),
                              "rows": len(item.bars), "first_ts": int(item.bars.ts[0]),
                              "last_ts": int(item.bars.ts[-1]),
                              "open_interest": item.open_interest is not None})
    return {"symbol": root, "kind": "bars", "file": ", ".join(str(p) for p in paths),
            "bars": rows, "stamp": stamp, "snapped": snapped, "notes": notes,
            "contracts": contracts, "warnings": []}


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the command line set option `name` (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"


def _open_stamp_warnings(frame, spec, instrument, path: Path) -> list[str]:
    """The one-line warning of a bar file that looks stamped with bar opens (the heuristic of
    `open_stamp_evidence`, docs/domain.md#time), or none."""
    from foxhunt.data.timestamps import open_stamp_evidence

    if spec.kind != "time":
        return []
    session = instrument.session
    evidence = open_stamp_evidence(frame.ts, session.tz, session.open, session.close,
                                   int(spec.ns))
    if evidence is None:
        return []
    warning = (f"{path} looks stamped with bar opens: {evidence}; stored as close-stamped: if "
               "the times are opens, import again with --stamp open --replace (or --stamp close "
               "to silence this)")
    return [warning]


@data_app.command("list")
def data_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List stored series: symbol, bar spec, first/last timestamp, rows."""
    rows = []
    if settings_of(ctx).store_path.exists():
        with open_store(ctx) as store:
            rows = _series_rows(store.series(), store)
    if as_json:
        emit_json("data.list", {"series": rows})
    elif not rows:
        out.print("the store is empty: try `foxhunt data sample` or `foxhunt data import FILE --symbol ES`")
    else:
        _print_series(f"series in {settings_of(ctx).store_path}", rows)


@data_app.command("show")
def data_show(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol.")],
    bars: BarsOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    limit: Annotated[int, typer.Option(help="Rows to print from the end of the range (0 = all).")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Print bars of one series in a time range."""
    from foxhunt.data.series import BarSpec

    spec = BarSpec.parse(resolve_bars(ctx, symbol, bars))
    with open_store(ctx) as store:
        frame = store.read_bars(symbol, spec, parse_ts(start, "--from"), parse_ts(end, "--to"))
    total = len(frame)
    if limit > 0 and total > limit:
        frame = frame.slice(total - limit, total)
    cols = {k: v for k, v in frame.columns().items() if v is not None}
    if as_json:
        emit_json("data.show", {"symbol": symbol, "bars": str(spec), "rows_in_range": total,
                   "rows": [dict(zip(cols, vals)) for vals in zip(*(c.tolist() for c in cols.values()))]})
        return
    rows = [[fmt_ts(int(r[0])), *(f"{v:g}" for v in r[1:])] for r in zip(*cols.values())]
    out.print(rich_table(f"{symbol} {spec}: last {len(frame)} of {total:,} bars in range",
                         ["ts (close, UTC)", *list(cols)[1:]], rows))


@data_app.command("export")
def data_export(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol.")],
    out_file: Annotated[Path, typer.Option("--out", help="Output .csv or .parquet file.")],
    bars: BarsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one bar series to CSV or Parquet (atomically: temp file, then rename)."""
    from foxhunt.data.series import BarSpec

    bars = resolve_bars(ctx, symbol, bars)
    with open_store(ctx) as store:
        rows = store.export_bars(symbol, BarSpec.parse(bars), out_file)
    if as_json:
        emit_json("data.export", {"symbol": symbol, "bars": bars, "out": str(out_file), "rows": rows})
    else:
        out.print(f"wrote {rows:,} bars of {symbol} {bars} to {out_file}")


@data_app.command("sample")
def data_sample(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Load the bundled real ES trades (2013-09-01..03) as ES ticks, 1-minute and 500-tick bars."""
    from foxhunt.data.sample import SAMPLE_BAR_SPECS, SAMPLE_SYMBOL

    rows = load_sample_into_store(ctx)
    if as_json:
        emit_json("data.sample", {"series": rows})
        return
    _print_series(f"bundled {SAMPLE_SYMBOL} sample ({', '.join(SAMPLE_BAR_SPECS)})", rows)


def load_sample_into_store(ctx: typer.Context) -> list[dict]:
    from foxhunt.data.sample import SAMPLE_BAR_SPECS, SAMPLE_SYMBOL, load_sample_ticks

    instrument = instrument_registry(ctx).get(SAMPLE_SYMBOL)
    with open_store(ctx, write=True) as store:
        write_ticks_and_bars(store, SAMPLE_SYMBOL, load_sample_ticks(), _bar_specs(SAMPLE_BAR_SPECS),
                             instrument, "bundled:es_trades_2013-09")
        return [r for r in _series_rows(store.series()) if r["symbol"] == SAMPLE_SYMBOL]


def store_synthetic(ctx: typer.Context, symbol: str, n_bars: int, seed: int, family: str,
                    signal_strength: float = 0.0, bar_seconds: int = 60) -> dict:
    """Generate a `foxhunt.data.synth` market and store its bars under `symbol` (replacing
    them); what was stored."""
    from foxhunt.data.series import NS, BarSpec
    from foxhunt.data.synth import generate

    instrument = instrument_registry(ctx).get(symbol)
    market = generate({"n_bars": n_bars, "seed": seed, "family": family,
                       "signal_strength": signal_strength, "bar_seconds": bar_seconds,
                       "tick_size": instrument.tick_size})
    spec = BarSpec("time", float(bar_seconds * NS["s"]))
    with open_store(ctx, write=True) as store, store.transaction():
        store.write_bars(symbol, spec, market.bars,
                         f"synth:family={family},seed={seed},X={signal_strength}",
                         tick_size=instrument.tick_size, replace=True)
    return {"symbol": symbol, **market.summary(), "series": str(spec)}


@data_app.command("synth")
def data_synth(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Option(help="Symbol to store the market under.")] = "SYN",
    n_bars: Annotated[int, typer.Option("--bars", help="Number of bars.", min=100)] = 100_000,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    family: Annotated[
        Literal["ar", "trend", "reversion", "regime", "garch_noise"],
        typer.Option(help="Market family: ar (planted signal), trend, reversion, regime (switches "
                     "between the two), garch_noise (nothing to find)."),
    ] = "ar",
    signal_strength: Annotated[float, typer.Option(help="Planted signal strength X of the ar family (0 = none).", min=0.0)] = 0.0,
    bar_seconds: Annotated[int, typer.Option(help="Bar length in seconds.", min=1)] = 60,
    as_json: JsonOpt = False,
) -> None:
    """Generate a synthetic market whose best simple rule is known and store its bars."""
    doc = store_synthetic(ctx, symbol, n_bars, seed, family, signal_strength, bar_seconds)
    if as_json:
        emit_json("data.synth", doc)
        return
    out.print(rich_table(f"synthetic market {symbol} {doc['series']}", ["field", "value"], [[k, v] for k, v in doc.items()]))


@data_app.command("continuous")
def data_continuous(
    ctx: typer.Context,
    root: Annotated[str, typer.Argument(help="Root whose contract months to stitch, e.g. ES.")],
    roll: Annotated[Literal["calendar", "volume", "open_interest"], typer.Option(
        help="When to roll: calendar (--days before expiry), volume or open_interest "
        "crossover (the next contract's figure above the front's on a day, decided at that "
        "day's close, acting on the next session).")] = "volume",
    adjust: Annotated[Literal["none", "difference", "ratio"], typer.Option(
        help="Prices before a roll: none (each contract's own), difference (back-adjusted by "
        "the legs' gap) or ratio (scaled by the legs' ratio).")] = "difference",
    bars: Annotated[str | None, typer.Option(
        "--bars", help="Bar series of the contract months (default: the one they all have; "
        "with several, 1min).")] = None,
    days: Annotated[int, typer.Option(
        help="Calendar rule: roll on the first trading day at most this many calendar days "
        "before the front's expiry.", min=0, max=90)] = 8,
    latest_days: Annotated[int, typer.Option(
        help="Crossover rules: roll at the latest this many calendar days before expiry.",
        min=0, max=90)] = 1,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Put the continuous series in place of a series an import stored "
        "under the root (a continuous one is always rebuilt).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build the continuous series of a root's contract months and store it under the root,
    with its roll table (docs/futures.md); features, training and backtests of ROOT read it.

    A stored, reproducible derivation: the same contract months and options give the same
    bars, and `foxhunt data rolls ROOT` shows the table and whether the months changed since."""
    from foxhunt.data.continuous import RollRule, build_continuous, stored_contract_series

    rule = RollRule(roll=roll, adjust=adjust, days_before=days, latest_days_before=latest_days)
    instrument = instrument_registry(ctx).get(root)
    with open_store(ctx, write=True) as store, working(f"building the {root} continuous series"):
        spec, series, notes = stored_contract_series(store, root, bars)
        built = build_continuous(series, rule, instrument)
        rolls = [r.to_dict() for r in built.rolls]
        store.write_continuous(root, spec, built.bars, built.derivation, rolls, replace=replace)
    doc = {"root": root, "bars": spec, **built.derivation, "rows": len(built.bars),
           "first_ts": int(built.bars.ts[0]), "last_ts": int(built.bars.ts[-1]),
           "rolls": rolls, "notes": notes}
    if as_json:
        emit_json("data.continuous", doc)
        return
    out.print(f"stored {root} {spec}: {len(built.bars):,} bars from "
              f"{len(doc['contracts'])} contract months, {roll} roll, {adjust} adjustment, "
              f"{len(rolls)} rolls", markup=False)
    _print_rolls(root, spec, doc)
    for note in notes:
        out.print(f"note: {note}", markup=False)


@data_app.command("rolls")
def data_rolls(
    ctx: typer.Context,
    root: Annotated[str, typer.Argument(help="Root of a stored continuous series, e.g. ES.")],
    bars: Annotated[str | None, typer.Option(
        "--bars", help="Bar series (default: the root's only continuous one).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the roll table of a root's continuous series, how it was built, and whether the
    contract months it was built from are still the ones stored."""
    from foxhunt.data.continuous import fingerprint, stored_contract_series
    from foxhunt.data.series import BarSpec

    spec = str(BarSpec.parse(bars)) if bars is not None else None
    with open_store(ctx) as store:
        found = store.continuous(root, spec)
        if found is None:
            raise FoxhuntError(f"no continuous series of {root}{' ' + spec if spec else ''} "
                               f"stored; build one with foxhunt data continuous {root}")
        _, series, _ = stored_contract_series(store, root, found["bars"])
    used = {c["symbol"] for c in found["contracts"]}
    current = ([s.symbol for s in series] == [c["symbol"] for c in found["contracts"]]
               and fingerprint([s for s in series if s.symbol in used]) == found["fingerprint"])
    doc = {**found, "current": current}
    if as_json:
        emit_json("data.rolls", doc)
        return
    out.print(f"{root} {found['bars']}: {found['roll']} roll, {found['adjust']} adjustment, "
              f"built {found['built_at']} from {', '.join(sorted(used))}", markup=False)
    _print_rolls(root, found["bars"], doc)
    if not current:
        out.print(f"note: the stored contract months changed since this series was built; "
                  f"rebuild it with foxhunt data continuous {root} --roll {found['roll']} "
                  f"--adjust {found['adjust']}", markup=False)


def _print_rolls(root: str, spec: str, doc: dict) -> None:
    rows = [[r["decided"], r["from"], r["to"], fmt_ts(r["roll_ts"]), f"{r['from_price']:g}",
             f"{r['to_price']:g}", f"{r['gap']:+g}", f"{r['adjustment']:g}", r["reason"]]
            for r in doc["rolls"]]
    out.print(rich_table(f"{root} {spec} rolls ({doc['roll']}, {doc['adjust']})",
                         ["decided", "from", "to", "roll bar (UTC)", "from px", "to px", "gap",
                          "adjustment", "reason"], rows))
