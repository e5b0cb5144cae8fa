"""The trading core's layers import downwards only: orders < portfolio < risk < execution,
over data/, env/, errors.py, configbase.py, fileio.py, events.py and telemetry.py (a leaf:
OpenTelemetry, imported only where it is on); never training, backtest,
report or the CLI. paper/ sits above execution: it also reads features, agents, checkpoints
(training) and the backtest's strategies, never report or the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "foxhunt"
BASE = {"foxhunt.data", "foxhunt.env", "foxhunt.errors", "foxhunt.configbase", "foxhunt.fileio",
        "foxhunt.events", "foxhunt.telemetry"}
ALLOWED = {
    "orders": BASE | {"foxhunt.orders"},
    "portfolio": BASE | {"foxhunt.orders", "foxhunt.portfolio"},
    "risk": BASE | {"foxhunt.orders", "foxhunt.portfolio", "foxhunt.risk"},
    "execution": BASE | {"foxhunt.orders", "foxhunt.portfolio", "foxhunt.risk", "foxhunt.execution"},
}
ALLOWED["paper"] = ALLOWED["execution"] | {
    "foxhunt.paper", "foxhunt.features", "foxhunt.agents", "foxhunt.training", "foxhunt.backtest",
}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_go_downwards_only(package):
    for path in sorted((SRC / package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.startswith("foxhunt"):
                    top = ".".join(name.split(".")[:2])
                    assert top in ALLOWED[package], f"{path.name} imports {name}"
