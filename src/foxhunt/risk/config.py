"""Risk limits: a frozen config, read from the `[risk]` table of a TOML file.

Money is in the account's currency; 0 turns a money limit or breaker off (TOML has no null).
Per-instrument overrides sit under `[risk.instruments.SYMBOL]`; a root's (`ES`) reaches each of
its contract months (`ESH24`), whose own entry, if any, wins key by key.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, model_validator

from foxhunt.configbase import ClockTime, StrictConfig, TimeZoneName, read_toml, validate_config
from foxhunt.errors import ConfigError


def _number_not_text(value: Any, info: ValidationInfo) -> Any:
    """TOML has numbers: `true` or `"7"` for a limit is a mistake, not a 1 or a 7. (The JSON
    form of a config, written by `model_dump(mode="json")`, carries money as text.)"""
    if isinstance(value, bool) or (isinstance(value, str) and info.mode != "json"):
        raise ValueError("expected a number")
    return value


Money = Annotated[Decimal, BeforeValidator(_number_not_text),
                  Field(ge=0, allow_inf_nan=False)]  # fmt: skip
Count = Annotated[int, Field(strict=True)]
Percent = Annotated[Decimal, BeforeValidator(_number_not_text), Field(gt=0, allow_inf_nan=False)]


def _off_at_zero(default: int, description: str) -> Any:
    """A money limit or breaker, `default` unless set; 0 turns it off."""
    return Field(default=Decimal(default), ge=0, description=f"{description}; 0 = off")


class InstrumentLimits(StrictConfig):
    """Overrides for one instrument; an unset key takes the account-wide value (for a contract
    month: its root's entry's value first). A root's `max_position` also caps the net position
    across its months."""

    max_order_qty: Count | None = Field(default=None, ge=1)
    max_position: Count | None = Field(default=None, ge=0)
    price_collar_pct: Percent | None = None


class RiskConfig(StrictConfig):
    max_order_qty: Count = Field(default=5, ge=1, description="contracts in one order")
    max_position: Count = Field(
        default=5, ge=0,
        description="contracts per instrument, long or short, if every working order on the "
        "order's side filled",
    )  # fmt: skip
    max_gross_notional: Money = _off_at_zero(
        2_000_000, "sum over instruments of |contracts| x last price x point value, with working orders"
    )
    max_order_rate: Count = Field(
        default=10, ge=1, description="orders and modifications sent per order_rate_window_s"
    )
    order_rate_window_s: float = Field(
        default=1.0, gt=0, le=86_400, strict=True, allow_inf_nan=False,
        description="sliding window, seconds",
    )  # fmt: skip
    max_orders_per_day: Count = Field(default=1000, ge=1, description="orders sent per trading day")
    price_collar_pct: Percent = Field(
        default=Decimal(5),
        description="a limit or stop price may be at most this percent from the last price",
    )  # fmt: skip
    daily_loss_limit: Money = _off_at_zero(
        5_000, "HALTED once equity falls this far below the day's starting equity"
    )
    max_drawdown: Money = _off_at_zero(15_000, "HALTED once equity falls this far below its peak")
    on_breach: Literal["flatten", "reduce"] = Field(
        default="flatten",
        description="a tripped breaker halts and flattens every position (the kill switch), or "
        "puts the account in REDUCING (orders that add risk are canceled and denied; exits pass)",
    )  # fmt: skip
    var_confidence: float = Field(default=0.99, gt=0.5, lt=1.0, strict=True)
    max_var_historical: Money = _off_at_zero(
        0, "historical VaR at var_confidence after the order fills"
    )
    max_var_parametric: Money = _off_at_zero(
        0, "Gaussian VaR at var_confidence after the order fills"
    )
    var_min_returns: Count = Field(
        default=100, ge=10, description="fewer returns in the window than this: VaR denies"
    )
    day_tz: TimeZoneName = Field(default="America/Chicago", strict=True, description="zone of the trading day's close")
    day_close: ClockTime = Field(default="16:00", strict=True, description="HH:MM: a new trading day starts here")
    instruments: dict[str, InstrumentLimits] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "flatten_on_breach" in data:
            raise ValueError("flatten_on_breach was replaced by on_breach = \"flatten\" (the "
                             "default) or \"reduce\"")
        return data


def load_risk_config(path: Path) -> RiskConfig:
    """The `[risk]` table of `path` (so it can live in a config.toml beside other sections)."""
    table = read_toml(path).get("risk")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: no [risk] table (put the risk limits under [risk])")
    return validate_config(RiskConfig, table, f"{path} [risk]")
