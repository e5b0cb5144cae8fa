"""The `foxhunt` command line: Typer + Rich, `--json` on every command that prints results.

User mistakes end as one line on stderr and a non-zero exit, never a traceback. Heavy imports
(torch, duckdb) happen inside commands so `--help` stays quick.
"""

from __future__ import annotations

import sys

from foxhunt.cli import data, evaluate, features, trading, train  # noqa: F401  (registers their commands)
from foxhunt.cli.app import app
from foxhunt.errors import FoxhuntError


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="foxhunt")
    except FoxhuntError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)


__all__ = ["app", "main"]
