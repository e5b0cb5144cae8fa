"""Trading-env settings (the `[env]` section of the config)."""

from __future__ import annotations

from pydantic import Field, field_validator

from foxhunt.configbase import StrictConfig


class EnvConfig(StrictConfig):
    """Episode shape, action tables, costs and reward weights.

    Shaping weights are in units of the reward scale (one bar's dollar volatility per contract),
    so the same numbers mean the same thing on ES and on CL.
    """

    window: int = Field(default=1, ge=1, description="bars of features in one observation")
    """1: the current bar's features, which already span horizons of 1 to 512 bars; a longer
    window gives the network more inputs to memorise a training window by (docs/learning.md)."""
    episode_len: int = Field(default=256, ge=1, description="decisions per episode")
    max_contracts: int = Field(default=3, ge=1)
    size_fractions: tuple[float, float, float] = Field(
        default=(1.0, 1.0, 1.0),
        description="fractions of max_contracts of the size branch's choices; all 1 (the "
        "default) trades full size only, e.g. [0.333, 0.667, 1.0] lets the agent size",
    )
    stop_atr_multiples: tuple[float, float] = Field(
        default=(0.0, 0.0),
        description="trailing-stop distance in ATRs for (tight, wide); 0 = off (the default), "
        "e.g. [1.0, 3.0] lets the agent choose a stop",
    )
    atr_window: int = Field(default=14, ge=1)
    slippage_ticks: float = Field(default=1.0, ge=0)
    flatten_at_session_end: bool = False
    drawdown_penalty: float = Field(
        default=0.0, ge=0, description="x the growth of the drawdown from the episode's equity peak"
    )
    hold_cost: float = Field(default=0.0, ge=0, description="reward-scale units per bar spent flat")
    trade_close_bonus: float = Field(
        default=0.0, ge=0, description="x the realised PnL of each trade, paid when it closes"
    )
    ruin_loss: float = Field(
        default=1e9, gt=0, description="episode loss in dollars that terminates"
    )
    reward_vol_window: int = Field(default=256, ge=2, description="bars in the running volatility")
    reward_scale_floor_ticks: float = Field(
        default=1.0, gt=0, description="floor of the reward scale, in tick values"
    )

    @field_validator("size_fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if not all(0 < f <= 1 for f in v):
            raise ValueError("each size fraction must be in (0, 1]")
        return v

    @field_validator("stop_atr_multiples")
    @classmethod
    def _multiples(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not all(m >= 0 for m in v):
            raise ValueError("stop ATR multiples must be >= 0 (0 turns that choice off)")
        return v
