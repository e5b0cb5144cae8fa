"""IbBars: IB's 5-second real-time bars from the fake TWS built into 1-minute bars, stamped at
their close; a symbol without a contract, an unreachable TWS and a dropped connection are
FeedErrors, a closed feed FeedEnded."""

from __future__ import annotations

import pytest

from foxhunt.live.feed import FeedEnded, FeedError, LiveBar
from foxhunt.live.ib.feed import IbBars

from .conftest import FUTURES, SEC, until

T = 1_709_647_200  # 14:00:00 UTC, a minute boundary


class Clock:
    def __init__(self, now_s: float):
        self.now_s = now_s

    def __call__(self) -> int:
        return int(self.now_s * SEC)


@pytest.fixture
def feed(tws):
    clock = Clock(T)
    bars = IbBars("127.0.0.1", tws.port, 21, FUTURES, grace_s=2.0, connect_timeout_s=3,
                  clock=clock)
    bars.clock_ = clock
    yield bars
    bars.close()


def test_five_second_bars_make_minute_bars(tws, feed):
    feed.subscribe("ES")
    until(lambda: tws.received[-1][0] == "50")  # reqRealTimeBars reached TWS
    for i in range(12):  # 14:00:00 .. 14:00:55, each 5 s
        tws.bar("ES", T + 5 * i, 4500 + i, 4501 + i, 4499 + i, 4500.5 + i, 10)
    assert feed.next_bar(0.3) is None  # the minute's last part may still come
    tws.bar("ES", T + 60, 4600, 4601, 4599, 4600.25, 3)  # the next minute's first part
    bar = feed.next_bar(2)
    assert bar == LiveBar("ES", (T + 60) * SEC, 4500, 4512, 4499, 4511.5, 120)
    feed.clock_.now_s = T + 67  # 14:01:07: the bar closing 14:02:00 is still open
    assert feed.next_bar(0.1) is None
    feed.clock_.now_s = T + 120 + 2  # 14:02:00 + grace
    assert feed.next_bar(1) == LiveBar("ES", (T + 120) * SEC, 4600, 4601, 4599, 4600.25, 3)


def test_unknown_symbol_unreachable_tws_and_drops(tws, feed):
    with pytest.raises(FeedError, match=r"^IB feed: no IB contract for 'NQ' \(has CL, ES\)$"):
        feed.subscribe("NQ")
    nowhere = IbBars("127.0.0.1", 1, 22, FUTURES, connect_timeout_s=1)
    with pytest.raises(FeedError, match=r"^IB feed: cannot connect to TWS/IB Gateway at "
                       r"127.0.0.1:1 \(client id 22\): nothing listens there"):
        nowhere.subscribe("ES")
    nowhere.close()
    feed.subscribe("CL")
    tws.drop()
    with pytest.raises(FeedError, match="lost the connection to TWS"):
        feed.next_bar(2)
    feed.close()
    with pytest.raises(FeedEnded):
        feed.next_bar(0.1)
