"""Baseline strategies: their rules, their money, and their command-line forms."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.backtest import (
    ActionReplay,
    BuyAndHold,
    Flat,
    SmaCross,
    parse_strategy,
    run_backtest,
)
from foxhunt.backtest.peer import backtesting_available, sma_cross_trades, vectorbt_available
from foxhunt.backtest.strategies import RandomActions
from foxhunt.env import EnvConfig
from foxhunt.errors import ConfigError

from .builders import instrument, synth


def test_flat_earns_and_pays_nothing():
    m = synth(2000)
    (r,) = run_backtest(m.bars, instrument(), policies={"flat": Flat()},
                        env_config=EnvConfig(flatten_at_session_end=True), device="cpu")
    assert not r.pnl.any() and not r.position.any() and len(r.trades) == 0
    assert (r.equity == r.capital).all()


def test_buy_and_hold_earns_the_move_from_the_first_fill_minus_costs():
    m, inst = synth(2000), instrument(sessions=False)
    bars, (start, stop) = m.bars, (300, 1700)
    (r,) = run_backtest(bars, inst, policies={"bh": BuyAndHold()}, windows=[(start, stop)],
                        env_config=EnvConfig(), device="cpu")
    contracts, slip = 3, inst.tick_value
    by_hand = ((bars.close[stop - 1] - bars.open[start + 1]) * inst.point_value * contracts
               - 2 * contracts * (inst.commission + slip))
    assert r.total_pnl == pytest.approx(by_hand, abs=0.005)
    assert len(r.trades) == 1
    t = r.trades.records()[0]
    assert (t["side"], t["contracts"], t["entry_bar"], t["exit_bar"], t["exit_reason"]) == (
        "long", 3.0, start + 1, stop - 1, "end")
    assert t["entry_price"] == bars.open[start + 1] + inst.tick_size
    assert t["exit_price"] == bars.close[stop - 1] - inst.tick_size


def test_a_signal_of_ones_own_is_a_table_of_decisions():
    """A user's signal, long 3 contracts at every close from the window's start (direction 1,
    size index 2, no stop), is buy-and-hold to the cent; a table of the wrong length is one
    clear error."""
    m, inst = synth(2000), instrument(sessions=False)
    signal = np.tile(np.array([1, 2, 0], dtype=np.uint8), (len(m.bars.close), 1))
    own, held = run_backtest(m.bars, inst, policies={"own": ActionReplay(signal),
                                                     "bh": BuyAndHold()},
                             windows=[(300, 1700)], env_config=EnvConfig(), device="cpu")
    assert own.total_pnl == pytest.approx(held.total_pnl, abs=0.005)
    np.testing.assert_array_equal(own.position, held.position)
    with pytest.raises(ConfigError, match=r"own: recorded actions have shape \(5, 3\)"):
        run_backtest(m.bars, inst, policies={"x": ActionReplay(signal[:5], label="own")},
                     env_config=EnvConfig(), device="cpu")


def test_no_costs_means_no_commission_and_no_slippage():
    m, inst = synth(2000), instrument(sessions=False)
    bars = m.bars
    (r,) = run_backtest(bars, inst, policies={"bh": BuyAndHold()}, windows=[(0, 2000)],
                        env_config=EnvConfig(), costs=False, device="cpu")
    assert r.total_pnl == pytest.approx((bars.close[-1] - bars.open[1]) * inst.point_value * 3,
                                        abs=1e-6)
    assert not r.components["cost"].any()


def test_random_is_reproducible_by_seed():
    m, inst = synth(1500), instrument()
    window = [(100, 400)]
    runs = [run_backtest(m.bars, inst, policies={"r": RandomActions(seed)}, windows=window,
                         device="cpu")[0] for seed in (7, 7, 8)]
    np.testing.assert_array_equal(runs[0].pnl, runs[1].pnl)
    np.testing.assert_array_equal(runs[0].actions, runs[1].actions)
    assert not np.array_equal(runs[0].actions, runs[2].actions)
    assert (runs[0].actions[:-1, 2] > 0).any(), "random actions include trailing stops"


def test_sma_decides_from_closes_up_to_the_decision_bar_only():
    close = synth(600).bars.close
    sma = SmaCross(5, 20)
    full = sma.sides(close)
    for t in (20, 57, 300, 599):
        assert sma.sides(close[: t + 1])[t] == full[t]
    assert not full[:20].any() and full[20:].all()


def test_sma_long_flat_never_shorts_and_ties_keep_the_side():
    close = np.array([10.0] * 6 + [11.0, 12.0, 12.0, 12.0, 12.0, 12.0, 9.0, 9.0, 9.0, 9.0])
    sides = SmaCross(2, 4).sides(close)
    assert sides[6:12].tolist() == [1, 1, 1, 1, 1, 1]
    assert sides[12:].min() == -1 and SmaCross(2, 4, long_flat=True).sides(close).min() == 0


@pytest.mark.skipif(not backtesting_available(),
                    reason="backtesting.py (the peers extra) is not installed")
@pytest.mark.parametrize("long_flat", [False, True])
def test_sma_trades_equal_backtesting_py(long_flat):
    """Same bars, same rules, no costs: the same entries, exits, sides, sizes and prices for
    every trade a signal closed (the position open at the end is closed by each engine's own
    convention)."""
    m = synth(6000, seed=5)
    peer, _ = sma_cross_trades(m.bars, 10, 30, contracts=3, long_flat=long_flat)
    (r,) = run_backtest(m.bars, instrument(sessions=False),
                        policies={"sma": SmaCross(10, 30, long_flat=long_flat)}, costs=False,
                        device="cpu")
    closed = r.trades["exit_reason"] == "signal"
    assert (r.trades["exit_reason"][~closed] == "end").all()
    t = {k: v[closed] for k, v in r.trades.columns.items()}
    assert len(t["side"]) == len(peer["side"]) > 50
    np.testing.assert_array_equal(np.where(t["side"] == "long", 1, -1), peer["side"])
    for col in ("contracts", "entry_bar", "exit_bar", "entry_price", "exit_price"):
        np.testing.assert_array_equal(t[col], peer[col], err_msg=col)


@pytest.mark.slow  # importing vectorbt compiles its Numba kernels: about half a minute
@pytest.mark.skipif(not vectorbt_available(), reason="vectorbt (the bench extra) is not installed")
@pytest.mark.parametrize("long_flat", [False, True])
def test_sma_trades_equal_vectorbt(long_flat):
    """The benchmark's fastest peer on the same bars and rules, no costs: the same trades
    (count, sides, sizes, entry and exit bars and prices) and the same money, with every
    vectorbt engine installed."""
    from foxhunt.backtest.peer import (
        compare_trades,
        signal_trades,
        vectorbt_engines,
        vectorbt_sma_cross,
    )

    m = synth(6000, seed=5)
    (r,) = run_backtest(m.bars, instrument(sessions=False),
                        policies={"sma": SmaCross(10, 30, long_flat=long_flat)}, costs=False,
                        device="cpu")
    ours = signal_trades(r.trades)
    assert len(ours["side"]) > 50
    for engine in vectorbt_engines():
        peer = vectorbt_sma_cross(m.bars, 10, 30, contracts=3, long_flat=long_flat,
                                  engine=engine)
        assert compare_trades(ours, peer.trades) == {
            "equal": True, "foxhunt_trades": len(ours["side"]),
            "peer_trades": len(ours["side"])}, engine
        # and the same money: vectorbt marks the open position at the last close, foxhunt
        # flattens it there (no costs); vectorbt counts price points, foxhunt dollars
        gain = (peer.outputs["final_value"] - 1e12) * instrument().point_value
        assert gain == pytest.approx(r.total_pnl, abs=0.5), engine


def test_compare_trades_says_where_two_trade_lists_part():
    ours = {"side": np.array([1, -1, 1]), "contracts": np.array([3.0, 3.0, 3.0]),
            "entry_bar": np.array([31, 40, 52]), "exit_bar": np.array([40, 52, 60]),
            "entry_price": np.array([100.0, 101.0, 99.5]),
            "exit_price": np.array([101.0, 99.5, 100.25])}
    from foxhunt.backtest.peer import compare_trades

    assert compare_trades(ours, ours)["equal"]
    peer = {k: v.copy() for k, v in ours.items()}
    peer["exit_bar"][1] = 53
    peer["entry_bar"][2] = 53
    out = compare_trades(ours, peer)
    assert not out["equal"] and (out["foxhunt_trades"], out["peer_trades"]) == (3, 3)
    assert out["rows_differing"] == {"entry_bar": 1, "exit_bar": 1}
    assert out["first_difference"]["row"] == 1
    assert out["first_difference"]["foxhunt"]["exit_bar"] == 52
    assert out["first_difference"]["peer"]["exit_bar"] == 53
    shorter = {k: v[:2] for k, v in ours.items()}
    out = compare_trades(ours, shorter)
    assert not out["equal"] and out["peer_trades"] == 2
    assert out["first_difference"] == {"row": 2, "foxhunt": {
        "side": 1, "contracts": 3.0, "entry_bar": 52, "exit_bar": 60, "entry_price": 99.5,
        "exit_price": 100.25}, "peer": None}


@pytest.mark.parametrize("text, expected", [
    ("flat", Flat()), ("buy-and-hold", BuyAndHold()), ("sma:10,30", SmaCross(10, 30)),
    ("SMA:5, 50,long-flat", SmaCross(5, 50, long_flat=True)), ("random:42", RandomActions(42)),
])
def test_strategy_strings(text, expected):
    assert parse_strategy(text) == expected


@pytest.mark.parametrize("text", ["", "hold", "sma:30,10", "sma:10", "sma:0,5", "random:",
                                  "random:x", "sma:10,30,short"])
def test_bad_strategy_strings_give_one_line_listing_the_valid_forms(text):
    with pytest.raises(ConfigError) as err:
        parse_strategy(text)
    message = str(err.value)
    assert "\n" not in message
    assert "sma:FAST,SLOW" in message or "FAST < SLOW" in message
