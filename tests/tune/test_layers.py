"""`foxhunt.tune` sits above training and backtest and below the CLI: it imports no CLI, no
trading core, and nothing below it imports it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "foxhunt"
ALLOWED = {"foxhunt.tune", "foxhunt.training", "foxhunt.backtest", "foxhunt.data",
           "foxhunt.features", "foxhunt.env", "foxhunt.agents", "foxhunt.replay", "foxhunt.metrics",
           "foxhunt.profiles", "foxhunt.devices", "foxhunt.errors", "foxhunt.configbase",
           "foxhunt.fileio"}
BELOW = ("data", "features", "env", "agents", "replay", "training", "backtest", "orders",
         "portfolio", "risk", "execution")


def imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return [".".join(n.split(".")[:2]) for n in names if n.startswith("foxhunt")]


def test_tune_imports_downwards_only():
    for path in sorted((SRC / "tune").glob("*.py")):
        for name in imports(path):
            assert name in ALLOWED, f"tune/{path.name} imports {name}"


def test_nothing_below_imports_tune():
    for package in BELOW:
        for path in sorted((SRC / package).rglob("*.py")):
            assert "foxhunt.tune" not in imports(path), f"{package}/{path.name} imports foxhunt.tune"
