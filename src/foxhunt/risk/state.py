"""The trading state machine and the risk counters, folded from the event log.

`TRADING_TRANSITIONS[(from, to)]` says which causes may make a change: breakers halt or move
an ACTIVE account to REDUCING (`on_breach`), the kill switch halts; leaving HALTED or REDUCING
is an operator's (MANUAL) decision. Anything else raises `IllegalTradingStateChange`.
"""

from __future__ import annotations

from collections import deque
from decimal import Decimal
from typing import Any

from foxhunt.events import Event
from foxhunt.orders.errors import TradingError
from foxhunt.orders.events import OrderFilled, OrderPendingUpdate, OrderSubmitted
from foxhunt.portfolio.account import Account
from foxhunt.portfolio.events import AccountOpened, PositionAdopted, PriceMarked
from foxhunt.risk.events import (
    Cause,
    DrawdownReset,
    KillSwitchActivated,
    TradingDayStarted,
    TradingState,
    TradingStateChanged,
)

A, R, H = TradingState.ACTIVE, TradingState.REDUCING, TradingState.HALTED
_ANY = frozenset(Cause)
_MANUAL = frozenset({Cause.MANUAL})

TRADING_TRANSITIONS: dict[tuple[TradingState, TradingState], frozenset[Cause]] = {
    (A, R): frozenset({Cause.MANUAL, Cause.BREAKER}),
    (A, H): _ANY,
    (R, A): _MANUAL,
    (R, H): _ANY,
    (H, R): _MANUAL,
    (H, A): _MANUAL,
}


class IllegalTradingStateChange(TradingError):
    pass


def check_trading_transition(previous: TradingState, state: TradingState, cause: Cause) -> None:
    causes = TRADING_TRANSITIONS.get((previous, state))
    if causes is None or cause not in causes:
        allowed = ", ".join(sorted(str(c) for c in causes)) if causes else "nothing"
        raise IllegalTradingStateChange(
            f"trading state {previous} -> {state} by {cause} is not allowed (allowed by: {allowed})"
        )


class RiskState:
    """Everything the risk checks remember, changed only by `apply(event)`."""

    def __init__(self, rate_window_ns: int):
        self.rate_window_ns = rate_window_ns
        self.trading_state = TradingState.ACTIVE
        self.changes = 0
        self.cause: Cause | None = None
        self.reason = ""
        self.day = ""
        self.day_end_ns = 0  # the current trading day's close; 0 before the first day
        self.day_start_equity = Decimal(0)
        self.peak_equity = Decimal(0)
        self.sent: deque[int] = deque()  # send times of orders and modifications in the window
        self.orders_today = 0
        self.kill_active = False
        self.kills = 0
        self.drawdown_resets = 0

    def apply(self, event: Event, account: Account) -> None:
        if type(event) is PriceMarked or isinstance(event, OrderFilled | PositionAdopted):
            equity = account.equity()
            self.peak_equity = max(self.peak_equity, equity)
        elif isinstance(event, (OrderSubmitted, OrderPendingUpdate)):
            sent, start = self.sent, event.ts_ns - self.rate_window_ns
            sent.append(event.ts_ns)
            while sent and sent[0] <= start:
                sent.popleft()
            if isinstance(event, OrderSubmitted):
                self.orders_today += 1
        elif isinstance(event, TradingStateChanged):
            self.trading_state = event.state
            self.changes = event.change
            self.cause, self.reason = event.cause, event.reason
            if event.state is not TradingState.HALTED:
                self.kill_active = False
        elif isinstance(event, TradingDayStarted):
            self.day, self.day_end_ns = event.day, event.ends_ns
            self.day_start_equity = event.equity
            self.orders_today = 0
        elif isinstance(event, KillSwitchActivated):
            self.kill_active = True
            self.kills = event.activation
        elif isinstance(event, DrawdownReset):
            self.peak_equity = event.peak
            self.drawdown_resets = event.reset
        elif isinstance(event, AccountOpened):
            self.day_start_equity = self.peak_equity = event.starting_cash

    def sent_in_window(self, ts_ns: int) -> int:
        start = ts_ns - self.rate_window_ns
        old = 0
        for t in self.sent:
            if t > start:
                break
            old += 1
        return len(self.sent) - old

    def snapshot(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k != "sent"}
        out["sent"] = list(self.sent)
        return out
