"""Backtests across rolls (issue 38): decisions on the continuous series, fills and PnL in the
traded contracts, every roll paying a round trip through the one fill model."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.backtest import ActionReplay, BuyAndHold, run_backtest
from foxhunt.backtest.rolling import RollingBacktest
from foxhunt.data.continuous import RollRule, build_continuous
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.env.config import EnvConfig
from foxhunt.errors import ConfigError

from ..data.contract_set import es_contract_set
from ..data.test_continuous import random_set

ES = InstrumentRegistry.load().get("ES")
TICK, PV, FEE = Decimal("0.25"), Decimal(50), Decimal("2.25")
SIDE = FEE + TICK * PV  # one contract, one side: commission + one tick of slippage = $14.75


def _cents(x: float) -> Decimal:
    return Decimal(repr(x)).quantize(Decimal("0.01"))


def _by_date(series, symbol: str, day: str) -> int:
    s = next(c for c in series if c.symbol == symbol)
    days = [datetime.fromtimestamp(t / 1e9, tz=ZoneInfo("America/Chicago")).date().isoformat()
            for t in s.bars.ts]
    return days.index(day)


def test_buy_and_hold_across_three_rolls_equals_the_sum_of_its_legs_to_the_cent():
    """The issue's check: 3 contracts long from the first decision to the end of the
    synthetic set, rolled by volume (ESH24 -> ESM24 -> ESU24 -> ESZ24), costs included. The
    legs are priced here from the contracts' own bars in Decimal, independently of the
    backtest: each entry at its open plus a tick, each exit at its open (or the last close)
    less a tick, $2.25 a contract a side."""
    series = es_contract_set()
    built = build_continuous(series, RollRule(roll="volume", adjust="difference"), ES)
    result = RollingBacktest(built, ES).run(BuyAndHold())

    def px(symbol, day, col):
        s = next(c for c in series if c.symbol == symbol)
        return Decimal(repr(float(getattr(s.bars, col)[_by_date(series, symbol, day)])))

    legs = [  # (contract, entry: day and column, exit: day and column)
        ("ESH24", ("2024-01-03", "open"), ("2024-03-11", "open")),
        ("ESM24", ("2024-03-11", "open"), ("2024-06-14", "open")),
        ("ESU24", ("2024-06-14", "open"), ("2024-09-12", "open")),
        ("ESZ24", ("2024-09-12", "open"), ("2024-12-20", "close")),
    ]
    expected = []
    for symbol, entry, exit_ in legs:
        buy, sell = px(symbol, *entry) + TICK, px(symbol, *exit_) - TICK
        expected.append((sell - buy) * 3 * PV - 2 * 3 * FEE)
    assert [leg.contract for leg in result.legs] == ["ESH24", "ESM24", "ESU24", "ESZ24"]
    assert [_cents(x) for x in result.leg_pnls()] == expected
    assert _cents(result.total_pnl) == sum(expected)
    # the hand figures: in at 5000.25, out at 5012.25; in 5024.75, out 5042.00; in 5053.25,
    # out 5069.25; in 5082.50, out 5099.50 (the last close): moves of 12.00, 17.25, 16.00 and
    # 17.00 points, 62.25 in all = $9,337.50 on 3 contracts; each leg pays 2 ticks of slippage
    # and 2 commissions a contract ($88.50), $354.00 over the 4 legs
    assert expected == [Decimal("1711.50"), Decimal("2499.00"), Decimal("2311.50"),
                        Decimal("2461.50")]
    assert _cents(result.total_pnl) == Decimal("8983.50") == Decimal("9337.50") - 354
    assert _cents(result.costs) == 8 * 3 * SIDE == Decimal("354.00")
    assert [(r.from_symbol, r.to_symbol, r.qty_out, r.qty_in, _cents(r.cost))
            for r in result.rolls] == [(f, t, -3.0, 3.0, 6 * SIDE) for f, t in
                                       (("ESH24", "ESM24"), ("ESM24", "ESU24"),
                                        ("ESU24", "ESZ24"))]


def test_each_roll_costs_a_round_trip_and_earns_no_fictitious_gap():
    """Against the engine on the stitched series: on the back-adjusted one it books the same
    moves and pays one round trip less a roll (3 rolls x 3 contracts x 2 sides x $14.75 =
    $265.50); on the unadjusted one it would also earn the legs' gaps, 37 points x 3 x $50 =
    $5,550, which no position ever made."""
    series = es_contract_set()
    diff = build_continuous(series, RollRule(adjust="difference"), ES)
    none = build_continuous(series, RollRule(adjust="none"), ES)
    rolling = RollingBacktest(diff, ES).run(BuyAndHold()).total_pnl
    engine = run_backtest(diff.bars, ES, policies={"bh": BuyAndHold()}, device="cpu")[0]
    naive = run_backtest(none.bars, ES, policies={"bh": BuyAndHold()}, device="cpu")[0]
    assert _cents(engine.total_pnl) - _cents(rolling) == 3 * 3 * 2 * SIDE == Decimal("265.50")
    assert _cents(naive.total_pnl) - _cents(engine.total_pnl) == Decimal("5550.00")
    assert RollingBacktest(none, ES).run(BuyAndHold()).total_pnl == rolling  # fills ignore it


SLOW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(seed=st.integers(0, 2**32 - 1), actions=st.integers(0, 2**32 - 1),
       roll=st.sampled_from(["calendar", "volume", "open_interest"]))
def test_any_policy_is_the_sum_of_its_legs_and_the_engine_plus_the_rolls_costs(seed, actions,
                                                                                roll):
    """Random long/flat/short decisions on random contract sets: the PnL is the sum of the
    legs to the cent; without costs it is the engine's on the back-adjusted series; with costs
    it is less by exactly the rolls' extra fills (out |held| + in |target| instead of the
    engine's |target - held|)."""
    built = build_continuous(random_set(seed), RollRule(roll=roll, adjust="difference"), ES)
    rng = np.random.default_rng(actions)
    table = np.zeros((len(built.bars), 3), dtype=np.uint8)
    table[:, 0] = np.repeat(rng.integers(0, 3, len(built.bars) // 5 + 1), 5)[: len(built.bars)]
    policy = ActionReplay(table)
    for costs in (False, True):
        result = RollingBacktest(built, ES, costs=costs).run(policy)
        engine = run_backtest(built.bars, ES, policies={"p": policy}, costs=costs,
                              device="cpu")[0]
        assert _cents(result.total_pnl) == sum(_cents(x) for x in result.leg_pnls())
        assert all(sum(f.qty for f in leg.fills) == 0 for leg in result.legs)
        extra = sum(SIDE * Decimal(int(abs(r.qty_out) + abs(r.qty_in) - abs(r.qty_in + r.qty_out)))
                    for r in result.rolls) if costs else Decimal(0)
        assert _cents(engine.total_pnl) - _cents(result.total_pnl) == extra
        held = [built.contracts[i].symbol for i in built.contract]
        for leg in result.legs:  # every fill in the contract traded at its bar
            for f in leg.fills:
                bar = int(np.searchsorted(built.bars.ts, f.ts))
                assert leg.contract == (held[bar - 1] if f.kind == "roll out" else held[bar])


def test_what_is_not_rolled_yet_is_refused_in_one_line():
    built = build_continuous(es_contract_set(), RollRule(), ES)
    with pytest.raises(ConfigError, match="flatten_at_session_end is not supported across rolls"):
        RollingBacktest(built, ES, EnvConfig(flatten_at_session_end=True))
    stops = np.zeros((len(built.bars), 3), dtype=np.uint8)
    stops[10] = (1, 0, 1)
    cfg = EnvConfig(stop_atr_multiples=[1.0, 3.0])
    with pytest.raises(ConfigError, match="trailing stops are not supported across rolls yet .* "
                                          "bar 10"):
        RollingBacktest(built, ES, cfg).run(ActionReplay(stops))
    with pytest.raises(ConfigError, match=r"window \[5, 5\)"):
        RollingBacktest(built, ES).run(BuyAndHold(), window=(5, 5))
