"""The `foxhunt` command line: Typer + Rich, `--json` on every command that prints results.

User mistakes end as one line on stderr and a non-zero exit, never a traceback. Heavy imports
(torch, duckdb) happen inside commands so `--help` stays quick.
"""

from __future__ import annotations

import sys

from typer import Abort

from foxhunt.cli import data, evaluate, features, trading, train  # noqa: F401  (registers their commands)
from foxhunt.cli.app import app
from foxhunt.errors import FoxhuntError

try:  # typer >= 0.20 carries its own click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on the installed click
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError


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
