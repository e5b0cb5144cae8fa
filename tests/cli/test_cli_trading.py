"""`foxhunt paper`, `orders`, `positions` and `risk status|halt|resume|kill` on one account's
log: JSON that agrees with the backtest and with itself, operator actions in the log, one-line
errors for bad input."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from .test_cli import run, run_json

SYN = ("SYN", "--bars", "1min")


OPEN_LIMITS = """[risk]
max_order_qty = 1000
max_position = 1000
max_gross_notional = 0
max_order_rate = 1000
max_orders_per_day = 1000000
price_collar_pct = 1000
daily_loss_limit = 0
max_drawdown = 0
"""


@pytest.fixture
def synth_market(capsys):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "1500", "--seed", "3")


@pytest.fixture
def open_limits(tmp_path):
    path = tmp_path / "risk.toml"
    path.write_text(OPEN_LIMITS)
    return str(path)


def test_paper_equals_the_backtest_and_the_log_answers_orders_and_positions(
        capsys, synth_market, open_limits, tmp_path):
    doc = run_json(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--account", "a1",
                   "--risk", open_limits)
    trades = tmp_path / "trades.json"
    bt = run_json(capsys, "backtest", *SYN, "--strategy", "sma:10,30", "--device", "cpu",
                  "--trades", str(trades))
    assert doc["trades"] == bt["results"][0]["trades"] > 0
    backtest_pnl = sum(t["pnl"] for t in json.loads(trades.read_text()))
    assert abs(Decimal(doc["pnl"]) - Decimal(repr(backtest_pnl))) < Decimal("0.005")
    orders = run_json(capsys, "orders", "--account", "a1", "--last", "0")["orders"]
    assert len(orders) == doc["orders"] and all(o["status"] == "FILLED" for o in orders)
    assert doc["denied"] == 0
    pos = run_json(capsys, "positions", "--account", "a1")
    assert pos["positions"][0]["position"] == 0
    assert Decimal(pos["equity"]) == Decimal(doc["equity"])


def test_risk_halt_resume_and_kill_are_logged(capsys, synth_market):
    run_json(capsys, "paper", *SYN, "--strategy", "buy-and-hold", "--account", "a2",
             "--to", "2024-01-02T15:30:00Z")
    assert run_json(capsys, "risk", "status", "--account", "a2")["trading_state"] == "ACTIVE"
    halted = run_json(capsys, "risk", "halt", "--account", "a2", "--reason", "lunch")
    assert halted["trading_state"] == "HALTED" and halted["reason"] == "lunch"
    code, _, err = run(capsys, "risk", "halt", "--account", "a2")
    assert code == 1 and err.strip() == "error: account 'a2' is already HALTED"
    assert run_json(capsys, "risk", "resume", "--account", "a2")["trading_state"] == "ACTIVE"
    killed = run_json(capsys, "risk", "kill", "--account", "a2")
    assert killed["kill_switch"] and killed["trading_state"] == "HALTED"


@pytest.mark.parametrize(("argv", "message"), [
    (("paper", *SYN), "give exactly one of --run DIR, --checkpoint FILE or --strategy S"),
    (("paper", *SYN, "--strategy", "sma:10,30", "--speed", "fast"), "--speed 'fast'"),
    (("paper", *SYN, "--strategy", "sma:3,1"), "need 1 <= FAST < SLOW"),
    (("orders", "--account", "nobody"), "account 'nobody' has no event log"),
    (("orders", "--account", "../x"), "--account '../x'"),
    (("positions", "--account", "nobody"), "account 'nobody' has no event log"),
    (("risk", "status", "--account", "nobody"), "account 'nobody' has no event log"),
])
def test_bad_input_is_one_line(capsys, synth_market, argv, message):
    code, out, err = run(capsys, *argv)
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_default_limits_pass_a_reversal_whose_opening_part_fits_and_a_breach_ends_flat(
        capsys, synth_market):
    """3 long to 3 short is a 6-lot order; only its opening 3 meet max_order_qty 5. The default
    breakers halt and flatten: the run ends flat, and nothing after the halt adds risk."""
    doc = run_json(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--account", "a4")
    orders = run_json(capsys, "orders", "--account", "a4", "--last", "0")["orders"]
    assert any(o["quantity"] == 6 and o["status"] == "FILLED" for o in orders)
    assert not any(o["reason"].startswith("max order quantity") for o in orders)
    assert doc["position"] == 0
    status = run_json(capsys, "risk", "status", "--account", "a4")
    assert (status["trading_state"], status["cause"], status["kill_switch"]) == (
        "HALTED", "BREAKER", True)
    assert status["reason"].startswith("daily loss limit 5,000.00 USD")
    assert all(o["reason"].startswith("trading state HALTED") for o in orders
               if o["status"] == "DENIED")


def test_a_second_run_on_a_used_account_needs_resume(capsys, synth_market):
    run_json(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--account", "a3")
    code, _, err = run(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--account", "a3")
    assert code == 1 and "pass --resume" in err
    code, _, err = run(capsys, "paper", *SYN, "--strategy", "sma:5,30", "--account", "a3",
                       "--resume")
    assert code == 1 and "policy differ" in err
    again = run_json(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--account", "a3",
                     "--resume")
    assert again["resumed_from"] is not None
