"""The Typer app, shared options and output helpers, and the `version` and `config` commands."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from foxhunt import __version__
from foxhunt.errors import FoxhuntError

app = typer.Typer(
    name="foxhunt",
    help="Train, validate and run deep-RL trading agents on futures data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Show the resolved configuration.", no_args_is_help=True)
data_app = typer.Typer(help="Import, list, show and export market data.", no_args_is_help=True)
features_app = typer.Typer(help="Inspect and export the causal feature matrix.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(data_app, name="data")
app.add_typer(features_app, name="features")

out = Console(highlight=False)
if not out.is_terminal:
    out = Console(highlight=False, width=160)
err = Console(stderr=True, highlight=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


@dataclass(frozen=True)
class Globals:
    config_file: Path | None


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Optional[Path], typer.Option("--config", help="TOML file overriding the defaults.")
    ] = None,
) -> None:
    ctx.obj = Globals(config)


def _settings(ctx: typer.Context):
    from foxhunt.config import load_settings

    root = ctx.find_root().obj
    return load_settings(root.config_file if root else None)


def _emit_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(v) for v in r])
    return t


def fmt_ts(ns: int | None) -> str:
    """UTC ISO time with millisecond precision, or '-'."""
    if ns is None:
        return "-"
    return str(np.datetime64(int(ns), "ns").astype("datetime64[ms]")).replace("T", " ") + "Z"


def parse_ts_option(value: str | None, option: str) -> int | None:
    """`--from/--to`: integer nanoseconds, or an ISO time (UTC unless it carries a zone)."""
    if value is None:
        return None
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise FoxhuntError(
            f"{option} {value!r}: expected an ISO time like 2013-09-02T14:30 or epoch nanoseconds"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    delta = stamp - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


# ----------------------------------------------------------------------------- version, config


@app.command()
def version(as_json: JsonOpt = False) -> None:
    """Print the foxhunt version."""
    import numpy
    import torch

    doc = {"foxhunt": __version__, "torch": torch.__version__, "numpy": numpy.__version__,
           "cuda": torch.cuda.is_available()}
    if as_json:
        _emit_json(doc)
    else:
        out.print(f"foxhunt {__version__} (torch {torch.__version__}, "
                  f"CUDA {'available' if doc['cuda'] else 'not available'})")


@config_app.command("show")
def config_show(
    ctx: typer.Context,
    profile: Annotated[Optional[str], typer.Option(help="GPU profile name or TOML path.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the resolved configuration, its sources, and the chosen GPU profile (and why)."""
    from foxhunt.profiles import choose_profile

    resolved = _settings(ctx)
    choice = choose_profile(profile)
    doc = {
        "home": str(resolved.home),
        "sources": resolved.sources,
        "store": str(resolved.store_path),
        "settings": resolved.settings.model_dump(mode="json"),
        "gpu_profile": {"name": choice.profile.name, "reason": choice.reason,
                        **choice.profile.model_dump(mode="json", exclude={"name"})},
    }
    if as_json:
        _emit_json(doc)
        return
    out.print(f"[bold]FOXHUNT_HOME[/] {doc['home']}")
    out.print(f"[bold]sources[/] {' < '.join(doc['sources'])}")
    out.print(f"[bold]store[/] {doc['store']}")
    out.print(f"[bold]GPU profile[/] {choice.profile.name} ({choice.reason})")
    rows = [[f"{section}.{k}", v] for section, body in doc["settings"].items() for k, v in body.items()]
    rows += [[f"profile.{k}", v] for k, v in doc["gpu_profile"].items() if k not in ("name", "reason")]
    out.print(_table("settings", ["key", "value"], rows))


# `foxhunt tune` registers itself on import; imported here, after `app` and the helpers it uses.
from foxhunt.cli import tune as _tune  # noqa: F401
