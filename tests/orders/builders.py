"""Small builders for order tests: an ES-like contract and one event of each kind."""

from __future__ import annotations

from decimal import Decimal

from foxhunt.orders import (
    Contract,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderExpired,
    OrderFilled,
    OrderInitialized,
    OrderModifyRejected,
    OrderPendingCancel,
    OrderPendingUpdate,
    OrderRejected,
    OrderSubmitted,
    OrderTriggered,
    OrderType,
    OrderUpdated,
    Side,
    TimeInForce,
)

ES = Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25"))
CID = "T-1"


def init(
    qty: int = 5,
    side: Side = Side.BUY,
    order_type: OrderType = OrderType.LIMIT,
    limit: int | None = 18000,
    stop: int | None = None,
    cid: str = CID,
    symbol: str = "ES",
    tif: TimeInForce = TimeInForce.GTC,
    reduce_only: bool = False,
    ts: int = 1,
) -> OrderInitialized:
    if order_type is OrderType.STOP and stop is None:
        stop, limit = 17990, None
    if order_type is OrderType.MARKET:
        limit = None
    return OrderInitialized(
        ts_ns=ts, client_order_id=cid, symbol=symbol, side=side, quantity=qty,
        order_type=order_type, time_in_force=tif, limit_ticks=limit, stop_ticks=stop,
        reduce_only=reduce_only,
    )  # fmt: skip


def fill(qty: int, price: int = 18000, fill_id: str = "f1", side: Side = Side.BUY, cid: str = CID,
         symbol: str = "ES", ts: int = 5) -> OrderFilled:  # fmt: skip
    return OrderFilled(
        ts_ns=ts, client_order_id=cid, fill_id=fill_id, symbol=symbol, side=side, quantity=qty,
        price_ticks=price, commission=Decimal("2.25") * qty,
    )  # fmt: skip


def submitted(cid: str = CID, ts: int = 2) -> OrderSubmitted:
    return OrderSubmitted(ts_ns=ts, client_order_id=cid)


def accepted(cid: str = CID, ts: int = 3) -> OrderAccepted:
    return OrderAccepted(ts_ns=ts, client_order_id=cid, venue_order_id="V1")


def simple(kind: str, cid: str = CID, ts: int = 4, request: int = 1, qty: int | None = None):
    """One event of `kind` with plain defaults."""
    make = {
        "denied": lambda: OrderDenied(ts_ns=ts, client_order_id=cid, check="x", reason="no"),
        "submitted": lambda: submitted(cid, ts),
        "accepted": lambda: accepted(cid, ts),
        "rejected": lambda: OrderRejected(ts_ns=ts, client_order_id=cid, reason="venue says no"),
        "triggered": lambda: OrderTriggered(ts_ns=ts, client_order_id=cid),
        "pending_update": lambda: OrderPendingUpdate(
            ts_ns=ts, client_order_id=cid, request=request, quantity=qty
        ),
        "pending_cancel": lambda: OrderPendingCancel(ts_ns=ts, client_order_id=cid, request=request),
        "updated": lambda: OrderUpdated(
            ts_ns=ts, client_order_id=cid, update_id=f"u{request}", quantity=qty or 5
        ),
        "modify_rejected": lambda: OrderModifyRejected(
            ts_ns=ts, client_order_id=cid, request=request, reason="too late"
        ),
        "cancel_rejected": lambda: OrderCancelRejected(
            ts_ns=ts, client_order_id=cid, request=request, reason="too late"
        ),
        "canceled": lambda: OrderCanceled(ts_ns=ts, client_order_id=cid),
        "expired": lambda: OrderExpired(ts_ns=ts, client_order_id=cid),
    }
    return make[kind]()
