"""The [features] config section: shipped defaults, validation, canonical forms."""

from __future__ import annotations

import tomllib
from importlib import resources

import pydantic
import pytest

from foxhunt.features import GROUPS, FeatureConfig
from foxhunt.features.config import DEFAULT_GROUPS


def test_shipped_defaults_match_the_model_exactly():
    text = resources.files("foxhunt.resources").joinpath("defaults.toml").read_text()
    assert tomllib.loads(text)["features"] == FeatureConfig().model_dump(mode="json")


def test_groups_are_canonicalised_and_checked():
    assert FeatureConfig(groups=["time", "returns"]).groups == ["returns", "time"]
    assert FeatureConfig().groups == list(DEFAULT_GROUPS)
    assert set(DEFAULT_GROUPS) <= set(GROUPS)
    for bad in ([], ["returns", "position"]):
        with pytest.raises(pydantic.ValidationError):
            FeatureConfig(groups=bad)


def test_windows_are_sorted_deduplicated_and_bounded():
    cfg = FeatureConfig(returns_lags=[4, 1, 4], trend_windows=[9, 2])
    assert cfg.returns_lags == [1, 4] and cfg.trend_windows == [2, 9]
    for field, bad in [("returns_lags", [0]), ("vol_windows", []), ("trend_windows", [1, 5]),
                       ("norm_window", 1), ("clip", 0.0)]:
        with pytest.raises(pydantic.ValidationError):
            FeatureConfig(**{field: bad})
    with pytest.raises(pydantic.ValidationError):
        FeatureConfig(unknown=1)


def test_cross_pairs_need_fast_below_slow():
    assert FeatureConfig(cross_pairs=[(64, 256), (4, 16), (4, 16)]).cross_pairs == [(4, 16), (64, 256)]
    for bad in ([], [(16, 16)], [(0, 4)], [(64, 16)]):
        with pytest.raises(pydantic.ValidationError, match="cross_pairs"):
            FeatureConfig(cross_pairs=bad)
