"""The `foxhunt` command line: Typer + Rich, `--json` on every command that prints results.

Only this module imports the command modules: each adds its commands through `register(app)`;
what they share is in `cli/common.py`, which imports no command. User mistakes end as one line
on stderr and a non-zero exit, never a traceback. Heavy imports (torch, duckdb) happen inside
commands so `--help` stays quick.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from typer import Abort

from foxhunt.cli import about, data, evaluate, features, jobs, serve, trading, train, tune, venue
from foxhunt.cli.common import Invocation, plain_help
from foxhunt.errors import FoxhuntError

try:  # typer >= 0.20 carries its own click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on the installed click
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError

app = typer.Typer(name="foxhunt", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False,
                  help="Train, validate and run deep-RL trading agents on futures data.")


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML file overriding the defaults (default: "
                                   "FOXHUNT_HOME/config.toml, when there is one).")
    ] = None,
) -> None:
    ctx.obj = Invocation(config)


# `foxhunt --help` lists the commands in the order they register, then the groups.
for command_module in (about, data, features, tune, evaluate, trading, venue, train, jobs,
                       serve):
    command_module.register(app)
# Help as plain text wrapped to the terminal: help strings are not Rich markup ("[risk]" stays).
plain_help(app)


def main(argv: list[str] | None = None) -> None:
    """Every mistake ends as one line on stderr: foxhunt's own errors (exit 1) and the command
    line's (an unknown option, a value of the wrong type: exit 2)."""
    try:
        code = app(args=argv, prog_name="foxhunt", standalone_mode=False)
    except FoxhuntError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(exc.exit_code)
    except NoArgsIsHelpError as exc:  # the help was printed
        sys.exit(exc.exit_code)
    except UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "foxhunt"
        message = " ".join(exc.format_message().split())
        sys.stderr.write(f"error: {where}: {message} (see {where} --help)\n")
        sys.exit(exc.exit_code)
    except ClickException as exc:
        sys.stderr.write(f"error: {' '.join(exc.format_message().split())}\n")
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, Abort):
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)


__all__ = ["app", "main"]
