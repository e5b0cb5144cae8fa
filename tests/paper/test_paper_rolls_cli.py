"""`foxhunt paper` on a stored continuous series holds its position in the contract months and
rolls it; `foxhunt positions` (and the API's view, the same function) shows each position by
root and contract, the months held before a roll included."""

from __future__ import annotations

from decimal import Decimal

from foxhunt import schemas
from foxhunt.data.store import MarketStore

from ..cli.test_cli import run, run_json
from ..cli.test_cli_trading import OPEN_LIMITS
from ..data.contract_set import write_contract_csvs


def _store_rolled_es(capsys, tmp_path) -> None:
    paths = write_contract_csvs(tmp_path)
    run_json(capsys, "data", "import", *map(str, paths), "--symbol", "ES")
    run_json(capsys, "data", "continuous", "ES", "--roll", "volume", "--adjust", "difference")


def test_paper_on_a_continuous_series_rolls_and_positions_show_root_and_contract(
        capsys, tmp_path, isolated_home):
    _store_rolled_es(capsys, tmp_path)
    risk = tmp_path / "risk.toml"
    risk.write_text(OPEN_LIMITS)
    # to 2024-07-01: two rolls (ESH24 -> ESM24 -> ESU24), the window's last bar flattens ESU24
    doc = run_json(capsys, "paper", "ES", "--bars", "1d", "--strategy", "buy-and-hold",
                   "--account", "r", "--risk", str(risk), "--to", "2024-07-01")
    assert doc["rolls"] == ["roll R-ESH24-ESM24: +3 ESH24 -> ESM24 COMPLETED",
                            "roll R-ESM24-ESU24: +3 ESM24 -> ESU24 COMPLETED"]
    assert doc["position"] == 0 and doc["trades"] == 3  # one round trip per month held
    pos = run_json(capsys, "positions", "--account", "r")
    rows = [(r["root"], r["contract"], r["position"]) for r in pos["positions"]]
    assert rows == [("ES", "ESH24", 0), ("ES", "ESM24", 0), ("ES", "ESU24", 0)]
    realised = {r["contract"]: Decimal(r["realised"]) for r in pos["positions"]}
    assert realised["ESH24"] == (Decimal("5012.00") - Decimal("5000.50")) * 3 * 50
    assert pos["rolls"] == []  # none open or failed
    assert Decimal(pos["equity"]) == Decimal(doc["equity"])
    schemas.validate(doc)
    schemas.validate(pos)
    code, out, _ = run(capsys, "positions", "--account", "r")
    assert code == 0 and "contract" in out and "ESH24" in out
    # an operator's kill reconciles every month with the paper venue's journal first
    killed = run_json(capsys, "risk", "kill", "--account", "r")
    assert killed["flatten"] == "flatten orders none sent; ES is flat"
    assert killed["trading_state"] == "HALTED"
    orders = run_json(capsys, "orders", "--account", "r", "--last", "0")["orders"]
    legs = [(o["client_order_id"], o["symbol"], o["side"], o["filled"]) for o in orders
            if o["tag"] == "roll"]
    assert legs == [("R-ESH24-ESM24-out", "ESH24", "SELL", 3),
                    ("R-ESH24-ESM24-in", "ESM24", "BUY", 3),
                    ("R-ESM24-ESU24-out", "ESM24", "SELL", 3),
                    ("R-ESM24-ESU24-in", "ESU24", "BUY", 3)]


def test_paper_refuses_a_continuous_series_whose_months_changed(capsys, tmp_path, isolated_home):
    _store_rolled_es(capsys, tmp_path)
    with MarketStore(isolated_home / "store.duckdb") as store:
        store.delete_series("ESZ24", "1d")
    code, _, err = run(capsys, "paper", "ES", "--bars", "1d", "--strategy", "buy-and-hold",
                       "--account", "x")
    assert code != 0
    assert ("ES: the contract months stored now are not the ones its continuous series was "
            "built from; rebuild it (foxhunt data continuous ES --roll ") in " ".join(err.split())


def test_an_instrument_without_months_shows_itself_as_its_root(capsys, isolated_home):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "300", "--seed", "3")
    run_json(capsys, "paper", "SYN", "--bars", "1min", "--strategy", "buy-and-hold",
             "--account", "s")
    [row] = run_json(capsys, "positions", "--account", "s")["positions"]
    assert (row["symbol"], row["root"], row["contract"]) == ("SYN", "SYN", None)
