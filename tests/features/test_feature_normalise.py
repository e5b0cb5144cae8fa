"""Normalisation: fitted statistics (walk-forward) and the causal rolling z-score."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from foxhunt.data.instruments import Session
from foxhunt.errors import DataError
from foxhunt.features import FeaturePipeline, Normaliser
from foxhunt.features.normalise import rolling_zscore

from .feature_bars import every_group, random_bars, small_chunks

NAMES = ["a", "b", "c", "d", "e"]


def sample(rng: np.random.Generator, n: int = 500) -> np.ndarray:
    raw = rng.normal(size=(n, 5)) * [1.0, 1e-4, 30.0, 1.0, 1.0] + [0.0, 5e-4, 1e3, 0.0, -2.0]
    raw[:, 3] = 0.25  # constant
    return raw.astype(np.float32)


def test_fit_matches_numpy_on_its_window_only():
    raw = sample(np.random.default_rng(0))
    norm = Normaliser.fit(raw, NAMES, 40, 300, clip=4.0)
    window = raw[40:300].astype(np.float64)
    assert norm.mean == pytest.approx(window.mean(axis=0), rel=1e-12, abs=1e-15)
    assert norm.std == pytest.approx(window.std(axis=0), rel=1e-9, abs=1e-15)
    assert norm.std[3] == 0.0
    assert (norm.start, norm.stop, norm.clip) == (40, 300, 4.0)


def test_apply_scales_clips_and_zeroes():
    rng = np.random.default_rng(1)
    raw = sample(rng)
    raw[:7, 0] = np.nan
    norm = Normaliser.fit(raw, NAMES, 10, 400, clip=2.5)
    out = norm.apply(raw)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    std = np.where(norm.std > 0, norm.std, np.inf)
    want = np.clip((raw.astype(np.float64) - norm.mean) / std, -2.5, 2.5)
    want[np.isnan(want)] = 0.0
    assert np.allclose(out, want, atol=1e-6)
    assert not out[:, 3].any() and not out[:7, 0].any()
    feature_major = np.ascontiguousarray(raw.T).T
    assert norm.apply(feature_major).tobytes() == out.tobytes()


def test_fixed_columns_pass_through():
    raw = sample(np.random.default_rng(2))
    norm = Normaliser.fit(raw, NAMES, 0, 500, clip=5.0, fixed=[False, False, False, False, True])
    assert norm.mean[4] == 0.0 and norm.std[4] == 1.0
    assert np.array_equal(norm.apply(raw)[:, 4], np.clip(raw[:, 4], -5, 5))


def test_round_trip_through_json():
    raw = sample(np.random.default_rng(3))
    norm = Normaliser.fit(raw, NAMES, 5, 200, clip=3.0)
    again = Normaliser.from_dict(json.loads(json.dumps(norm.to_dict())))
    assert again.names == norm.names
    assert again.apply(raw).tobytes() == norm.apply(raw).tobytes()
    with pytest.raises(DataError, match="malformed"):
        Normaliser.from_dict({"names": ["a"]})
    with pytest.raises(DataError, match="shape"):
        Normaliser.from_dict({**norm.to_dict(), "mean": [0.0]})
    with pytest.raises(DataError, match="cannot be applied"):
        norm.apply(raw[:, :4])


def test_fit_window_errors():
    raw = sample(np.random.default_rng(4), 50)
    for start, stop in [(10, 11), (0, 51), (-1, 20), (30, 20)]:
        with pytest.raises(DataError, match="fit window"):
            Normaliser.fit(raw, NAMES, start, stop, 5.0)
    raw[20, 1] = np.nan
    with pytest.raises(DataError, match=r"\['b'\]"):
        Normaliser.fit(raw, NAMES, 0, 50, 5.0)


def test_transform_equals_raw_plus_stored_normaliser():
    """What walk-forward does: fit on the training rows, store, re-apply to later data."""
    pipe = FeaturePipeline(every_group(norm_window=30),
                           Session(tz="America/Chicago", open="17:00", close="16:00"))
    bars = random_bars(np.random.default_rng(5), 900, flow=True)
    fitted = pipe.transform(bars, fit_until=600)
    norm = fitted.normaliser
    assert norm is not None and norm.names == tuple(pipe.names)
    assert (norm.start, norm.stop) == (pipe.warmup, 600)
    by_hand = norm.apply(pipe.raw(bars))
    v = fitted.valid_from
    assert by_hand[v:].tobytes() == fitted.values[v:].tobytes()
    stored = Normaliser.from_dict(json.loads(json.dumps(norm.to_dict())))
    again = pipe.transform(bars, normaliser=stored)
    assert again.values.tobytes() == fitted.values.tobytes()
    assert again.normaliser is stored
    time_cols = pipe.groups["time"]
    assert np.array_equal(fitted.values[v:, time_cols], pipe.raw(bars)[v:, time_cols])


def test_rolling_zscore_matches_pandas():
    rng = np.random.default_rng(6)
    n, w, start = 3_000, 50, 13
    raw = sample(rng, n)
    raw[:start] = np.nan
    fixed = [False, False, False, False, True]
    with small_chunks():
        small = rolling_zscore(np.ascontiguousarray(raw.T), w, start, 4.0, fixed)
    out = rolling_zscore(np.ascontiguousarray(raw.T), w, start, 4.0, fixed)
    assert np.allclose(out, small, atol=1e-6)
    frame = pd.DataFrame(raw.astype(np.float64))
    mean, std = frame.rolling(w).mean(), frame.rolling(w).std(ddof=0)
    want = ((frame - mean) / std).clip(-4, 4).to_numpy()
    first = start + w - 1
    assert not out[:first].any()
    for j in (0, 1, 2):
        assert np.allclose(out[first:, j], want[first:, j], atol=1e-5), j
    assert not out[:, 3].any()
    assert np.array_equal(out[first:, 4], raw[first:, 4])


def test_rolling_zscore_is_exactly_zero_on_constant_windows():
    rng = np.random.default_rng(7)
    x = rng.normal(0.0, 1.0, 4_000) * 1e3
    x[1_000:2_500] = 0.0
    x[3_000:] = 1234.5
    raw = np.ascontiguousarray(np.stack([x, x * 1e-6]).astype(np.float32))
    with small_chunks(rolling_chunk=301):
        out = rolling_zscore(raw, 64, 0, 5.0, [False, False])
    for lo, hi in [(1_000 + 63, 2_500), (3_000 + 63, 4_000)]:
        assert not out[lo:hi].any()
    assert out[500:1_000].any()


def test_rolling_transform_uses_a_full_window_after_the_warmup():
    pipe = FeaturePipeline(every_group(norm_window=40))
    bars = random_bars(np.random.default_rng(8), 600)
    fm = pipe.transform(bars)
    assert fm.normaliser is None
    assert fm.valid_from == pipe.warmup + 39 == pipe.rolling_valid_from
    raw = pipe.raw(bars).astype(np.float64)
    j = pipe.names.index("ret_1")
    t = 500
    window = raw[t - 39 : t + 1, j]
    assert fm.values[t, j] == pytest.approx((raw[t, j] - window.mean()) / window.std(), rel=1e-4)
