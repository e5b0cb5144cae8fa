"""Risk limits: a frozen config, read from the `[risk]` table of a TOML file.

Money is in the account's currency; 0 turns a money limit or breaker off (TOML has no null).
Per-instrument overrides sit under `[risk.instruments.SYMBOL]`.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from foxhunt.configbase import StrictConfig, read_toml, validate_config
from foxhunt.errors import ConfigError

_HHMM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


class InstrumentLimits(StrictConfig):
    """Overrides for one instrument; an unset key takes the account-wide value."""

    max_order_qty: int | None = Field(default=None, ge=1)
    max_position: int | None = Field(default=None, ge=0)
    price_collar_pct: Decimal | None = Field(default=None, gt=0)


class RiskConfig(StrictConfig):
    max_order_qty: int = Field(default=5, ge=1, description="contracts in one order")
    max_position: int = Field(
        default=5, ge=0,
        description="contracts per instrument, long or short, if every working order on the "
        "order's side filled",
    )  # fmt: skip
    max_gross_notional: Decimal = Field(
        default=Decimal(2_000_000), ge=0,
        description="sum over instruments of |contracts| x last price x point value, with "
        "working orders; 0 = off",
    )  # fmt: skip
    max_order_rate: int = Field(
        default=10, ge=1, description="orders and modifications sent per order_rate_window_s"
    )
    order_rate_window_s: float = Field(default=1.0, gt=0, description="sliding window, seconds")
    max_orders_per_day: int = Field(default=1000, ge=1, description="orders sent per trading day")
    price_collar_pct: Decimal = Field(
        default=Decimal(5), gt=0,
        description="a limit or stop price may be at most this percent from the last price",
    )  # fmt: skip
    daily_loss_limit: Decimal = Field(
        default=Decimal(5_000), ge=0,
        description="HALTED once equity falls this far below the day's starting equity; 0 = off",
    )  # fmt: skip
    max_drawdown: Decimal = Field(
        default=Decimal(15_000), ge=0,
        description="HALTED once equity falls this far below its peak; 0 = off",
    )  # fmt: skip
    flatten_on_breach: bool = Field(
        default=False, description="a tripped breaker also fires the kill switch"
    )
    var_confidence: float = Field(default=0.99, gt=0.5, lt=1.0)
    max_var_historical: Decimal = Field(
        default=Decimal(0), ge=0,
        description="historical VaR at var_confidence after the order fills; 0 = off",
    )  # fmt: skip
    max_var_parametric: Decimal = Field(
        default=Decimal(0), ge=0,
        description="Gaussian VaR at var_confidence after the order fills; 0 = off",
    )  # fmt: skip
    var_min_returns: int = Field(
        default=100, ge=10, description="fewer returns in the window than this: VaR denies"
    )
    day_tz: str = Field(default="America/Chicago", description="zone of the trading day's close")
    day_close: str = Field(default="16:00", description="HH:MM: a new trading day starts here")
    instruments: dict[str, InstrumentLimits] = Field(default_factory=dict)

    @field_validator("day_tz")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r}") from None
        return v

    @field_validator("day_close")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not _HHMM.match(v):
            raise ValueError(f"expected HH:MM, got {v!r}")
        return v


def load_risk_config(path: Path) -> RiskConfig:
    """The `[risk]` table of `path` (so it can live in a config.toml beside other sections)."""
    table = read_toml(path).get("risk")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: no [risk] table (put the risk limits under [risk])")
    return validate_config(RiskConfig, table, f"{path} [risk]")
