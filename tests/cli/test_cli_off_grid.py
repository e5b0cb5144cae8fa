"""Spot EUR/USD hourly bars traded as 6E (the user's report of issue 20): prices off 6E's
0.00005 grid are refused by default, kept on request; kept, they trade at the nearest tick in
backtest and paper alike (a backtest without costs fills at the next bar's open on the grid, with
zero costs on every trade) while the features see them as stored."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pytest

from .test_cli import run, run_json
from .test_cli_trading import OPEN_LIMITS

HOUR = 3_600_000_000_000
START = 1_491_264_000_000_000_000  # 2017-04-04 00:00 UTC


@pytest.fixture
def spot_csv(tmp_path):
    rng = np.random.default_rng(7)
    close = np.round(1.08 * np.exp(np.cumsum(rng.normal(0, 0.0015, 400))), 5)
    open_ = np.round(np.r_[1.08, close[:-1]] + rng.normal(0, 0.00007, 400), 5)
    high = np.maximum(open_, close) + np.round(rng.uniform(0, 0.001, 400), 5)
    low = np.minimum(open_, close) - np.round(rng.uniform(0, 0.001, 400), 5)
    rows = ["ts,open,high,low,close,volume"] + [
        f"{START + (i + 1) * HOUR},{open_[i]:.5f},{high[i]:.5f},{low[i]:.5f},{close[i]:.5f},100"
        for i in range(400)]
    path = tmp_path / "eurusd.csv"
    path.write_text("\n".join(rows) + "\n")
    return path, open_


def nearest_tick(price: float) -> float:
    return round(price / 0.00005) * 0.00005


def test_off_grid_spot_prices_are_refused_by_default_with_the_choices(capsys, spot_csv):
    code, out, err = run(capsys, "data", "import", str(spot_csv[0]), "--symbol", "6E")
    assert code != 0 and out == ""
    line = err.strip()
    assert "\n" not in line and "off the tick grid 5e-05" in line
    assert "--off-grid snap" in line and "--off-grid keep" in line
    assert run_json(capsys, "data", "list")["series"] == []


def test_kept_spot_prices_fill_at_the_next_open_on_the_grid_without_costs(capsys, tmp_path, spot_csv):
    path, opens = spot_csv
    doc = run_json(capsys, "data", "import", str(path), "--symbol", "6E", "--off-grid", "keep")
    assert doc["grid"].endswith("kept off the 5e-05 grid") and doc["bars"] == {"1h": 400}
    trades_file = tmp_path / "trades.json"
    result = run_json(capsys, "backtest", "6E", "--bars", "1h", "--strategy", "sma:10,30",
                      "--no-costs", "--trades", str(trades_file))
    trades = json.loads(trades_file.read_text())
    trades = trades if isinstance(trades, list) else trades["trades"]
    assert len(trades) >= 5
    total = 0.0
    for t in trades:
        assert t["costs"] == 0.0 and t["pnl"] == t["gross_pnl"]
        assert t["entry_price"] == nearest_tick(opens[t["entry_bar"]])  # the bar's open
        if t["exit_reason"] == "signal":
            assert t["exit_price"] == nearest_tick(opens[t["exit_bar"]])
        side = 1 if t["side"] in (1, "long") else -1
        total += side * t["contracts"] * (t["exit_price"] - t["entry_price"]) * 125_000.0
    [row] = result["results"]
    assert sum(t["pnl"] for t in trades) == pytest.approx(total, rel=1e-12, abs=1e-6)
    assert row["trades"] == len(trades)


def test_paper_trades_kept_spot_prices_where_the_backtest_fills_them_at_the_nearest_tick(capsys, tmp_path, spot_csv):
    run_json(capsys, "data", "import", str(spot_csv[0]), "--symbol", "6E", "--off-grid", "keep")
    risk = tmp_path / "risk.toml"
    risk.write_text(OPEN_LIMITS)
    doc = run_json(capsys, "paper", "6E", "--bars", "1h", "--strategy", "sma:10,30",
                   "--account", "fx", "--risk", str(risk))
    trades = tmp_path / "trades.json"
    bt = run_json(capsys, "backtest", "6E", "--bars", "1h", "--strategy", "sma:10,30",
                  "--device", "cpu", "--trades", str(trades))
    assert doc["trades"] == bt["results"][0]["trades"] > 0
    backtest_pnl = sum(t["pnl"] for t in json.loads(trades.read_text()))
    assert abs(Decimal(doc["pnl"]) - Decimal(repr(backtest_pnl))) < Decimal("0.005")
