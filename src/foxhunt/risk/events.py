"""Risk events: trading-state changes, trading days, drawdown resets, the kill switch."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import ClassVar

from foxhunt.orders.events import Event


class TradingState(str, Enum):
    ACTIVE = "ACTIVE"  # every check applies
    REDUCING = "REDUCING"  # only orders that reduce a position pass
    HALTED = "HALTED"  # nothing passes but the kill switch's flatten orders

    def __str__(self) -> str:
        return self.value


class Cause(str, Enum):
    MANUAL = "MANUAL"  # an operator or the strategy's supervisor
    BREAKER = "BREAKER"  # the daily-loss or drawdown circuit breaker
    KILL_SWITCH = "KILL_SWITCH"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, kw_only=True)
class TradingStateChanged(Event):
    KIND: ClassVar[str] = "trading_state_changed"
    change: int  # the n-th change of the account's trading state, from 1
    previous: TradingState
    state: TradingState
    cause: Cause
    check: str = ""  # the breaker's config key when cause is BREAKER
    reason: str = ""

    @property
    def event_id(self) -> str:
        return f"trading_state:{self.change}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TradingDayStarted(Event):
    """A new trading day: the daily loss is measured from `equity`, the order count restarts."""

    KIND: ClassVar[str] = "trading_day_started"
    day: str  # ISO date of the trading day
    ends_ns: int  # its close
    equity: Decimal

    @property
    def event_id(self) -> str:
        return f"trading_day:{self.day}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DrawdownReset(Event):
    """An operator's decision: measure the drawdown from `peak` (the equity now) on."""

    KIND: ClassVar[str] = "drawdown_reset"
    reset: int
    peak: Decimal
    reason: str = ""

    @property
    def event_id(self) -> str:
        return f"drawdown_reset:{self.reset}"


@dataclass(frozen=True, slots=True, kw_only=True)
class KillSwitchActivated(Event):
    """From here until the state leaves HALTED, working orders are canceled and positions
    flattened, and again after every fill."""

    KIND: ClassVar[str] = "kill_switch_activated"
    activation: int
    reason: str

    @property
    def event_id(self) -> str:
        return f"kill_switch:{self.activation}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModifyDenied(Event):
    """A modification the risk engine refused; the order stays as it was (audit only)."""

    KIND: ClassVar[str] = "modify_denied"
    client_order_id: str
    check: str
    reason: str

    @property
    def event_id(self) -> str:
        return f"{self.client_order_id}:modify_denied:{self.ts_ns}"


RISK_EVENTS: tuple[type[Event], ...] = (
    TradingStateChanged,
    TradingDayStarted,
    DrawdownReset,
    KillSwitchActivated,
    ModifyDenied,
)
