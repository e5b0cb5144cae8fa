"""A rule's rows computed bar by bar (`live.rules`, what `LiveRuleDecider` reads) are its batch
table's rows, bit for bit, for every built-in rule on random series: ties of the moving
averages, flat windows of the z-score, the fade's hysteresis band and long runs included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.backtest.strategies import (
    ActionReplay,
    BuyAndHold,
    Flat,
    RandomActions,
    SmaCross,
    TablePolicy,
    ZScoreFade,
)
from foxhunt.data.series import Bars
from foxhunt.live.rules import rule_rows
from foxhunt.live.trader import LiveRuleDecider

RULES: list[TablePolicy] = [
    Flat(), BuyAndHold(), BuyAndHold(size=1), SmaCross(1, 2), SmaCross(3, 7),
    SmaCross(5, 20, long_flat=True), ZScoreFade(2, 0.5), ZScoreFade(5, 1.0, 0.3),
    ZScoreFade(20, 1.5), ZScoreFade(3, 0.8, 0.79), RandomActions(7), RandomActions(0),
]  # fmt: skip


def _series(steps: list[int], base: float, tick: float, noise: list[float] | None) -> np.ndarray:
    close = base + tick * np.cumsum(np.asarray(steps, np.float64))
    if noise is not None:  # off the grid too
        close = close + np.resize(np.asarray(noise, np.float64), len(close))
    return close


series = st.builds(
    _series,
    steps=st.lists(st.sampled_from([-3, -1, 0, 0, 0, 1, 2]), min_size=1, max_size=300),
    base=st.sampled_from([0.0, 0.5, 100.0, 4500.25, 1e6]),
    tick=st.sampled_from([0.25, 0.01, 1e-5, 3.0]),
    noise=st.none() | st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=9),
)


@settings(max_examples=60, deadline=None)
@given(close=series)
def test_every_rule_bar_by_bar_equals_its_batch_table(close):
    for rule in RULES:
        rows = rule_rows(rule)
        got = np.asarray([rows.push(c) for c in close], np.uint8).reshape(-1, 3)
        np.testing.assert_array_equal(got, rule.table(close), err_msg=rule.label)
        for t in {0, len(close) // 2, len(close) - 1}:  # the table over the closes so far
            assert rows.row(t) == tuple(rule.table(close[: t + 1])[t]), (rule.label, t)


@settings(max_examples=10, deadline=None)
@given(close=series, split=st.integers(0, 300))
def test_the_live_decider_reads_the_rows_of_the_growing_bars(close, split):
    """`observe` catches up on every bar not seen yet (the history at once, then bar by bar)."""
    rule = ZScoreFade(5, 1.0, 0.3)
    n, split = len(close), min(split, len(close) - 1)
    bars = Bars(np.arange(n, dtype=np.int64), close, close, close, close, np.ones(n))
    decider = LiveRuleDecider(rule)
    decider.observe(split, bars)
    got = [decider.act(t, None) for t in range(split + 1)]
    for t in range(split + 1, n):
        decider.observe(t, bars)
        got.append(decider.act(t, None))
    np.testing.assert_array_equal(np.asarray(got, np.uint8), rule.table(close))


def test_a_long_random_table_is_drawn_ahead_as_one_draw():
    """Past its first draw (1,024 rows) the random rule draws again, longer, from the seed."""
    close = np.linspace(1.0, 2.0, 5000)
    rows = rule_rows(RandomActions(3))
    got = np.asarray([rows.push(c) for c in close], np.uint8)
    np.testing.assert_array_equal(got, RandomActions(3).table(close))


def test_a_rule_it_does_not_know_falls_back_to_the_batch_table():
    actions = np.random.default_rng(1).integers(0, 3, (40, 3)).astype(np.uint8)

    class Prefix(TablePolicy):
        label = "prefix"

        def table(self, close):
            return ActionReplay(actions[: len(close)]).table(close)

    rows = rule_rows(Prefix())
    got = np.asarray([rows.push(c) for c in np.arange(40.0)], np.uint8)
    np.testing.assert_array_equal(got, actions)
