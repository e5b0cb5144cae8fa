"""Risk events: trading-state changes, trading days, drawdown resets, the kill switch."""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum

from foxhunt.events import Event, event


class TradingState(StrEnum):
    ACTIVE = "ACTIVE"  # every check applies
    REDUCING = "REDUCING"  # only orders that reduce a position pass
    HALTED = "HALTED"  # nothing passes but the kill switch's flatten orders


class Cause(StrEnum):
    MANUAL = "MANUAL"  # an operator or the strategy's supervisor
    BREAKER = "BREAKER"  # the daily-loss or drawdown circuit breaker
    KILL_SWITCH = "KILL_SWITCH"


@event("trading_state_changed", "trading_state:{change}")
class TradingStateChanged(Event):
    change: int  # the n-th change of the account's trading state, from 1
    previous: TradingState
    state: TradingState
    cause: Cause
    check: str = ""  # the breaker's config key when cause is BREAKER
    reason: str = ""


@event("trading_day_started", "trading_day:{day}")
class TradingDayStarted(Event):
    """A new trading day: the daily loss is measured from `equity`, the order count restarts."""

    day: str  # ISO date of the trading day
    ends_ns: int  # its close
    equity: Decimal


@event("drawdown_reset", "{KIND}:{reset}")
class DrawdownReset(Event):
    """An operator's decision: measure the drawdown from `peak` (the equity now) on."""

    reset: int
    peak: Decimal
    reason: str = ""


@event("kill_switch_activated", "kill_switch:{activation}")
class KillSwitchActivated(Event):
    """From here until the state leaves HALTED, working orders are canceled and positions
    flattened, and again after every fill."""

    activation: int
    reason: str


@event("modify_denied", "{client_order_id}:{KIND}:{ts_ns}")
class ModifyDenied(Event):
    """A modification the risk engine refused; the order stays as it was (audit only)."""

    client_order_id: str
    check: str
    reason: str

