"""The mirrored market in feature space: what `FeatureMirror` computes from the normalised
features is what the pipeline reads from the mirrored bars (prices p -> c / p, highs and lows
swapped, buyers and sellers swapped), in the same normaliser's coordinates."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.features.mirror import FeatureMirror
from foxhunt.features.pipeline import FeaturePipeline

from .feature_bars import every_group, mirrored_bars, random_bars


def pipeline_and_bars(flow: bool, seed: int = 3):
    bars = random_bars(np.random.default_rng(seed), 3_000, flow=flow)
    session = InstrumentRegistry.load().get("ES").session
    return FeaturePipeline(every_group(), session), bars


@pytest.mark.parametrize("flow", [False, True], ids=["no_flow", "flow"])
def test_the_mirror_of_the_features_is_the_features_of_the_mirrored_market(flow):
    pipe, bars = pipeline_and_bars(flow)
    features = pipe.transform(bars, fit_until=2_000)
    mirror = FeatureMirror.of(pipe.specs, features.normaliser)
    flipped = mirrored_bars(bars, pivot=float(bars.close[0]))
    seen = pipe.transform(flipped, normaliser=features.normaliser).values
    valid = slice(features.valid_from, None)
    expected = mirror.apply(features.values)[valid]
    np.testing.assert_allclose(seen[valid], expected, atol=2e-3)
    directional = mirror.sign < 0
    assert directional.sum() >= 10 and (~directional).sum() >= 10
    assert not np.allclose(seen[valid][:, directional], features.values[valid][:, directional],
                           atol=0.1)


def test_mirroring_twice_gives_back_the_features_inside_the_clip():
    pipe, bars = pipeline_and_bars(False)
    features = pipe.transform(bars, fit_until=2_000)
    mirror = FeatureMirror.of(pipe.specs, features.normaliser)
    x = features.values[features.valid_from:]
    twice = mirror.apply(mirror.apply(x))
    inside = np.abs(mirror.apply(x)) < mirror.clip
    np.testing.assert_allclose(twice[inside & (np.abs(x) < mirror.clip)],
                               x[inside & (np.abs(x) < mirror.clip)], atol=1e-5)


def test_every_feature_has_a_mirror_sign_and_the_directional_ones_flip():
    specs = {s.name: s.mirror
             for s in FeaturePipeline(every_group(), None).specs}
    assert specs["ret_1"] == specs["ofi"] == specs["ema_dist_8"] == specs["zscore_32"] == -1
    assert specs["rsi_8"] == specs["chan_128"] == specs["ofi_16"] == specs["cross_4_16"] == -1
    assert specs["rv_16"] == specs["atr_64"] == specs["logvol_16"] == specs["tod_sin"] == 1
