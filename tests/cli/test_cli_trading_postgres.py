"""The trading CLI on a PostgreSQL event log (`--log postgresql+psycopg://...`): a paper run,
its orders and positions, an operator's halt and a resume, all through the same URL."""

from __future__ import annotations

from ..pg import postgres  # noqa: F401  (fixture)
from .test_cli import run, run_json
from .test_cli_trading import SYN, open_limits, synth_market  # noqa: F401  (fixtures)


def test_paper_orders_positions_and_risk_on_a_postgresql_log(
        capsys, synth_market, open_limits, postgres):  # noqa: F811  (fixtures)
    url = postgres.create_database()
    log = ("--account", "pg", "--log", url)
    doc = run_json(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--risk", open_limits, *log)
    assert doc["log"] == url and doc["trades"] > 0 and doc["denied"] == 0
    memory = run_json(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--risk", open_limits,
                      "--account", "mem", "--log", "sqlite://")
    assert (doc["pnl"], doc["orders"]) == (memory["pnl"], memory["orders"])
    orders = run_json(capsys, "orders", *log, "--last", "0")["orders"]
    assert len(orders) == doc["orders"] and {o["status"] for o in orders} == {"FILLED"}
    assert run_json(capsys, "positions", *log)["equity"] == doc["equity"]
    assert run_json(capsys, "risk", "halt", *log, "--reason", "pg")["trading_state"] == "HALTED"
    assert run_json(capsys, "risk", "status", *log)["trading_state"] == "HALTED"
    code, _, err = run(capsys, "paper", *SYN, "--strategy", "sma:10,30", "--risk", open_limits,
                       *log)
    assert code == 1 and "already has an event log" in err and "pass --resume" in err
