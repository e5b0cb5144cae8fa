"""Our orders and prices <-> ib_async's objects: pure functions, no connection.

Order types (IB names, https://www.interactivebrokers.com/en/trading/orders.php):

| ours                 | IB orderType | IB tif | price field |
|----------------------|--------------|--------|-------------|
| MARKET DAY/GTC/IOC   | MKT          | same   |             |
| LIMIT  DAY/GTC/IOC   | LMT          | same   | lmtPrice    |
| STOP   DAY/GTC       | STP          | same   | auxPrice    |
| MARKET ATC           | MOC          | DAY    |             |

At the close is IB's market-on-close order type (MOC): IB has no at-the-close time in force
for futures (OPG is at the open). Exchanges that do not take MOC futures orders (most CME
products route them as IB-simulated; some refuse them) answer with an error, which arrives as
`Rejected`. Our client order id travels in `orderRef`, which IB keeps on the order, its
executions and its completed record.
"""

from __future__ import annotations

import logging
import math
from decimal import Decimal

import ib_async

from foxhunt.live.ib.config import IbFuture
from foxhunt.live.ib.journal import SentOrder
from foxhunt.orders.contract import Contract, to_decimal
from foxhunt.orders.enums import OrderType, Side, TimeInForce

log = logging.getLogger(__name__)

ORDER_TYPES = {OrderType.MARKET: "MKT", OrderType.LIMIT: "LMT", OrderType.STOP: "STP"}
TIFS = {TimeInForce.DAY: "DAY", TimeInForce.GTC: "GTC", TimeInForce.IOC: "IOC"}

# IB order statuses (ib_async.OrderStatus): what each says about the order.
WORKING_STATUSES = frozenset({"PreSubmitted", "Submitted"})  # at IB / at the exchange
CANCELED_STATUSES = frozenset({"Cancelled", "ApiCancelled"})
INACTIVE = "Inactive"  # IB took it but it does not work: rejected, or held (see the venue)
FILLED = "Filled"

# IB error codes (https://www.interactivebrokers.com/campus/ibkr-api-page/tws-api-error-codes/)
INFO_CODES = frozenset({399, 404, 10167, *range(2100, 2200)})  # notices: the order is unchanged
CANCELED_CODE = 202  # "Order Canceled - reason: ..." (on request or by IB)
CANCEL_REJECT_CODES = frozenset({161, 10147, 10148})  # not cancellable / not found
GONE_CODES = frozenset({201, 203})  # a working order rejected or refused after it was taken
LINK_LOST, LINK_BACK_LOST_DATA, LINK_BACK = 1100, 1101, 1102  # TWS <-> IB servers
CLIENT_ID_IN_USE = 326


def ib_contract(symbol: str, fut: IbFuture) -> ib_async.Future:
    """The IB contract `fut` describes (qualify it with IB before use: it fills in conId)."""
    return ib_async.Future(
        symbol=fut.root or symbol, lastTradeDateOrContractMonth=fut.expiry,
        exchange=fut.exchange, localSymbol=fut.local_symbol, multiplier=fut.multiplier,
        currency=fut.currency, conId=fut.con_id, tradingClass=fut.trading_class,
    )  # fmt: skip


def ib_order(sent: SentOrder, contract: Contract, account: str, outside_rth: bool) -> ib_async.Order:
    """The IB order for one of ours, named by our client order id in `orderRef`. A
    modification is the same order with new terms sent again under the same orderId."""
    out = ib_async.Order(
        orderId=sent.order_id, action=sent.side.value, totalQuantity=float(sent.quantity),
        account=account, orderRef=sent.client_order_id, transmit=True, outsideRth=outside_rth,
    )  # fmt: skip
    if sent.time_in_force is TimeInForce.ATC:
        out.orderType, out.tif = "MOC", "DAY"
        return out
    out.orderType, out.tif = ORDER_TYPES[sent.order_type], TIFS[sent.time_in_force]
    if sent.limit_ticks is not None:
        out.lmtPrice = contract.price_float(sent.limit_ticks)
    if sent.stop_ticks is not None:
        out.auxPrice = contract.price_float(sent.stop_ticks)
    return out


def our_kind(order: ib_async.Order) -> tuple[OrderType, TimeInForce]:
    """Our order type and time in force of an IB order (one we did not send: GTC unless IB's
    tif is one of ours)."""
    if order.orderType == "MOC":
        return OrderType.MARKET, TimeInForce.ATC
    kind = {v: k for k, v in ORDER_TYPES.items()}.get(order.orderType, OrderType.MARKET)
    tif = {v: k for k, v in TIFS.items()}.get(order.tif, TimeInForce.GTC)
    return kind, tif


def price_ticks(contract: Contract, price: float, what: str) -> int:
    """Ticks of a price IB sent; an off-grid price (IB's float noise aside) is logged and
    rounded to the nearest tick."""
    ticks = contract.to_ticks(price)
    if not math.isclose(float(contract.price(ticks)), price, rel_tol=1e-9, abs_tol=1e-12):
        log.warning("IB %s %s price %r is off the %s tick grid; taken as %s", contract.symbol,
                    what, price, contract.tick_size, contract.price(ticks))  # fmt: skip
    return ticks


def set_price(value: float | Decimal | None) -> bool:
    """Whether an IB price field holds a price (IB's unset double is 1.79e308)."""
    return value is not None and math.isfinite(float(value)) and float(value) < 1e300


def order_terms(order: ib_async.Order, contract: Contract) -> tuple[int, int | None, int | None]:
    """(quantity, limit ticks, stop ticks) of an IB order, as our order holds them."""
    limit = price_ticks(contract, float(order.lmtPrice), "limit") if (
        order.orderType == "LMT" and set_price(order.lmtPrice)) else None  # fmt: skip
    stop = price_ticks(contract, float(order.auxPrice), "stop") if (
        order.orderType == "STP" and set_price(order.auxPrice)) else None  # fmt: skip
    return whole(order.totalQuantity, "order quantity"), limit, stop


def whole(value: float | Decimal, what: str) -> int:
    """A contract count IB sent as a float; ValueError when it is not whole."""
    n = float(value)
    if not math.isfinite(n) or n != int(n):
        raise ValueError(f"IB {what} {value!r} is not a whole number of contracts")
    return int(n)


def side_of(action: str) -> Side:
    """Our side of an IB order action (BUY/SELL) or execution side (BOT/SLD)."""
    return Side.BUY if action in ("BUY", "BOT") else Side.SELL


def commission(amount: float, currency: str, contract: Contract) -> Decimal | None:
    """An execution's commission from IB's commission report; None (the contract's own
    commission) when IB sent none or charged it in another currency."""
    if not set_price(amount) or amount < 0:
        return None
    if currency and currency != contract.currency:
        log.warning("IB commission %s %s on a %s contract (%s): the contract's commission is used",
                    amount, currency, contract.currency, contract.symbol)  # fmt: skip
        return None
    return to_decimal(amount)


def status_state(ib_status: str) -> str | None:
    """Our status-report state (venue.STATUS_STATES) of an IB order status; None while IB has
    not decided (PendingSubmit, ApiPending, PendingCancel)."""
    if ib_status in WORKING_STATUSES:
        return "working"
    if ib_status == FILLED:
        return "filled"
    if ib_status in CANCELED_STATUSES:
        return "canceled"
    if ib_status == INACTIVE:
        return "rejected"
    return None


def exec_base(exec_id: str) -> str:
    """An execution id without its revision: IB corrects an execution by sending it again
    with the last part counted up ("0000e0d5.65f1.01.01" -> ".01.02")."""
    return exec_id.rsplit(".", 1)[0] if exec_id.count(".") >= 2 else exec_id
