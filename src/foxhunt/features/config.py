"""Feature pipeline settings (the `[features]` section of the config)."""

from __future__ import annotations

from pydantic import Field, field_validator

from foxhunt.configbase import StrictConfig

GROUPS = ("returns", "volatility", "volume", "trend", "crosses", "time")
DEFAULT_GROUPS = ("returns", "trend", "crosses")
"""The shipped groups: the compact multi-horizon set that let the agent learn trends and
reversion (docs/learning.md, fifth experiments); the rest are there to switch on."""


class FeatureConfig(StrictConfig):
    """Which feature groups to build, their look-back windows, and how to normalise them."""

    groups: list[str] = Field(default=list(DEFAULT_GROUPS), description="feature groups to build")
    returns_lags: list[int] = Field(
        default=[1, 2, 4, 8, 16, 32], description="bars of each log-return feature"
    )
    vol_windows: list[int] = Field(
        default=[16, 64], description="bars of each volatility window; the longest is the vol unit"
    )
    volume_windows: list[int] = Field(
        default=[16, 64], description="bars of each volume / order-flow window"
    )
    trend_windows: list[int] = Field(
        default=[16, 64, 256], description="bars of each EMA / z-score / RSI / channel window"
    )
    cross_pairs: list[tuple[int, int]] = Field(
        default=[(4, 16), (16, 64), (64, 256), (128, 512)],
        description="(fast, slow) bars of each moving-average cross",
    )
    norm_window: int = Field(
        default=1024, ge=2, description="rows of the rolling z-score used without a fit window"
    )
    clip: float = Field(default=5.0, gt=0, description="normalised values are clipped to +-clip")

    @field_validator("groups")
    @classmethod
    def _known_groups(cls, v: list[str]) -> list[str]:
        unknown = sorted(set(v) - set(GROUPS))
        if unknown or not v:
            raise ValueError(f"must be a non-empty subset of {list(GROUPS)}; unknown: {unknown}")
        return [g for g in GROUPS if g in v]

    @field_validator("returns_lags", "vol_windows", "volume_windows")
    @classmethod
    def _positive_sorted(cls, v: list[int]) -> list[int]:
        if not v or any(w < 1 for w in v):
            raise ValueError("must be a non-empty list of positive integers")
        return sorted(set(v))

    @field_validator("cross_pairs")
    @classmethod
    def _fast_below_slow(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if not v or any(not 1 <= fast < slow for fast, slow in v):
            raise ValueError("must be a non-empty list of [fast, slow] bars with 1 <= fast < slow")
        return sorted(set(v))

    @field_validator("trend_windows")
    @classmethod
    def _at_least_two(cls, v: list[int]) -> list[int]:
        if not v or any(w < 2 for w in v):
            raise ValueError("must be a non-empty list of integers >= 2 (a z-score needs 2 bars)")
        return sorted(set(v))
