"""docs/trading.md lists every risk limit with its key and default."""

from __future__ import annotations

from pathlib import Path

from foxhunt.risk import RiskConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "trading.md"


def test_every_config_key_is_documented_with_its_default():
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "risk-limits-table" in line)
    rows = {}
    for line in lines[start + 3:]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[2]
    cfg = RiskConfig()
    for key in RiskConfig.model_fields:
        assert key in rows, f"{key} is not in the risk limits table"
        default = getattr(cfg, key)
        shown = rows[key].split(" ")[0]
        if isinstance(default, bool):
            assert shown == str(default).lower()
        elif isinstance(default, dict):
            assert shown == "{}"
        else:
            assert shown == str(default), (key, shown, default)
