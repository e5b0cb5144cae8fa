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


def test_a_checkpoint_backtest_defaults_to_device_auto(capsys, synth_market, tmp_path):
    from foxhunt.config import load_settings
    from foxhunt.data.instruments import InstrumentRegistry
    from foxhunt.data.store import MarketStore

    from ..backtest.builders import write_checkpoint

    settings = load_settings()
    with MarketStore(settings.store_path, read_only=True) as store:
        bars = store.read_bars("SYN", "1min")
    inst = InstrumentRegistry.load(settings.instruments_file).get("SYN")
    path = write_checkpoint(tmp_path / "fold0.pt", bars, inst)
    late = str(int(bars.ts[-200]))
    doc = run_json(capsys, "backtest", "SYN", "--checkpoint", str(path), "--from", late)
    assert [r["policy"] for r in doc["results"]] == ["agent", "buy-and-hold", "sma:10,30", "flat"]


def test_a_device_torch_cannot_use_is_one_line(capsys, synth_market):
    code, out, err = run(capsys, "backtest", "SYN", "--strategy", "flat", "--device", "tpu")
    assert code == 1 and out == "" and err.count("\n") == 1 and "device 'tpu'" in err


def test_a_window_too_short_names_the_backtest(capsys, synth_market):
    first = run_json(capsys, "data", "list")["series"][0]["first_ts"]
    code, out, err = run(capsys, "backtest", "SYN", "--strategy", "flat",
                         "--to", str(first + 60_000_000_000))
    assert code == 1 and out == "" and err == "error: --from/--to select 2 bars; a backtest needs at least 3\n"


def test_window_names_the_command_that_asked():
    from foxhunt.cli.evaluate import _window
    from foxhunt.errors import FoxhuntError

    frame = type("Frame", (), {"ts": (1, 2, 3, 4), "__len__": lambda self: 4})()
    assert _window(frame, None, None, "a paper run") == (0, 4)
    with pytest.raises(FoxhuntError, match="^--from/--to select 1 bars; a paper run needs at "
                                           "least 3$"):
        _window(frame, "3", "3", "a paper run")


def test_the_trades_csv_reads_as_times_and_prices_on_the_tick_grid(capsys, synth_market, tmp_path):
    import csv
    from datetime import datetime

    from foxhunt.data.instruments import InstrumentRegistry

    path = tmp_path / "trades.csv"
    code, _, err = run(capsys, "backtest", "SYN", "--strategy", "sma:10,30", "--device", "cpu",
                       "--trades", str(path))
    assert code == 0, err
    rows = list(csv.DictReader(path.open()))
    assert rows
    tick = InstrumentRegistry.load().get("SYN").tick_size
    for row in rows:
        for key in ("entry_time", "exit_time"):
            assert datetime.fromisoformat(row[key]).utcoffset().total_seconds() == 0
        for key in ("entry_price", "exit_price"):
            price = float(row[key])
            assert abs(price / tick - round(price / tick)) < 1e-6, row[key]
            assert len(row[key].split(".")[-1]) <= 6  # no float noise like 1.0523000000000002


def test_a_strategy_reports_title_names_what_it_backtests(capsys, synth_market, tmp_path):
    page = tmp_path / "r.html"
    code, _, err = run(capsys, "backtest", "SYN", "--strategy", "sma:10,30", "--device", "cpu",
                       "--report", str(page))
    assert code == 0, err
    html = page.read_text()
    assert "SYN 1min backtest: sma:10,30" in html and "agent against baselines" not in html
