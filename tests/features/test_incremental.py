"""Incremental features equal the batch pipeline bit for bit (the train/serve skew guard).

A paper or live agent sees features computed bar by bar; the agent was trained on the batch
pipeline's matrix. Every raw column and the fitted-normaliser output are compared as float32
bytes (NaN == NaN, -0.0 != 0.0), with chunk and EMA block sizes shrunk so short series cross
many segment restarts, and once at the real sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.data.instruments import Session
from foxhunt.errors import DataError
from foxhunt.features import FeatureConfig, FeaturePipeline
from foxhunt.features.config import GROUPS
from foxhunt.features.incremental import _GROUPS, IncrementalFeatures

from .feature_bars import every_group, random_bars, small_chunks

CFG = FeatureConfig(groups=["returns", "volatility", "volume", "trend", "time"], returns_lags=[1, 3],
                    vol_windows=[2, 5], volume_windows=[3, 4], trend_windows=[2, 6, 11], clip=3.0)
ONE_VOL = FeatureConfig(groups=["returns", "volatility", "trend", "time"], returns_lags=[2],
                        vol_windows=[4], trend_windows=[3, 17])
CROSSES = FeatureConfig(groups=list(GROUPS), returns_lags=[1, 2], vol_windows=[3, 6],
                        volume_windows=[2], trend_windows=[4, 9], cross_pairs=[(1, 4), (3, 8)],
                        clip=4.0)
"""Crosses with every other group; a slow window longer than the vol and trend windows."""
CROSSES_ONLY = FeatureConfig(groups=["crosses"], vol_windows=[5],
                             cross_pairs=[(1, 4), (3, 8), (2, 41)])
"""Crosses alone (their vol unit from a window no group writes), and a slow window longer than
`small_chunks`' chunk, so a segment's history reaches back over more than one chunk."""
SESSIONS = [
    Session(tz="America/Chicago", open="17:00", close="16:00"),
    Session(tz="Europe/London", open="08:00", close="16:30"),
    Session(),
]


def feed(inc: IncrementalFeatures, bars) -> tuple[np.ndarray, np.ndarray]:
    """(normalised or raw rows, raw rows) pushed one bar at a time."""
    rows, raws = [], []
    for t in range(len(bars)):
        buy = None if bars.buy_volume is None else float(bars.buy_volume[t])
        sell = None if bars.sell_volume is None else float(bars.sell_volume[t])
        rows.append(inc.push(int(bars.ts[t]), float(bars.open[t]), float(bars.high[t]),
                             float(bars.low[t]), float(bars.close[t]), float(bars.volume[t]),
                             buy, sell))
        raws.append(inc.raw_row.copy())
    return np.stack(rows), np.stack(raws)


def first_difference(a: np.ndarray, b: np.ndarray, names) -> str:
    diff = a.view(np.uint32) != b.view(np.uint32)
    r, c = np.argwhere(diff)[0]
    return f"row {r} column {names[c]}: batch {a[r, c]!r}, incremental {b[r, c]!r}"


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    config = draw(st.sampled_from([CFG, ONE_VOL, CROSSES, CROSSES_ONLY]))
    session = draw(st.sampled_from(SESSIONS))
    n = draw(st.integers(FeaturePipeline(config).warmup + 3, 150))
    flat = draw(st.sampled_from([None, None, int(rng.integers(0, n))]))
    step = draw(st.sampled_from([60_000_000_000, 90_500_000_000]))  # whole minutes or not
    bars = random_bars(rng, n, flow=draw(st.booleans()), flat_from=flat, step_ns=step)
    return config, session, bars


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_incremental_rows_equal_the_batch_pipeline_bit_for_bit(case):
    config, session, bars = case
    with small_chunks():
        pipe = FeaturePipeline(config, session)
        raw = pipe.raw(bars)
        fitted = pipe.transform(bars, fit_until=len(bars))
        _, inc_raw = feed(IncrementalFeatures(config, session), bars)
        inc_norm, _ = feed(IncrementalFeatures(config, session, fitted.normaliser), bars)
    assert raw.tobytes() == inc_raw.tobytes(), first_difference(raw, inc_raw, pipe.names)
    assert fitted.values.tobytes() == inc_norm.tobytes(), first_difference(
        fitted.values, inc_norm, pipe.names)


def test_real_chunk_sizes_across_a_segment_restart():
    """Default config and chunk sizes, past the first CHUNK boundary (8000 bars)."""
    bars = random_bars(np.random.default_rng(5), 8300, flow=False)
    session = SESSIONS[0]
    pipe = FeaturePipeline(every_group(), session)
    raw = pipe.raw(bars)
    _, inc_raw = feed(IncrementalFeatures(every_group(), session), bars)
    assert raw.tobytes() == inc_raw.tobytes(), first_difference(raw, inc_raw, pipe.names)


def test_crosses_at_real_chunk_sizes_across_segment_restarts():
    """Every group, the default cross pairs (4, 16) .. (128, 512), past two CHUNK boundaries
    (8000 and 16000 bars), raw and with a fitted normaliser."""
    config = FeatureConfig(groups=list(GROUPS))
    assert "crosses" in config.groups and (128, 512) in config.cross_pairs
    bars = random_bars(np.random.default_rng(7), 16_300, flow=True)
    session = SESSIONS[1]
    pipe = FeaturePipeline(config, session)
    raw = pipe.raw(bars)
    fitted = pipe.transform(bars, fit_until=12_000)
    inc_norm, inc_raw = feed(IncrementalFeatures(config, session, fitted.normaliser), bars)
    assert raw.tobytes() == inc_raw.tobytes(), first_difference(raw, inc_raw, pipe.names)
    assert fitted.values.tobytes() == inc_norm.tobytes(), first_difference(
        fitted.values, inc_norm, pipe.names)
    assert np.isfinite(raw[pipe.warmup:, [pipe.names.index("cross_128_512")]]).all()


def test_a_row_written_into_the_callers_array_is_the_returned_row():
    """`push(out=...)` (the paper agent's observation slot) gives the bits a new array gets."""
    bars = random_bars(np.random.default_rng(3), 90, flow=True)
    normaliser = FeaturePipeline(CFG).transform(bars, fit_until=90).normaliser
    fresh, _ = feed(IncrementalFeatures(CFG, normaliser=normaliser), bars)
    inc = IncrementalFeatures(CFG, normaliser=normaliser)
    slot = np.full(len(inc.names), np.nan, dtype=np.float32)
    for t in range(len(bars)):
        got = inc.push(int(bars.ts[t]), float(bars.open[t]), float(bars.high[t]),
                       float(bars.low[t]), float(bars.close[t]), float(bars.volume[t]),
                       float(bars.buy_volume[t]), float(bars.sell_volume[t]), out=slot)
        assert got is slot and slot.tobytes() == fresh[t].tobytes(), t


def test_bad_bars_are_refused_with_the_bar_number():
    inc = IncrementalFeatures(CFG)
    inc.push(60, 100.0, 101.0, 99.0, 100.5, 10.0)
    with pytest.raises(DataError, match="bar 1: prices must be positive"):
        inc.push(120, 100.0, 101.0, -1.0, 100.5, 10.0)


def test_every_feature_group_is_computed_bar_by_bar():
    assert set(_GROUPS) == set(GROUPS)


def test_a_group_it_does_not_compute_is_refused():
    """Every group of `config.GROUPS` is computed (above), and the config refuses other names,
    so a group added to the batch pipeline but not here is stood in for by an unvalidated
    copy of a config: its columns must not silently stay NaN."""
    config = CFG.model_copy(update={"groups": [*CFG.groups, "not_a_group"]})
    with pytest.raises(DataError, match="not_a_group not computed bar by bar"):
        IncrementalFeatures(config)


def test_a_normaliser_for_other_features_is_refused():
    bars = random_bars(np.random.default_rng(1), 60)
    other = FeaturePipeline(ONE_VOL).transform(bars, fit_until=60).normaliser
    with pytest.raises(DataError, match="fitted on"):
        IncrementalFeatures(CFG, normaliser=other)
