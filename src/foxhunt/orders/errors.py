"""Errors of the trading core. Each message is one line: what, which order or limit, what now."""

from __future__ import annotations

from foxhunt.errors import FoxhuntError


class TradingError(FoxhuntError):
    """Base of every error raised by orders, portfolio, risk and execution."""


class OrderRequestError(TradingError):
    """An order request is malformed (no quantity, a limit order without a price, ...)."""


class IllegalTransition(TradingError):
    """An event that the order's state machine does not allow; it was not applied."""

    def __init__(self, client_order_id: str, state: str, event: str, detail: str = ""):
        self.client_order_id, self.state, self.event = client_order_id, state, event
        tail = f": {detail}" if detail else ""
        super().__init__(f"order {client_order_id}: {event} is illegal in state {state}{tail}")


class DuplicateOrderError(TradingError):
    """A client order id already used by a different order."""


class UnknownOrderError(TradingError):
    """A client order id that the order book does not hold."""
