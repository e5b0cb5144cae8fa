"""How the command line is put together: the order `foxhunt --help` lists, a light import, and
the settings read once per invocation."""

from __future__ import annotations

import subprocess
import sys

import typer

import foxhunt.config
from foxhunt.cli import app

from .test_cli import run_json


def test_help_lists_the_commands_then_the_groups_in_registration_order():
    assert typer.main.get_group(app).list_commands(None) == [
        "version", "tune", "backtest", "report", "paper", "live", "orders", "positions", "venue", "train", "demo",
        "submit", "worker", "serve", "config", "data", "features", "risk", "jobs", "user", "key"]


def test_the_command_line_imports_nothing_heavy_until_a_command_runs():
    heavy = ("torch", "numpy", "duckdb", "pyarrow", "pydantic", "sqlalchemy")
    loaded = subprocess.run(
        [sys.executable, "-c", f"import sys, foxhunt.cli; print([m for m in {heavy!r} if m in sys.modules])"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_one_invocation_reads_the_settings_once(capsys, monkeypatch):
    reads = []
    load_settings = foxhunt.config.load_settings
    monkeypatch.setattr(foxhunt.config, "load_settings",
                        lambda *args: reads.append(args) or load_settings(*args))
    run_json(capsys, "data", "synth", "--bars", "2000")
    run_json(capsys, "data", "list")
    run_json(capsys, "features", "show", "SYN")
    assert len(reads) == 3
