"""`foxhunt version` and `foxhunt config show`: what is installed and how it is configured."""

from __future__ import annotations

import typer

from foxhunt import __version__
from foxhunt.cli.common import JsonOpt, ProfileOpt, emit_json, out, rich_table, settings_of

config_app = typer.Typer(help="Show the resolved configuration.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command()(version)
    app.add_typer(config_app, name="config")


def version(as_json: JsonOpt = False) -> None:
    """Print the foxhunt version."""
    import numpy
    import torch

    doc = {"foxhunt": __version__, "torch": torch.__version__, "numpy": numpy.__version__,
           "cuda": torch.cuda.is_available()}
    if as_json:
        emit_json("version", doc)
    else:
        out.print(f"foxhunt {__version__} (torch {torch.__version__}, "
                  f"CUDA {'available' if doc['cuda'] else 'not available'})")


@config_app.command("show")
def config_show(
    ctx: typer.Context,
    profile: ProfileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the resolved configuration, its sources, and the chosen GPU profile (and why)."""
    from foxhunt.profiles import choose_profile

    resolved = settings_of(ctx)
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
        emit_json("config", doc)
        return
    out.print(f"[bold]FOXHUNT_HOME[/] {doc['home']}")
    out.print(f"[bold]sources[/] {' < '.join(doc['sources'])}")
    out.print(f"[bold]store[/] {doc['store']}")
    out.print(f"[bold]GPU profile[/] {choice.profile.name} ({choice.reason})")
    rows = [[f"{section}.{k}", v] for section, body in doc["settings"].items() for k, v in body.items()]
    rows += [[f"profile.{k}", v] for k, v in doc["gpu_profile"].items() if k not in ("name", "reason")]
    out.print(rich_table("settings", ["key", "value"], rows))
