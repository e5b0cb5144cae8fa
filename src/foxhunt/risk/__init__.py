"""Risk: limits (a frozen config from TOML), pre-trade checks, the trading state machine,
circuit breakers, the kill switch and VaR. Imports `orders` and `portfolio` below it."""

from foxhunt.risk.config import InstrumentLimits, RiskConfig, load_risk_config
from foxhunt.risk.engine import KILL_SWITCH_TAG, KillPlan, RiskDenial, RiskEngine
from foxhunt.risk.events import (
    Cause,
    DrawdownReset,
    KillSwitchActivated,
    ModifyDenied,
    TradingDayStarted,
    TradingState,
    TradingStateChanged,
)
from foxhunt.risk.state import TRADING_TRANSITIONS, IllegalTradingStateChange, RiskState
from foxhunt.risk.var import ReturnsWindow

__all__ = [
    "KILL_SWITCH_TAG", "TRADING_TRANSITIONS", "Cause", "DrawdownReset",
    "IllegalTradingStateChange", "InstrumentLimits", "KillPlan", "KillSwitchActivated",
    "ModifyDenied", "ReturnsWindow", "RiskConfig", "RiskDenial", "RiskEngine", "RiskState",
    "TradingDayStarted", "TradingState", "TradingStateChanged", "load_risk_config",
]  # fmt: skip
