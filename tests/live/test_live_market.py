"""The live market's per-bar series, built one bar at a time after any stored history, are
bit for bit what the batch functions give over the same bars (stops, reward scale and session
flattens then match the backtest's), off-grid prices included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data.grid import tradable
from foxhunt.env import EnvConfig
from foxhunt.env.market import average_true_range, dollar_volatility, session_ends
from foxhunt.live.feed import BarBuilder, FeedError, LiveBar
from foxhunt.live.market import LiveMarket

from ..backtest.builders import instrument, synth


@settings(max_examples=15, deadline=None)
@given(split=st.integers(0, 600), seed=st.integers(0, 5), off_grid=st.booleans())
def test_bar_by_bar_equals_the_batch(split, seed, off_grid):
    bars, inst = synth(600, seed=seed).bars, instrument()
    if off_grid:
        for k in ("open", "high", "low", "close"):
            getattr(bars, k)[::7] += inst.tick_size * 0.3
    env = EnvConfig(atr_window=14, reward_vol_window=50)
    market = LiveMarket(bars.slice(0, split), inst, env, capacity=16)
    for t in range(split, len(bars)):
        market.append(LiveBar(inst.symbol, int(bars.ts[t]), *(float(getattr(bars, k)[t]) for k in
                                                             ("open", "high", "low", "close"))))
    n = len(bars)
    grid = tradable(bars, inst.tick_size)
    floor = env.reward_scale_floor_ticks * inst.tick_value
    np.testing.assert_array_equal(market.t_close[:n], grid.close)
    np.testing.assert_array_equal(market.atr[:n], average_true_range(grid, 14, inst.tick_size))
    np.testing.assert_array_equal(market.scale[:n], dollar_volatility(grid.close, 50,
                                                                     inst.point_value, floor))
    ends = session_ends(bars.ts, inst.session)
    np.testing.assert_array_equal(market.session_end[:n], ends)


def test_a_bar_out_of_time_order_is_refused():
    bars, inst = synth(50).bars, instrument()
    market = LiveMarket(bars, inst, EnvConfig())
    try:
        market.append(LiveBar(inst.symbol, int(bars.ts[-1]), 1.0, 1.0, 1.0, 1.0))
    except FeedError as exc:
        assert "not after the last bar" in str(exc)
    else:
        raise AssertionError("a bar at the last bar's time was taken")


def test_the_bar_builder_closes_bars_on_their_boundary_and_refuses_late_prints():
    m = 60_000_000_000
    b = BarBuilder("ES", bar_ns=m)
    assert b.on_trade(1, 10.0, 1) == [] and b.on_trade(m, 12.0, 2) == []  # (0, 1 min]
    (bar,) = b.on_trade(m + 1, 11.0, 3)
    assert (bar.ts_ns, bar.open, bar.high, bar.low, bar.close, bar.volume) == (m, 10, 12, 10, 12, 3)
    assert b.on_trade(m, 9.0) == [] and b.late == 1  # its bar was handed out
    assert b.on_time(2 * m - 1) == []
    (bar,) = b.on_time(2 * m)
    assert (bar.ts_ns, bar.close) == (2 * m, 11.0)
