"""The README's tour names every command (issue 34, point 5): a command a user cannot find in
the README might as well not exist."""

from __future__ import annotations

from pathlib import Path

import typer.main

from foxhunt.cli import app

README = Path(__file__).resolve().parents[2] / "README.md"


def commands(group, prefix: str = "foxhunt") -> list[str]:
    out = []
    for name, command in getattr(group, "commands", {}).items():
        if getattr(command, "hidden", False):
            continue
        out.append(f"{prefix} {name}")
        out += commands(command, f"{prefix} {name}")
    return out


def test_the_readme_shows_every_command():
    text = README.read_text()
    tour = text[text.index("## Every command"):]
    names = commands(typer.main.get_command(app))
    assert len(names) > 20
    groups = {n for n in names if any(m.startswith(n + " ") for m in names)}
    missing = [n for n in names if n not in groups and n not in tour]
    assert not missing, f"the README's tour lacks {missing}"
