"""What every command shares: the output consoles, `--json` and tables, time options, the help's
layout, run directories, the `--bars` default, and this invocation's settings. Imports no
command, so any command module can use it."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from foxhunt.errors import FoxhuntError
from foxhunt.schemas import envelope

if TYPE_CHECKING:
    from foxhunt.config import ResolvedSettings

out = Console(highlight=False)
if not out.is_terminal:
    out = Console(highlight=False, width=160)
err = Console(stderr=True, highlight=False)


@contextmanager
def working(what: str) -> Iterator[None]:
    """A spinner with `what` and the seconds spent on stderr while a step without a count runs
    (an import, a feature build, backtests), when stderr is a terminal; then one line saying
    how long it took. Nothing in a log: the step's result lines say it there."""
    if not err.is_terminal:
        yield
        return
    began = time.perf_counter()
    with err.status(f"{what} ...", spinner="dots"):
        yield
    err.print(f"{what}: {time.perf_counter() - began:.1f} s", markup=False, highlight=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
BarsOpt = Annotated[str | None, typer.Option(
    "--bars", help="Bar series, e.g. 1min, ticks:500 (default: the symbol's only stored series; "
    "with several, 1min).")]
FromOpt = Annotated[str | None, typer.Option(
    "--from", help="First bar ts, ISO or epoch ns, inclusive (default: the series' first).")]
ToOpt = Annotated[str | None, typer.Option(
    "--to", help="Last bar ts, ISO or epoch ns, inclusive (default: the series' last).")]
DeviceOpt = Annotated[str, typer.Option(help="auto (CUDA when available), cpu or cuda.")]
ProfileOpt = Annotated[str | None, typer.Option(
    help="GPU profile name or TOML path (default: $FOXHUNT_GPU_PROFILE, else the profile "
    "matching the CUDA device, else default, the CPU's).")]
RUN_DIR_RULE = ("A bare NAME is FOXHUNT_HOME/runs/NAME where that exists; a path (./x, runs/x, "
                "/abs/x) is used as given.")
"""How the options that read a run directory (`under_home(..., existing=True)`) find it."""
OUT_DIR_RULE = ("A bare NAME goes to FOXHUNT_HOME/{folder}/NAME; a path with a separator (./x, "
                "runs/x) or an absolute one is used as given.")
"""How the options that write a run or study directory (`under_home`) place it."""
ONE_POLICY = " Give one of --run, --checkpoint, --strategy."
"""Said by each of the options that choose what a backtest or paper run trades."""

HELP_MAX_WIDTH = 140
"""`--help` wraps to the terminal's width (COLUMNS), up to this many columns."""


def plain_help(app: typer.Typer) -> None:
    """Every `--help` of `app` as plain text (no Rich markup, so a `[risk]` in a help string
    stays), its paragraphs re-flowed to the terminal's width (up to `HELP_MAX_WIDTH`): a
    hard-wrapped docstring reads as one paragraph; options show their defaults."""
    app.rich_markup_mode = None
    app.info.context_settings = {**(app.info.context_settings or {}),
                                 "max_content_width": HELP_MAX_WIDTH}
    for group in app.registered_groups:
        plain_help(group.typer_instance)


@dataclass
class Invocation:
    """The root options of one `foxhunt` run (the root context's object). Its settings are read
    when a command first asks, then kept: once per run, and never for `--help` or `version`."""

    config_file: Path | None = None

    @cached_property
    def settings(self) -> ResolvedSettings:
        from foxhunt.config import load_settings

        return load_settings(self.config_file)


def settings_of(ctx: typer.Context) -> ResolvedSettings:
    """The settings of this invocation: `--config` over FOXHUNT_HOME/config.toml over the defaults."""
    return ctx.find_root().obj.settings


def emit_json(kind: str, doc: Mapping[str, Any]) -> None:
    """Print one `--json` document: the object `doc`, led by its `schema_version` and `kind`
    (docs/json.md; its schema is foxhunt/resources/schemas/KIND.schema.json)."""
    sys.stdout.write(json.dumps(envelope(kind, doc), default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def rich_table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(v) for v in r])
    return t


def fmt_ts(ns: int | None) -> str:
    """UTC ISO time with millisecond precision, or '-'."""
    import numpy as np

    if ns is None:
        return "-"
    return str(np.datetime64(int(ns), "ns").astype("datetime64[ms]")).replace("T", " ") + "Z"


def parse_ts(value: str | None, option: str) -> int | None:
    """`--from/--to`: integer nanoseconds, or an ISO time (UTC unless it carries a zone)."""
    if value is None:
        return None
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise FoxhuntError(
            f"{option} {value!r}: expected an ISO time like 2013-09-02T14:30 or epoch nanoseconds"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    delta = stamp - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def under_home(ctx: typer.Context, value: str | Path | None, folder: str = "runs", *,
               existing: bool = False) -> Path | None:
    """A run or study directory option: a bare NAME (no path separator) is
    FOXHUNT_HOME/<folder>/NAME; a path with a separator (./x, runs/x) or an absolute one is used
    as given. With `existing` (a directory to read), a bare NAME not under FOXHUNT_HOME is
    taken as given too, so a directory in the working directory still works."""
    if value is None:
        return None
    text = str(value)
    seps = {"/", os.sep, os.altsep} - {None}
    if any(sep in text for sep in seps) or text in (".", "..") or Path(text).is_absolute():
        return Path(text)
    home = settings_of(ctx).home / folder / text
    return Path(text) if existing and not home.exists() and Path(text).exists() else home


def resolve_bars(ctx: typer.Context, symbol: str, bars: str | None) -> str:
    """`--bars`: as given; else the symbol's only stored bar series; with several, 1min when
    stored, else an error listing them (1min when nothing is stored: the read says so)."""
    if bars is not None:
        return bars
    from foxhunt.data.store import MarketStore

    store_path = settings_of(ctx).store_path
    if not store_path.exists():
        return "1min"
    with MarketStore(store_path, read_only=True) as store:
        stored = [s.spec for s in store.series()
                  if s.kind == "bars" and s.symbol == symbol.strip()]
    if len(stored) == 1:
        return stored[0]
    if not stored or "1min" in stored:
        return "1min"
    raise FoxhuntError(f"{symbol} has {len(stored)} bar series stored ({', '.join(stored)}): "
                       "choose one with --bars")
