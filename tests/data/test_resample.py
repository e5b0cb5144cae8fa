from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data.resample import aggressor_sign, resample
from foxhunt.data.series import BarSpec, Ticks
from foxhunt.data.validation import validate_bars
from foxhunt.errors import DataError

S = 1_000_000_000
T0 = 1_378_072_800 * S  # 2013-09-01T22:00:00Z


def ticks(ts_s, price, size, side=None) -> Ticks:
    return Ticks(
        np.round(np.asarray(ts_s, dtype=float) * S).astype(np.int64) + T0,
        np.asarray(price, dtype=float),
        np.asarray(size, dtype=float),
        None if side is None else np.asarray(side),
    )


# 8 trades over 3 minutes, nothing in minute 1 (60..120 s).
TS = [0.5, 10, 59.999, 125, 130, 130, 170, 179]
PX = [100.0, 101.0, 99.5, 100.25, 100.5, 100.0, 100.0, 102.0]
SZ = [2, 1, 3, 5, 1, 4, 2, 6]


def test_time_bars_close_at_bucket_end_and_skip_empty_buckets():
    bars = resample(ticks(TS, PX, SZ), "1min")
    assert ((bars.ts - T0) // S).tolist() == [60, 180]
    assert bars.open.tolist() == [100.0, 100.25]
    assert bars.high.tolist() == [101.0, 102.0]
    assert bars.low.tolist() == [99.5, 100.0]
    assert bars.close.tolist() == [99.5, 102.0]
    assert bars.volume.tolist() == [6, 18]


def test_time_bars_follow_the_session_anchor():
    bars = resample(ticks(TS, PX, SZ), "1min", session_anchor_ns=T0 + 30 * S)
    assert ((bars.ts - T0) // S).tolist() == [30, 90, 150, 210]
    assert bars.volume.tolist() == [3, 3, 10, 8]


def test_a_tick_exactly_on_the_boundary_opens_the_next_bar():
    bars = resample(ticks([0, 60, 61], [1.0, 2.0, 3.0], [1, 1, 1]), "1min")
    assert ((bars.ts - T0) // S).tolist() == [60, 120]
    assert bars.close.tolist() == [1.0, 3.0]


def test_tick_bars_keep_only_complete_bars():
    bars = resample(ticks(TS, PX, SZ), "ticks:3")
    assert len(bars) == 2  # the last two trades are an unfinished bar
    assert ((bars.ts - T0) // 1_000_000).tolist() == [59_999, 130_000]
    assert bars.open.tolist() == [100.0, 100.25]
    assert bars.high.tolist() == [101.0, 100.5]
    assert bars.close.tolist() == [99.5, 100.0]
    assert bars.volume.tolist() == [6, 10]


def test_volume_bars_close_on_the_tick_that_reaches_the_threshold_without_splitting():
    # sizes 2,1,3 | 5 | 1,4 | 2,6: running sums restart after each close at >= 5
    bars = resample(ticks(TS, PX, SZ), "volume:5")
    assert bars.volume.tolist() == [6, 5, 5, 8]
    assert bars.close.tolist() == [99.5, 100.25, 100.0, 102.0]
    assert ((bars.ts - T0) // 1_000_000).tolist() == [59_999, 125_000, 130_000 + 0, 179_000]


def test_dollar_bars_use_price_times_size_times_point_value():
    t = ticks([1, 2, 3, 4, 5], [100.0, 100.0, 200.0, 50.0, 50.0], [1, 2, 1, 1, 10])
    # notional x 2: 200, 400 | 400 | 100, 1000
    bars = resample(t, BarSpec.parse("dollar:400"), point_value=2.0)
    assert bars.volume.tolist() == [3, 1, 11]
    assert bars.open.tolist() == [100.0, 200.0, 50.0]
    assert resample(t, "dollar:5000").ts.size == 0


def test_bars_closing_in_the_same_millisecond_get_unique_timestamps():
    t = ticks([1, 1, 1, 1, 2], [1.0, 2.0, 3.0, 4.0, 5.0], [1, 1, 1, 1, 1])
    bars = resample(t, "ticks:1")
    assert (bars.ts - T0).tolist() == [S, S + 1, S + 2, S + 3, 2 * S]
    validate_bars(bars, "resampled")


def test_flow_from_side_then_tick_rule():
    # prices: 10, 10, 11, 11, 10, 10 ; side given for tick 4 only (sells)
    t = ticks(
        [1, 2, 3, 4, 5, 6], [10, 10, 11, 11, 10, 10], [2, 4, 1, 3, 5, 7], side=[0, 0, 0, -1, 0, 0]
    )
    assert aggressor_sign(t).tolist() == [0, 0, 1, -1, -1, -1]
    bars = resample(t, "ticks:6")
    # unknown ticks (before the first price change) split half and half: 3 buy + 3 sell
    assert bars.buy_volume.tolist() == [3 + 1]
    assert bars.sell_volume.tolist() == [3 + 3 + 5 + 7]
    assert (bars.buy_volume + bars.sell_volume).tolist() == bars.volume.tolist()


def test_unsorted_ticks_are_refused():
    with pytest.raises(DataError, match="not sorted"):
        resample(ticks([2, 1], [1.0, 1.0], [1, 1]), "1min")


def test_no_ticks_or_too_few_give_empty_bars():
    assert len(resample(ticks([], [], []), "1min")) == 0
    assert len(resample(ticks([1], [1.0], [1]), "ticks:2")) == 0


# --- reference comparison ------------------------------------------------------------------


def reference(ts, price, size, side, spec: BarSpec, anchor: int = 0) -> list[tuple]:
    """Slow, obvious loops: (ts, open, high, low, close, volume, buy) per bar."""
    n = len(ts)
    sign, prev = [], 0
    for i in range(n):
        if i and price[i] != price[i - 1]:
            prev = 1 if price[i] > price[i - 1] else -1
        sign.append(side[i] if side is not None and side[i] != 0 else prev)
    groups: list[list[int]] = []
    if spec.kind == "time":
        keys: dict[int, list[int]] = {}
        for i in range(n):
            keys.setdefault((ts[i] - anchor) // spec.ns, []).append(i)
        groups = list(keys.values())
        closes = [anchor + (k + 1) * spec.ns for k in keys]
    else:
        cur, acc = [], 0.0
        for i in range(n):
            cur.append(i)
            acc += (
                1
                if spec.kind == "ticks"
                else size[i]
                if spec.kind == "volume"
                else price[i] * size[i]
            )
            if acc >= spec.size:
                groups.append(cur)
                cur, acc = [], 0.0
        closes, last = [], None
        for g in groups:
            t = ts[g[-1]] if last is None else max(ts[g[-1]], last + 1)
            closes.append(t)
            last = t
    out = []
    for g, t in zip(groups, closes, strict=True):
        buy = sum(size[i] * (1.0 if sign[i] > 0 else 0.0 if sign[i] < 0 else 0.5) for i in g)
        p = [price[i] for i in g]
        out.append((t, p[0], max(p), min(p), p[-1], sum(size[i] for i in g), buy))
    return out


tick_streams = st.integers(1, 120).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 5_000), min_size=n, max_size=n),
        st.lists(st.integers(-3, 3), min_size=n, max_size=n),
        st.lists(st.integers(1, 9), min_size=n, max_size=n),
        st.one_of(st.none(), st.lists(st.sampled_from([-1, 0, 1]), min_size=n, max_size=n)),
    )
)
# volume:7 / dollar:900 close a bar every one or two ticks (the all-ticks search); volume:200 and
# dollar:20000 about one per 40 ticks (the per-bar search).
specs = st.sampled_from(
    [
        "1s",
        "3s",
        "1min",
        "ticks:1",
        "ticks:4",
        "volume:7",
        "volume:200",
        "dollar:900",
        "dollar:20000",
    ]
)


@settings(max_examples=120, deadline=None)
@given(tick_streams, specs, st.integers(0, 2_999))
def test_resample_matches_the_reference(stream, spec_text, anchor_ms):
    gaps_ms, moves, sizes, side = stream
    ts = (T0 + np.cumsum(np.asarray(gaps_ms, dtype=np.int64)) * 1_000_000).tolist()
    price = (100 + 0.25 * np.cumsum(moves)).tolist()
    spec = BarSpec.parse(spec_text)
    anchor = T0 + anchor_ms * 1_000_000
    t = Ticks(
        np.array(ts),
        np.array(price),
        np.array(sizes, dtype=float),
        None if side is None else np.array(side),
    )
    bars = resample(t, spec, session_anchor_ns=anchor)
    want = reference(ts, price, [float(s) for s in sizes], side, spec, anchor)
    got = list(
        zip(
            bars.ts.tolist(),
            bars.open,
            bars.high,
            bars.low,
            bars.close,
            bars.volume,
            bars.buy_volume,
            strict=True,
        )
    )
    assert got == want
    assert bars.volume.sum() <= sum(sizes)
    if spec.kind == "time":
        assert bars.volume.sum() == sum(sizes)
    if len(bars):
        validate_bars(bars, "resampled")
        assert (bars.buy_volume + bars.sell_volume == bars.volume).all()
        assert (bars.ts >= np.array(ts)[[0]]).all()
