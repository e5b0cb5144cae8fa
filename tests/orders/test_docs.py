"""docs/trading.md states the order state machine; the table there is the table in the code."""

from __future__ import annotations

from pathlib import Path

from foxhunt.orders import TRANSITIONS

DOC = Path(__file__).resolve().parents[2] / "docs" / "trading.md"


def test_the_documented_state_table_is_the_codes():
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "order-state-table" in line)
    documented = {}
    for line in lines[start + 3:]:
        if not line.startswith("| "):
            break
        status, moves = (cell.strip() for cell in line.strip("|").split("|"))
        for move in moves.split(", "):
            trigger, to = move.split(" → ")
            documented[(status, trigger)] = to
    code = {(s.value, t.value): str(to) for (s, t), to in TRANSITIONS.items()}
    assert documented == code
