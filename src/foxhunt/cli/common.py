"""What every command shares: the output consoles, `--json` and tables, time options, and this
invocation's settings. Imports no command, so any command module can use it."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
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

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


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
