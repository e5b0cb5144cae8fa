"""The service layers sit on top: the server and the jobs runner are imported by nothing below
them (the CLI starts them), the jobs runner never imports the server, and foxhunt's database
module (db.py) and telemetry.py are leaves every layer may use."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "foxhunt"


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return {n for n in found if n.startswith("foxhunt")}


def modules(*skip: str):
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).parts
        if rel[0] not in skip:
            yield path


def test_nothing_below_the_cli_imports_the_server():
    for path in modules("cli", "server"):
        assert not any(n.startswith("foxhunt.server") for n in imports(path)), path


def test_the_jobs_runner_and_lower_layers_import_neither_the_server_nor_the_cli():
    for path in modules("cli", "server", "jobs", "__main__.py"):
        assert not any(n.startswith("foxhunt.jobs") for n in imports(path)), path
    for path in (SRC / "jobs").glob("*.py"):
        assert not any(n.startswith(("foxhunt.server", "foxhunt.cli")) for n in imports(path)), path


def test_the_database_and_telemetry_modules_are_leaves():
    assert imports(SRC / "db.py") <= {"foxhunt.errors"}
    assert imports(SRC / "telemetry.py") <= {"foxhunt.errors"}
