"""A replay of stored bars is a feed like any other: each bar once, in order, at its time
divided by the speed (or as fast as asked), then FeedEnded."""

from __future__ import annotations

import pytest

from foxhunt.live.feed import FeedEnded, FeedError
from foxhunt.live.replay import ReplayFeed

from ..backtest.builders import synth


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_bars_come_at_their_time_over_the_speed_then_the_replay_ends():
    bars = synth(5).bars
    clock = Clock()
    feed = ReplayFeed(bars, "SYN", speed=60.0, clock=clock, sleep=clock.sleep)
    with pytest.raises(FeedError, match="subscribe"):
        feed.next_bar(1.0)
    feed.subscribe("SYN")
    got = [feed.next_bar(5.0) for _ in range(5)]
    assert [b.ts_ns for b in got] == [int(t) for t in bars.ts]
    assert clock.now == pytest.approx(100.0 + (bars.ts[-1] - bars.ts[0]) / 1e9 / 60)
    with pytest.raises(FeedEnded):
        feed.next_bar(1.0)


def test_a_bar_not_due_within_the_timeout_is_not_handed_out_early():
    bars = synth(3).bars
    clock = Clock()
    feed = ReplayFeed(bars, "SYN", speed=1.0, clock=clock, sleep=clock.sleep)
    feed.subscribe("SYN")
    assert feed.next_bar(0.1) is not None  # the first at once
    assert feed.next_bar(0.5) is None  # the next is a minute away
    assert clock.now == pytest.approx(100.5)
    assert feed.next_bar(60.0).ts_ns == int(bars.ts[1])


def test_another_symbol_is_refused():
    with pytest.raises(FeedError, match="not ES"):
        ReplayFeed(synth(3).bars, "SYN").subscribe("ES")
