"""Hand-computed fills, costs and PnL on scripted ES bars (tick 0.25, $50/pt, $2.25/side, 1 tick).

One tick of slippage on ES is $12.50, so a one-contract fill costs $14.75. Prices are exact
binary fractions, so dollar amounts are asserted exactly (float64).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.data.instruments import Session
from foxhunt.env.actions import contracts_for
from foxhunt.env.config import EnvConfig

from .env_builders import MINUTE, SIZES_AND_STOPS, T0, scripted_env

ROWS = [
    (100.0, 101.0, 99.0, 100.0),
    (100.5, 101.5, 99.5, 101.0),
    (101.0, 102.0, 100.5, 101.5),
    (101.25, 101.75, 100.0, 100.5),
]
# Every bar of STOP_ROWS[:3] has a true range of 2 points, so ATR = 2 there.
STOP_ROWS = [
    (100.0, 101.0, 99.0, 100.0),
    (100.0, 101.0, 99.0, 100.5),
    (100.5, 101.5, 99.5, 101.0),
    (101.0, 101.5, 98.5, 99.0),
]
FLAT, LONG1, LONG1_TIGHT, LONG1_WIDE, SHORT3 = (0, 0, 0), (1, 0, 0), (1, 0, 1), (1, 0, 2), (2, 2, 0)
SHORT1_TIGHT = (2, 0, 1)


def step(env, action):
    return env.step(torch.tensor([action]))


def one(x) -> float:
    return float(x[0])


def test_long_entry_fills_at_next_open_plus_one_tick_and_pays_commission():
    env = scripted_env(ROWS)
    r = step(env, LONG1)
    assert one(r.order_qty) == 1 and one(r.order_price) == 100.75
    assert one(r.components["cost"]) == 2.25 + 12.50
    assert one(r.components["pnl"]) == (101.0 - 100.5) * 50
    assert one(r.equity) == 25.0 - 14.75
    # reward scale at bar 0 is its floor, one tick value ($12.50): no price change seen yet
    assert one(r.reward) == pytest.approx(10.25 / 12.5, rel=1e-6)


def test_holding_marks_to_market_close_to_close_and_places_no_order():
    env = scripted_env(ROWS)
    step(env, LONG1)
    r = step(env, LONG1)
    assert one(r.order_qty) == 0 and one(r.components["cost"]) == 0.0
    assert one(r.components["pnl"]) == (101.5 - 101.0) * 50
    assert one(r.equity) == 10.25 + 25.0
    # scale at bar 1: RMS of one close change of 1 point = $50
    assert one(r.reward) == pytest.approx(25.0 / 50.0, rel=1e-6)


def test_reversal_trades_both_legs_and_realises_the_closed_long():
    env = scripted_env(ROWS)
    step(env, LONG1)
    r = step(env, SHORT3)
    assert one(r.order_qty) == -4 and one(r.order_price) == 101.0 - 0.25
    assert one(r.components["cost"]) == 4 * 14.75
    # 1 long from close 101 to open 101, then 3 short from open 101 to close 101.5
    assert one(r.components["pnl"]) == -3 * 0.5 * 50
    assert one(r.equity) == 10.25 - 75.0 - 59.0
    assert one(r.position) == -3 and one(r.trades_closed) == 1
    r = step(env, FLAT)
    assert one(r.order_qty) == 3 and one(r.order_price) == 101.25 + 0.25
    assert one(r.components["pnl"]) == -3 * (101.25 - 101.5) * 50
    assert one(r.components["cost"]) == 3 * 14.75
    assert one(r.equity) == -123.75 + 37.5 - 44.25


def test_trailing_stop_trails_closes_and_fills_at_the_stop_minus_a_tick():
    env = scripted_env(STOP_ROWS)
    assert env.market.atr[:3].tolist() == [2.0, 2.0, 2.0]
    r = step(env, LONG1_TIGHT)  # stop armed at close 100 - 1 ATR = 98; bar 1 low 99
    assert one(r.order_price) == 100.25 and one(r.stop_qty) == 0
    assert r.next_pos_state[0, 4] == 0.5  # tight
    assert r.next_pos_state[0, 5] == (100.5 - 98.5) / 2.0  # trailed to close 100.5 - 2
    r = step(env, LONG1_TIGHT)  # same target: no order, stop trails to 101 - 2 = 99
    assert one(r.order_qty) == 0 and one(r.components["cost"]) == 0.0
    r = step(env, LONG1_TIGHT)  # bar 3 opens 101, trades down to 98.5 through the 99 stop
    assert one(r.stop_qty) == -1 and one(r.stop_price) == 99.0 - 0.25
    assert one(r.components["pnl"]) == (99.0 - 101.0) * 50
    assert one(r.components["cost"]) == 14.75
    assert one(r.components["stop"]) == (98.75 - 100.25) * 50
    assert one(r.position) == 0 and one(r.trades_closed) == 1
    assert one(r.equity) == 25.0 + 25.0 - 100.0 - 2 * 14.75


def test_gap_through_the_stop_fills_at_the_open_minus_a_tick():
    rows = [*STOP_ROWS[:3], (98.0, 98.5, 97.0, 98.0)]
    env = scripted_env(rows)
    for _ in range(2):
        step(env, LONG1_TIGHT)
    r = step(env, LONG1_TIGHT)  # stop at 99, bar opens at 98
    assert one(r.stop_price) == 98.0 - 0.25
    assert one(r.components["pnl"]) == (98.0 - 101.0) * 50
    assert one(r.components["stop"]) == (97.75 - 100.25) * 50
    assert one(r.equity) == 50.0 - 150.0 - 2 * 14.75


def test_short_stop_triggers_on_the_high_in_the_entry_bar():
    rows = [STOP_ROWS[0], (100.0, 102.25, 99.0, 100.5), STOP_ROWS[2]]
    env = scripted_env(rows)
    r = step(env, SHORT1_TIGHT)  # sell at 100 - 0.25; stop at close 100 + 1 ATR = 102
    assert one(r.order_price) == 99.75
    assert one(r.stop_qty) == 1 and one(r.stop_price) == 102.0 + 0.25
    assert one(r.components["pnl"]) == -(102.0 - 100.0) * 50
    assert one(r.components["cost"]) == 2 * 14.75
    assert one(r.components["stop"]) == -(102.25 - 99.75) * 50
    assert one(r.equity) == -100.0 - 29.5


def test_changing_the_stop_mode_rearms_it_from_the_decision_close():
    env = scripted_env(STOP_ROWS)
    step(env, LONG1_TIGHT)
    r = step(env, LONG1_WIDE)  # re-armed at close 100.5 - 3 * 2 = 94.5, trailed to 101 - 6 = 95
    assert one(r.order_qty) == 0
    assert r.next_pos_state[0, 4] == 1.0
    assert r.next_pos_state[0, 5] == (101.0 - 95.0) / 2.0


def test_flatten_at_session_end_is_a_market_on_close_and_the_next_session_reenters():
    session = Session(tz="UTC", open="16:05", close="16:00")
    ts = T0 + np.array([118, 119, 120, 126, 127]) * MINUTE  # T0 is 14:00 UTC; bar 2 closes 16:00
    rows = [*ROWS[:3], (102.0, 103.0, 101.5, 102.5), (102.5, 103.0, 102.0, 102.75)]
    env = scripted_env(rows, ts=ts, session=session, flatten_at_session_end=True)
    assert env.market.session_end.tolist() == [False, False, True, False, False]
    step(env, LONG1)
    r = step(env, LONG1)
    assert one(r.flatten_qty) == -1 and one(r.flatten_price) == 101.5 - 0.25
    assert one(r.components["pnl"]) == (101.5 - 101.0) * 50
    assert one(r.components["cost"]) == 14.75
    assert one(r.position) == 0 and one(r.equity) == 2 * (25.0 - 14.75)
    r = step(env, LONG1)
    assert one(r.order_qty) == 1 and one(r.order_price) == 102.25


def test_without_flatten_the_position_is_held_through_the_session_end():
    session = Session(tz="UTC", open="16:05", close="16:00")
    ts = T0 + np.array([118, 119, 120, 126]) * MINUTE
    env = scripted_env(ROWS, ts=ts, session=session)
    step(env, LONG1)
    r = step(env, LONG1)
    assert one(r.flatten_qty) == 0 and one(r.position) == 1


def test_shaping_terms_hand_computed():
    env = scripted_env(ROWS, hold_cost=0.1, drawdown_penalty=0.5, trade_close_bonus=0.2)
    r = step(env, FLAT)
    assert one(r.components["hold_cost"]) == pytest.approx(0.1 * 12.5, abs=1e-12)
    assert one(r.reward) == pytest.approx(-0.1, rel=1e-6)
    r = step(env, LONG1)  # buy at 101.25, mark at 101.5: equity 25 - 14.75 = 10.25 (a new peak)
    assert one(r.components["drawdown_penalty"]) == 0.0
    r = step(env, FLAT)  # sell at 101.25 - 0.25; equity 10.25 - 12.5 - 14.75 = -17
    c = {k: one(v) for k, v in r.components.items()}
    scale = 50.0 * np.sqrt((1.0**2 + 0.5**2) / 2)  # RMS of close changes up to bar 2
    assert c["pnl"] == -12.5 and c["cost"] == 14.75
    assert c["drawdown_penalty"] == 0.5 * 27.25
    assert c["close_bonus"] == 0.2 * (101.0 - 101.25) * 50
    assert c["hold_cost"] == pytest.approx(0.1 * scale, abs=1e-9)
    expected = (-12.5 - 14.75 - 13.625 - 0.1 * scale - 2.5) / scale
    assert one(r.reward) == pytest.approx(expected, rel=1e-6)


def test_size_choices_round_fractions_of_max_contracts_and_never_exceed_it():
    assert contracts_for(EnvConfig(max_contracts=3)) == [3, 3, 3]  # shipped: full size only
    assert contracts_for(EnvConfig(max_contracts=3, **SIZES_AND_STOPS)) == [1, 2, 3]
    assert contracts_for(EnvConfig(max_contracts=3, size_fractions=(0.333, 0.667, 1.0))) == [
        1,
        2,
        3,
    ]
    assert contracts_for(EnvConfig(max_contracts=1)) == [1, 1, 1]
    assert contracts_for(EnvConfig(max_contracts=5, **SIZES_AND_STOPS)) == [2, 3, 5]
    env = scripted_env(ROWS, max_contracts=2)
    r = step(env, (1, 2, 0))
    assert one(r.position) == 2
    r = step(env, (2, 2, 0))
    assert one(r.position) == -2 and one(r.order_qty) == -4


def test_ruin_terminates_and_auto_reset_keeps_the_true_next_state():
    env = scripted_env(ROWS, ruin_loss=100.0)
    r = step(env, SHORT3)  # -3 * 0.5 * 50 - 3 * 14.75 = -119.25
    assert one(r.equity) == -119.25
    assert bool(r.terminated[0]) and not bool(r.truncated[0])
    assert int(r.next_bar[0]) == 1 and float(r.next_pos_state[0, 0]) == -1.0
    bar, pos_state = env.state()
    assert int(bar[0]) == 0 and pos_state.abs().sum() == 0
    assert torch.equal(r.obs, env.observe(bar, pos_state))


def test_episode_length_truncates_and_bootstrap_state_is_kept():
    env = scripted_env(ROWS, episode_len=2)
    r = step(env, LONG1)
    assert not bool(r.truncated[0] | r.terminated[0])
    r = step(env, LONG1)
    assert bool(r.truncated[0]) and not bool(r.terminated[0])
    assert int(r.next_bar[0]) == 2 and float(r.next_pos_state[0, 0]) == pytest.approx(1 / 3)
    assert float(r.next_pos_state[0, 2]) == 1.0  # held 2 bars of a 2-bar episode


def test_the_end_of_the_start_range_truncates_a_given_start():
    env = scripted_env(ROWS, episode_len=3)
    env.reset(torch.tensor([1]))
    assert not bool(step(env, LONG1).truncated[0])
    r = step(env, LONG1)  # decided at bar 2; bar 3 is the last bar of the range
    assert bool(r.truncated[0]) and int(r.next_bar[0]) == 3
