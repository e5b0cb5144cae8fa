"""`foxhunt backtest` says which Sharpe it shows: daily returns over enough sessions, per-bar
otherwise, and the JSON keeps the per-bar figure beside the headline."""

from __future__ import annotations

import pytest

from foxhunt.metrics import MIN_DAILY_SESSIONS

from .test_cli import run, run_json

SESSIONS = 25
BARS_PER_SESSION = 390  # the synthetic generator's default session, one-minute bars


@pytest.fixture
def synth_market(capsys):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars",
             str(SESSIONS * BARS_PER_SESSION), "--seed", "3")


def test_json_holds_the_daily_headline_and_the_per_bar_figure(capsys, synth_market):
    doc = run_json(capsys, "backtest", "SYN", "--strategy", "sma:10,30", "--strategy",
                   "buy-and-hold", "--device", "cpu")
    for row in doc["results"]:
        assert row["sharpe_basis"] == "daily" and row["sessions"] == SESSIONS
        for key in ("sharpe", "sortino", "annual_volatility"):
            assert isinstance(row[key], float) and isinstance(row[f"{key}_per_bar"], float)
        assert row["sharpe"] != row["sharpe_per_bar"]
        assert row["periods_per_year"] == 1440 * 252  # SYN trades around the clock (UTC)


def test_the_table_names_its_sharpe_basis(capsys, synth_market):
    code, out, err = run(capsys, "backtest", "SYN", "--strategy", "sma:10,30", "--device", "cpu")
    assert code == 0, err
    assert "Sharpe (daily)" in out and "sessions" in out
    assert f"Sharpe: daily (session) returns, annualised x sqrt(252) ({SESSIONS} sessions)" in out


def test_a_short_window_shows_the_per_bar_sharpe_and_says_why(capsys, synth_market):
    # the synthetic sessions start on 2024-01-02: three of them
    code, out, err = run(capsys, "backtest", "SYN", "--strategy", "sma:10,30", "--device", "cpu",
                         "--to", "2024-01-04T23:59:00Z")
    assert code == 0, err
    assert "Sharpe (per-bar)" in out
    assert ("Sharpe: per-bar returns, annualised x sqrt(N), N = 362,880 bars a year "
            f"(3 sessions, fewer than {MIN_DAILY_SESSIONS})") in " ".join(out.split())
