"""`foxhunt features ...`: list the causal features of a series and export the matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from foxhunt.cli.common import (
    BarsOpt,
    JsonOpt,
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
from foxhunt.cli.data import instrument_registry, open_store
from foxhunt.errors import FoxhuntError

features_app = typer.Typer(help="Inspect and export the causal feature matrix.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(features_app, name="features")


def build_features(ctx: typer.Context, symbol: str, bars: str, fit_until: str | None = None):
    """Bars of a stored series -> FeatureMatrix; normalisation fitted before `fit_until` if given.
    Groups the bars cannot feed (volume, on bars without it) are left out with a notice on
    stderr (`fit_to_bars`)."""
    import numpy as np

    from foxhunt.data.series import BarSpec
    from foxhunt.features.pipeline import FeaturePipeline, fit_to_bars

    instrument = instrument_registry(ctx).get(symbol)
    with open_store(ctx) as store:
        frame = store.read_bars(symbol, BarSpec.parse(bars))
    config, notices = fit_to_bars(settings_of(ctx).settings.features, frame)
    for notice in notices:
        err.print(f"note: {symbol} {bars}: {notice}", soft_wrap=True, markup=False,
                  highlight=False)
    pipeline = FeaturePipeline(config, instrument.session)
    fit_row = None
    if fit_until is not None:
        cutoff = parse_ts(fit_until, "--fit-until")
        fit_row = int(np.searchsorted(frame.ts, cutoff, side="left"))
        if fit_row <= 0 or fit_row >= len(frame):
            raise FoxhuntError(
                f"--fit-until {fit_until}: must fall inside the series "
                f"({fmt_ts(int(frame.ts[0]))} .. {fmt_ts(int(frame.ts[-1]))})"
            )
    with working(f"building features on {symbol} {bars} ({len(frame):,} bars)"):
        matrix = pipeline.transform(frame, fit_until=fit_row)
    return pipeline, frame, matrix


@features_app.command("show")
def features_show(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol.")],
    bars: BarsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the features (name, group, description) and summary statistics on a stored series."""
    bars = resolve_bars(ctx, symbol, bars)
    pipeline, frame, fm = build_features(ctx, symbol, bars)
    values = fm.values[fm.valid_from:]
    described = pipeline.describe()
    for i, d in enumerate(described):
        col = values[:, i]
        d.update(mean=float(col.mean()) if len(col) else None, std=float(col.std()) if len(col) else None)
    doc = {"symbol": symbol, "bars": bars, "rows": len(frame), "valid_from": fm.valid_from,
           "n_features": len(fm.names), "groups": {g: [fm.names[i] for i in idx] for g, idx in fm.groups.items()},
           "features": described}
    if as_json:
        emit_json("features.show", doc)
        return
    out.print(rich_table(
        f"{symbol} {bars}: {len(fm.names)} features on {len(frame):,} bars (valid from row {fm.valid_from})",
        ["feature", "group", "mean", "std", "description"],
        [[d["name"], d["group"], f"{d['mean']:+.3f}", f"{d['std']:.3f}", d["description"]] for d in described],
    ))


@features_app.command("export")
def features_export(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol.")],
    out_file: Annotated[Path, typer.Option("--out", help="Output .parquet file.")],
    bars: BarsOpt = None,
    fit_until: Annotated[
        str | None,
        typer.Option(help="Fit normalisation on bars before this ts only (default: none, causal "
                     "rolling z-scores).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the feature matrix with its ts column to Parquet (temp file, then rename)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    if out_file.suffix.lower() not in (".parquet", ".pq"):
        raise FoxhuntError(f"--out {out_file}: features export writes Parquet; use a .parquet name")
    bars = resolve_bars(ctx, symbol, bars)
    _, frame, fm = build_features(ctx, symbol, bars, fit_until)
    table = pa.table({"ts": frame.ts, **{n: fm.values[:, i] for i, n in enumerate(fm.names)}})
    table = table.replace_schema_metadata({
        "foxhunt.groups": str({g: [fm.names[i] for i in idx] for g, idx in fm.groups.items()}),
        "foxhunt.valid_from": str(fm.valid_from),
        "foxhunt.normalisation": "fitted before " + fit_until if fit_until else "causal rolling",
    })
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(f".{out_file.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out_file)
    doc = {"symbol": symbol, "bars": bars, "out": str(out_file), "rows": len(frame),
           "features": len(fm.names), "valid_from": fm.valid_from}
    if as_json:
        emit_json("features.export", doc)
    else:
        out.print(f"wrote {len(frame):,} rows x {len(fm.names)} features to {out_file}")
