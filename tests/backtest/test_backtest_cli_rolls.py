"""`foxhunt backtest` on a stored continuous series fills in the contract months and rolls
(issue 38): the same PnL as `RollingBacktest` called directly, the engine's on the stitched
series less exactly the rolls' extra fills (and, on an unadjusted series, less the gaps the
stitched prices would earn), for rules (`--strategy`), a checkpoint and a trained run
(`--run`, and the run's `foxhunt report`). What cannot be rolled is refused in one line."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from foxhunt import schemas
from foxhunt.backtest import (
    ActionReplay,
    BuyAndHold,
    checkpoint_policy,
    parse_strategy,
    run_backtest,
)
from foxhunt.backtest.rolling import RollingBacktest
from foxhunt.data.continuous import RollRule, build_continuous
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.store import MarketStore
from foxhunt.features import FeatureConfig
from foxhunt.report.run import BASELINES, read_run
from foxhunt.training.config import TrainingSpec

from ..cli.bad_input_cases import cli, cli_ok, continuous_es
from ..cli.test_cli_train_backtest import TINY as TRAIN_TINY
from ..data.contract_set import es_contract_set
from .builders import write_checkpoint

ES = InstrumentRegistry.load().get("ES")
SIDE = Decimal("14.75")  # a contract a side: $2.25 commission + one tick ($12.50) of slippage
RULES = ("buy-and-hold", "sma:10,30", "zfade:20,1.0")
BT = ("backtest", "ES", "--bars", "1d", "--device", "cpu")
# features short enough for the set's 254 daily bars
SHORT = FeatureConfig(returns_lags=[1, 2, 4], vol_windows=[4, 8], volume_windows=[4, 8],
                      trend_windows=[4, 8], cross_pairs=[(2, 4), (4, 8)])
# the CLI tests' tiny training run, its [walkforward] table (the last) deploying whatever it
# trained and short features
TINY = TRAIN_TINY + """deploy_min_psr = 0.0
[features]
returns_lags = [1, 2, 4]
vol_windows = [4, 8]
volume_windows = [4, 8]
trend_windows = [4, 8]
cross_pairs = [[2, 4], [4, 8]]
"""


def cents(x: float) -> Decimal:
    return Decimal(repr(float(x))).quantize(Decimal("0.01"))


def extra_fills(result) -> Decimal:
    """What the rolls cost beyond the engine's fills: out |held| + in |target| contracts a side
    where the engine trades |target - held| (tests/backtest/test_rolls.py)."""
    return sum((SIDE * Decimal(int(abs(r.qty_out) + abs(r.qty_in) - abs(r.qty_in + r.qty_out)))
                for r in result.rolls), Decimal(0))


def built(adjust: str = "difference"):
    return build_continuous(es_contract_set(), RollRule(roll="volume", adjust=adjust), ES)


def continuous_home(tmp_path_factory) -> Path:
    """A FOXHUNT_HOME with ES's synthetic months (ESU24: 2024-05-01 .. 2024-09-20) and ES 1d
    stitched from them by volume, back-adjusted."""
    root = tmp_path_factory.mktemp("continuous_es")
    (root / "in").mkdir()
    continuous_es(root / "home", root / "in")
    return root / "home"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return continuous_home(tmp_path_factory)


def test_rules_on_a_continuous_series_are_the_rolling_backtest_to_the_cent(home, tmp_path):
    trades = tmp_path / "trades.json"
    doc = cli_ok(home, *BT, *(x for r in RULES for x in ("--strategy", r)),
                 "--trades", str(trades))
    schemas.validate(doc)
    series = built()
    assert doc["rolling"]["roll"] == "volume" and doc["rolling"]["adjust"] == "difference"
    assert doc["rolling"]["contracts"] == ["ESH24", "ESM24", "ESU24", "ESZ24"]
    assert doc["rolling"]["rolls"] == cli_ok(home, "data", "rolls", "ES")["rolls"]
    assert len(doc["rolling"]["rolls"]) == 3
    engine = run_backtest(series.bars, ES, policies={r: parse_strategy(r) for r in RULES},
                          device="cpu")
    for row, stitched in zip(doc["results"], engine, strict=True):
        direct = RollingBacktest(series, ES).run(parse_strategy(row["policy"]))
        assert cents(row["total_pnl"]) == cents(direct.total_pnl), row["policy"]
        assert row["rolls"] == len(direct.rolls)
        assert cents(row["roll_costs"]) == cents(sum(r.cost for r in direct.rolls))
        assert cents(stitched.total_pnl) - cents(row["total_pnl"]) == extra_fills(direct)
        assert row["trades"] == len(RollingBacktest(series, ES).refill([stitched])[0].trades)
    bh = doc["results"][0]
    # the worked example of docs/futures.md: four legs, three rolls of 3 contracts
    assert cents(bh["total_pnl"]) == Decimal("8983.50") and bh["rolls"] == 3
    assert cents(bh["roll_costs"]) == 3 * 6 * SIDE == Decimal("265.50")
    assert cents(bh["costs_paid"]) == Decimal("354.00")
    rows = [r for r in json.loads(trades.read_text()) if r["policy"] == "buy-and-hold"]
    assert [(r["entry_price"], r["exit_price"], r["contracts"]) for r in rows] == [
        (5000.50, 5012.00, 3), (5025.00, 5041.75, 3), (5053.50, 5069.00, 3),
        (5082.75, 5099.25, 3)]  # each month's own prices, a tick of slippage each side


def test_the_table_says_it_rolled(home):
    code, out, err = cli(home, *BT, "--strategy", "buy-and-hold", "--to", "2024-06-30")
    assert code == 0, err
    text = " ".join(out.split())
    assert ("filled in ES's contract months (ESH24, ESM24, ESU24, ESZ24), rolled by its roll "
            "table (volume roll, difference adjustment, 3 rolls: foxhunt data rolls ES --bars "
            "1d)") in text
    # the window to 2024-06-30 holds two rolls of the table: paper's worked example's figure
    assert "buy-and-hold (0..129): 2 rolls of a held position, their legs' costs 177.00 USD" in text
    doc = cli_ok(home, *BT, "--strategy", "buy-and-hold", "--to", "2024-06-30")
    direct = RollingBacktest(built(), ES).run(BuyAndHold(), window=(0, 129))
    assert cents(doc["results"][0]["total_pnl"]) == cents(direct.total_pnl) == Decimal("4684.50")


def test_without_costs_it_is_the_engine_on_the_back_adjusted_series(home):
    doc = cli_ok(home, *BT, "--strategy", "sma:10,30", "--no-costs")
    stitched = run_backtest(built().bars, ES, policies={"s": parse_strategy("sma:10,30")},
                            costs=False, device="cpu")[0]
    [row] = doc["results"]
    assert row["rolls"] == 3 and row["roll_costs"] == 0.0
    assert cents(row["total_pnl"]) == cents(stitched.total_pnl)


def test_an_unadjusted_series_earns_no_gap(tmp_path):
    """Stitched without adjustment the engine would earn the three gaps (37 points x 3 x $50)
    and skip the rolls' round trips; across the rolls the backtest is the same as on the
    back-adjusted series: the months' own prices."""
    (tmp_path / "in").mkdir()
    home = tmp_path / "home"
    continuous_es(home, tmp_path / "in")
    cli_ok(home, "data", "continuous", "ES", "--roll", "volume", "--adjust", "none")
    doc = cli_ok(home, *BT, "--strategy", "buy-and-hold")
    assert doc["rolling"]["adjust"] == "none"
    naive = run_backtest(built("none").bars, ES, policies={"bh": BuyAndHold()}, device="cpu")[0]
    [row] = doc["results"]
    assert cents(row["total_pnl"]) == Decimal("8983.50")
    assert cents(naive.total_pnl) - cents(row["total_pnl"]) == Decimal("5550.00") + Decimal("265.50")


def test_a_checkpoint_on_a_continuous_series_is_its_decisions_rolled(home, tmp_path):
    series = built()
    path = write_checkpoint(tmp_path / "agent.pt", series.bars, ES, fit_until=150, window=4,
                            features=SHORT, seed=3)
    doc = cli_ok(home, *BT, "--checkpoint", str(path))
    assert [r["policy"] for r in doc["results"]] == ["agent", *BASELINES]
    agent = checkpoint_policy(path, series.bars, ES, "cpu")
    first = doc["results"][0]["window"][0]
    engine = run_backtest(series.bars, ES, policies={"agent": agent}, windows=[(first, 254)],
                          env_config=agent.env_config, device="cpu")[0]
    table = np.zeros((len(series.bars), 3), dtype=np.uint8)
    table[first:] = engine.actions
    direct = RollingBacktest(series, ES, agent.env_config).run(ActionReplay(table),
                                                               window=(first, 254))
    row = doc["results"][0]
    assert direct.rolls and row["trades"] > 2, "the case must hold a position across a roll"
    assert cents(row["total_pnl"]) == cents(direct.total_pnl)
    assert cents(engine.total_pnl) - cents(row["total_pnl"]) == extra_fills(direct) > 0


def test_a_trained_run_on_a_continuous_series_rolls_every_fold(home, tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    trained = cli_ok(home, "--config", str(config), "train", "ES", "--bars", "1d", "--seed", "1",
                     "--out", str(tmp_path / "run"))
    doc = cli_ok(home, *BT, "--run", str(tmp_path / "run"))
    series = built()
    env = TrainingSpec.model_validate(read_run(tmp_path / "run")["spec.json"]).env
    rolled_across = 0
    for fold in trained["folds"]:
        window = tuple(fold["windows"]["test"])
        rows = {r["policy"]: r for r in doc["results"] if tuple(r["window"]) == window}
        assert list(rows) == ["agent", *BASELINES]
        for name in BASELINES:
            direct = RollingBacktest(series, ES, env).run(parse_strategy(name), window=window)
            assert cents(rows[name]["total_pnl"]) == cents(direct.total_pnl), (window, name)
        # the trainer's test figure is the engine's on the stitched series: the rolled agent
        # is it less the rolls' extra fills, each a round trip of the contracts held
        agent = rows["agent"]
        assert fold["deployed"] == "agent"
        assert (cents(fold["test"]["pnl"]) - cents(agent["total_pnl"])
                == cents(agent["roll_costs"]) or agent["rolls"] == 0)
        rolled_across += agent["rolls"]
    assert rolled_across > 0, "the case must hold the agent's position across a roll"
    # the run's report backtests its folds the same way
    report = cli_ok(home, "report", str(tmp_path / "run"), "--out", str(tmp_path / "r.html"),
                    "--device", "cpu")
    assert [(r["policy"], r["window"], r["total_pnl"], r["rolls"]) for r in report["results"]] == [
        (r["policy"], r["window"], r["total_pnl"], r["rolls"]) for r in doc["results"]]
    assert (tmp_path / "r.html").stat().st_size > 0


def refused(home, *argv: str) -> str:
    code, out, err = cli(home, *argv)
    assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (
        code, out, err)
    return err.strip()


def test_what_cannot_be_rolled_is_refused_in_one_line(home, tmp_path):
    config = tmp_path / "flatten.toml"
    config.write_text("[env]\nflatten_at_session_end = true\n")
    assert refused(home, "--config", str(config), *BT, "--strategy", "buy-and-hold") == (
        "error: ES 1d is a continuous series, backtested across its rolls: rolling backtest: "
        "flatten_at_session_end is not supported across rolls yet; set [env] "
        "flatten_at_session_end = false")


def test_a_series_whose_months_changed_is_refused_in_one_line(tmp_path):
    (tmp_path / "in").mkdir()
    home = tmp_path / "home"
    continuous_es(home, tmp_path / "in")
    with MarketStore(home / "store.duckdb") as store:
        store.delete_series("ESZ24", "1d")
    assert refused(home, *BT, "--strategy", "buy-and-hold") == (
        "error: ES: the contract months stored now are not the ones its continuous series was "
        "built from; rebuild it (foxhunt data continuous ES --roll volume --adjust difference)")


def test_a_contract_month_and_a_plain_symbol_backtest_as_before(home):
    """A month's own series is no continuous one: it is refused as any symbol outside the
    instruments file is (`foxhunt live` and `foxhunt venue` take months); a plain symbol's
    document has no `rolling`."""
    assert "ESU24" in refused(home, "backtest", "ESU24", "--bars", "1d", "--strategy", "flat")
    cli_ok(home, "data", "synth", "--symbol", "SYN", "--bars", "600", "--seed", "2")
    doc = cli_ok(home, "backtest", "SYN", "--strategy", "buy-and-hold", "--device", "cpu")
    assert "rolling" not in doc and "rolls" not in doc["results"][0]
