"""Causality (docs/domain.md#features): the feature row for bar t depends on bars <= t only, bit
for bit.

Every column and every normalisation mode is checked by changing bars from some row j on and
asserting that rows < j keep the exact same float32 bytes. Chunk and block sizes are shrunk so
that the short series cross many chunk boundaries of every kernel.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.data.instruments import Session
from foxhunt.features import GROUPS, FeatureConfig, FeaturePipeline, Normaliser

from .feature_bars import FIELDS, perturb, random_bars, small_chunks

CFG = FeatureConfig(
    groups=list(GROUPS),
    cross_pairs=[(1, 4), (3, 8)],
    returns_lags=[1, 3],
    vol_windows=[2, 5],
    volume_windows=[3, 4],
    trend_windows=[2, 6],
    norm_window=9,
    clip=3.0,
)
WIDE = FeatureConfig(  # a normalisation window wider than the shrunken chunks
    groups=["returns", "trend", "time"],
    returns_lags=[2],
    vol_windows=[4],
    trend_windows=[3, 17],
    norm_window=40,
)
SESSIONS = [
    Session(tz="America/Chicago", open="17:00", close="16:00"),
    Session(tz="Europe/London", open="08:00", close="16:30"),
    Session(),
]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same_rows(a: np.ndarray, b: np.ndarray, upto: int) -> bool:
    """Rows [0, upto) identical as bytes (so NaN == NaN and -0.0 != 0.0)."""
    return a[:upto].tobytes() == b[:upto].tobytes()


@st.composite
def cases(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    pipe = FeaturePipeline(draw(st.sampled_from([CFG, WIDE])), draw(st.sampled_from(SESSIONS)))
    n = draw(st.integers(pipe.rolling_valid_from + 2, 160))
    flat = draw(st.sampled_from([None, None, int(rng.integers(0, n))]))
    bars = random_bars(rng, n, flow=draw(st.booleans()), flat_from=flat)
    first = draw(st.integers(1, n - 1))
    fields = set(draw(st.lists(st.sampled_from(FIELDS), min_size=1, unique=True)))
    changed = perturb(bars, rng, first, fields, every=draw(st.booleans()))
    return pipe, bars, changed, first


@SETTINGS
@given(cases())
def test_raw_and_rolling_rows_before_a_change_are_bit_identical(case):
    pipe, bars, changed, first = case
    with small_chunks():
        assert same_rows(pipe.raw(bars), pipe.raw(changed), first)
        a, b = pipe.transform(bars), pipe.transform(changed)
    assert a.valid_from == b.valid_from
    assert same_rows(a.values, b.values, first)


@SETTINGS
@given(cases(), st.data())
def test_fitted_rows_before_a_change_are_bit_identical(case, data):
    """A normaliser fitted on [warmup, fit_until) sees no later row: changes at >= fit_until
    leave every earlier row, and the fitted statistics, untouched."""
    pipe, bars, changed, first = case
    fit_until = data.draw(st.integers(pipe.warmup + 2, len(bars)))
    with small_chunks():
        a = pipe.transform(bars, fit_until=fit_until)
        b = pipe.transform(changed, fit_until=fit_until)
        stored = pipe.transform(changed, normaliser=a.normaliser)
    assert same_rows(stored.values, a.values, first)
    if first >= fit_until:
        assert np.array_equal(a.normaliser.mean, b.normaliser.mean)
        assert np.array_equal(a.normaliser.std, b.normaliser.std)
        assert same_rows(a.values, b.values, first)


@SETTINGS
@given(cases(), st.data())
def test_a_prefix_of_the_bars_gives_a_prefix_of_the_features(case, data):
    """Nothing depends on the series length: features of bars[:m] are rows [:m] of the whole."""
    pipe, bars, _, _ = case
    m = data.draw(st.integers(pipe.rolling_valid_from + 1, len(bars)))
    head = bars.slice(0, m)
    with small_chunks():
        assert same_rows(pipe.raw(head), pipe.raw(bars), m)
        assert same_rows(pipe.transform(head).values, pipe.transform(bars).values, m)
        fit_until = data.draw(st.integers(pipe.warmup + 2, m))
        assert same_rows(
            pipe.transform(head, fit_until=fit_until).values,
            pipe.transform(bars, fit_until=fit_until).values,
            m,
        )


def test_default_sizes_are_causal_across_real_chunk_boundaries():
    """The production chunk sizes, on a series long enough to cross several boundaries."""
    rng = np.random.default_rng(7)
    pipe = FeaturePipeline(FeatureConfig(groups=list(GROUPS), norm_window=64), SESSIONS[0])
    bars = random_bars(rng, 20_000, flow=True)
    base_raw, base_roll = pipe.raw(bars), pipe.transform(bars).values
    base_fit = pipe.transform(bars, fit_until=12_000)
    for first in (7_999, 8_000, 8_001, 16_000, 19_999):
        changed = perturb(bars, rng, first, set(FIELDS) - {"ts"}, every=True)
        assert same_rows(pipe.raw(changed), base_raw, first)
        assert same_rows(pipe.transform(changed).values, base_roll, first)
        if first >= 12_000:
            refit = pipe.transform(changed, fit_until=12_000)
            assert same_rows(refit.values, base_fit.values, first)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 60), st.integers(0, 59))
def test_normaliser_reads_only_its_fit_window(seed, stop, start):
    start = min(start, stop - 2)
    rng = np.random.default_rng(seed)
    raw = rng.normal(size=(60, 4)).astype(np.float32)
    names = ["a", "b", "c", "d"]
    fitted = Normaliser.fit(raw, names, start, stop, 5.0)
    garbage = raw.copy()
    garbage[:start] = np.nan
    garbage[stop:] = rng.normal(1e6, 1e6, size=garbage[stop:].shape)
    again = Normaliser.fit(garbage, names, start, stop, 5.0)
    assert np.array_equal(fitted.mean, again.mean)
    assert np.array_equal(fitted.std, again.std)


def test_a_short_last_chunk_does_not_change_the_rolling_zscore_of_a_flat_stretch():
    """Regression: the rolling z-score's "constant window" floor once scaled with the length of
    the series' last chunk, so a near-flat row read as constant in the whole series but not in
    a prefix of it (ema_dist decaying to 0 after the market went flat)."""
    rng = np.random.default_rng(995)
    pipe = FeaturePipeline(CFG, SESSIONS[995 % 3])
    n = int(rng.integers(pipe.rolling_valid_from + 2, 160))
    bars = random_bars(rng, n, flow=False, flat_from=int(rng.integers(0, n)))
    m = int(rng.integers(pipe.rolling_valid_from + 1, n))
    with small_chunks():
        assert same_rows(pipe.transform(bars.slice(0, m)).values, pipe.transform(bars).values, m)
