"""Orders: the contract's exact prices, the order vocabulary, the state machine, order events,
the order aggregate and the order book. Imports only `data`, `errors` and `events` below it."""

from foxhunt.orders.book import OrderBook
from foxhunt.orders.contract import Contract
from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.errors import (
    DuplicateOrderError,
    IllegalTransition,
    OrderRequestError,
    TradingError,
    UnknownOrderError,
)
from foxhunt.orders.events import (
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderEvent,
    OrderExpired,
    OrderFilled,
    OrderInitialized,
    OrderModifyRejected,
    OrderPendingCancel,
    OrderPendingUpdate,
    OrderRejected,
    OrderSubmitted,
    OrderTriggered,
    OrderUpdated,
)
from foxhunt.orders.order import Order, OrderRequest
from foxhunt.orders.state import TERMINAL, TRANSITIONS, WORKING, OrderStatus, Trigger

__all__ = [
    "TERMINAL", "TRANSITIONS", "WORKING", "Contract", "DuplicateOrderError", "IllegalTransition",
    "Order", "OrderAccepted", "OrderBook", "OrderCancelRejected", "OrderCanceled", "OrderDenied",
    "OrderEvent", "OrderExpired", "OrderFilled", "OrderInitialized", "OrderModifyRejected",
    "OrderPendingCancel", "OrderPendingUpdate", "OrderRejected", "OrderRequest",
    "OrderRequestError", "OrderStatus", "OrderSubmitted", "OrderTriggered", "OrderType",
    "OrderUpdated", "Side", "TimeInForce", "TradingError", "Trigger", "UnknownOrderError",
]  # fmt: skip
