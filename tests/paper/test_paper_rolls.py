"""Paper trading across rolls is the rolling backtest (backtest/rolling.py): buy-and-hold over
the synthetic ES contract set to the cent, and random long/flat/short decisions on random
contract sets, where a decision made at a roll's start pays its own fills besides the roll's
two legs (the paper roll moves the held position as it is, then the decision trades the new
month; the rolling backtest buys the target in the new month at once)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.backtest import ActionReplay, BuyAndHold
from foxhunt.backtest.rolling import RollingBacktest
from foxhunt.data.continuous import RollRule, build_continuous
from foxhunt.execution.rolls import RollStatus
from foxhunt.paper.rolling import RollPlan

from ..data.test_continuous import random_set
from .rolling_helpers import ES, ROLLS, cents, es_market, trader

TICK, PV, FEE = Decimal("0.25"), Decimal(50), Decimal("2.25")
SIDE = FEE + TICK * PV  # one contract, one side: commission + one tick of slippage


@pytest.fixture(scope="module")
def market():
    return es_market()


def test_buy_and_hold_on_paper_rolls_three_times_and_is_the_rolling_backtest(market):
    series, _ = market
    paper = trader(market)
    got = paper.run()
    bt = RollingBacktest(series, ES).run(BuyAndHold())
    assert cents(got.pnl) == cents(bt.total_pnl) == Decimal("8983.50")
    assert got.rolls == [f"roll R-{a}-{b}: +3 {a} -> {b} COMPLETED" for a, b in ROLLS]
    legs = [(f.symbol, f.kind, f.quantity, f.price) for f in got.fills if f.kind == "roll"]
    assert [(s, q) for s, _, q, _ in legs] == [(s, q) for a, b in ROLLS
                                               for s, q in ((a, -3), (b, 3))]
    # each leg at its contract's open at the roll bar, one tick of slippage against it
    assert [p for *_, p in legs[:2]] == [Decimal("5012.00"), Decimal("5025.00")]
    acct = paper.engine.account
    assert {s: acct.position(s) for s in ("ESH24", "ESM24", "ESU24", "ESZ24")} == dict.fromkeys(
        ("ESH24", "ESM24", "ESU24", "ESZ24"), 0)
    trades = paper.trades(got)
    assert len(trades) == 4 and cents(sum(trades["pnl"])) == cents(bt.total_pnl)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), actions=st.integers(0, 2**32 - 1),
       roll=st.sampled_from(["calendar", "volume", "open_interest"]))
def test_random_decisions_on_paper_are_the_rolling_backtest_plus_the_decisions_at_rolls(
        seed, actions, roll):
    months = random_set(seed)
    built = build_continuous(months, RollRule(roll=roll, adjust="difference"), ES)
    rng = np.random.default_rng(actions)
    n = len(built.bars)
    table = np.zeros((n, 3), dtype=np.uint8)
    table[:, 0] = np.repeat(rng.integers(0, 3, n // 5 + 1), 5)[:n]  # short, flat, long
    policy = ActionReplay(table)
    paper = trader((built, RollPlan.of(built, months)), policy=policy)
    got = paper.run()
    bt = RollingBacktest(built, ES).run(policy)
    # at each roll that moved a position, the paper pays |held| + |target - held| contracts
    # in the new month where the backtest pays |target|
    extra = sum(SIDE * Decimal(int(abs(r.qty_out) + abs(-r.qty_out - r.qty_in)
                                   - abs(r.qty_in))) for r in bt.rolls if r.qty_out)
    assert cents(bt.total_pnl) - cents(got.pnl) == extra
    assert all(r.status is RollStatus.COMPLETED for r in paper.engine.rolls)
    assert len(paper.engine.rolls) == sum(1 for r in bt.rolls if r.qty_out)
    acct = paper.engine.account
    assert all(acct.position(m.symbol) == 0 for m in months) and got.position == 0
