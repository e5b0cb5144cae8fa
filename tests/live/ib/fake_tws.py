"""A fake of TWS's socket API protocol for tests: not TWS, and no market.

It listens on 127.0.0.1 and speaks the wire protocol ib_async 2.1 speaks, at server version 178
(messages are a 4-byte big-endian length, then fields, each ended by a NUL). Field orders are
those of ib_async's `client.py` (what it sends) and `decoder.py` (what it reads) at that
version; a field the tests do not need is sent empty, which the decoder reads as unset.

Implemented:
- handshake: "API\\0" + "v<min>..<max>" -> server version + connection time; startApi ->
  nextValidId + managedAccounts; a client id already connected gets error 326 and is closed;
- placeOrder (new: openOrder + orderStatus Submitted; the same orderId again: a modification,
  openOrder + orderStatus with the new terms), cancelOrder (error 202 + orderStatus Cancelled,
  or 10147 / 161 when there is nothing to cancel);
- reqOpenOrders / reqAllOpenOrders (openOrder + orderStatus each, openOrderEnd),
  reqCompletedOrders (completedOrder each, completedOrdersEnd), reqExecutions (execDetails +
  commissionReport each, execDetailsEnd), reqPositions (position each, positionEnd),
  reqContractDetails (contractDetails + contractDetailsEnd, or error 200), reqRealTimeBars /
  cancelRealTimeBars (realtimeBar on `bar`), reqAccountUpdates(Multi) (their end only), reqIds,
  reqCurrentTime.
Scripted from the test's thread: a market price that fills market orders at once, `fill` (whole
or partial executions), `reject_next` / `reject_modifies` (an error code instead of the
order), `cancel_by_ib`, `resend_execution`, `correct_execution`, `drop` (close every
connection, as a TWS restart does), `link` (errors 1100 / 1102), `bar`.
Not implemented: market data, account values, what-if orders, combos, algos, order
conditions, FA allocations, TWS's own pacing and order validation (any order is taken).
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SERVER_VERSION = 178
CONNECTED_AT = "20240305 14:00:00 UTC"

# What placeOrder carries, by index (client.placeOrder at server version 178).
P_ORDER_ID, P_CONTRACT, P_ACTION, P_QTY, P_TYPE, P_LMT, P_AUX, P_TIF = 1, 2, 16, 17, 18, 19, 20, 21
P_ACCOUNT, P_REF, P_OUTSIDE_RTH = 23, 26, 33
CONTRACT_FIELDS = ("conId", "symbol", "secType", "lastTradeDateOrContractMonth", "strike", "right",
                   "multiplier", "exchange", "primaryExchange", "currency", "localSymbol",
                   "tradingClass")  # fmt: skip
# Messages the fake writes, field by field (decoder.py at server version 178; >= 177 has no
# faProfile). Counts of repeated groups (legs, params, conditions) are sent as 0.
SHORT_CONTRACT = ("conId", "symbol", "secType", "lastTradeDateOrContractMonth", "strike", "right",
                  "multiplier", "exchange", "currency", "localSymbol", "tradingClass")  # fmt: skip
OPEN_ORDER = (
    "msgId", "orderId", *SHORT_CONTRACT, "action", "totalQuantity", "orderType", "lmtPrice",
    "auxPrice", "tif", "ocaGroup", "account", "openClose", "origin", "orderRef", "clientId",
    "permId", "outsideRth", "hidden", "discretionaryAmt", "goodAfterTime", "sharesAllocation",
    "faGroup", "faMethod", "faPercentage", "modelCode", "goodTillDate", "rule80A",
    "percentOffset", "settlingFirm", "shortSaleSlot", "designatedLocation", "exemptCode",
    "auctionStrategy", "startingPrice", "stockRefPrice", "delta", "stockRangeLower",
    "stockRangeUpper", "displaySize", "blockOrder", "sweepToFill", "allOrNone", "minQty",
    "ocaType", "eTradeOnly", "firmQuoteOnly", "nbboPriceCap", "parentId", "triggerMethod",
    "volatility", "volatilityType", "deltaNeutralOrderType", "deltaNeutralAuxPrice",
    "continuousUpdate", "referencePriceType", "trailStopPrice", "trailingPercent", "basisPoints",
    "basisPointsType", "comboLegsDescrip", "numLegs", "numOrderLegs", "numSmartComboParams",
    "scaleInitLevelSize", "scaleSubsLevelSize", "scalePriceIncrement", "hedgeType",
    "optOutSmartRouting", "clearingAccount", "clearingIntent", "notHeld", "dncPresent",
    "algoStrategy", "solicited", "whatIf", "status", "initMarginBefore", "maintMarginBefore",
    "equityWithLoanBefore", "initMarginChange", "maintMarginChange", "equityWithLoanChange",
    "initMarginAfter", "maintMarginAfter", "equityWithLoanAfter", "commission", "minCommission",
    "maxCommission", "commissionCurrency", "warningText", "randomizeSize", "randomizePrice",
    "numConditions", "adjustedOrderType", "triggerPrice", "trailStopPrice2", "lmtPriceOffset",
    "adjustedStopPrice", "adjustedStopLimitPrice", "adjustedTrailingAmount",
    "adjustableTrailingUnit", "softDollarTierName", "softDollarTierValue",
    "softDollarTierDisplayName", "cashQty", "dontUseAutoPriceForHedge", "isOmsContainer",
    "discretionaryUpToLimitPrice", "usePriceMgmtAlgo", "duration", "postToAts",
    "autoCancelParent", "minTradeQty", "minCompeteSize", "competeAgainstBestOffset",
    "midOffsetAtWhole", "midOffsetAtHalf",
)  # fmt: skip
COMPLETED_ORDER = (
    "msgId", *SHORT_CONTRACT, "action", "totalQuantity", "orderType", "lmtPrice", "auxPrice",
    "tif", "ocaGroup", "account", "openClose", "origin", "orderRef", "permId", "outsideRth",
    "hidden", "discretionaryAmt", "goodAfterTime", "faGroup", "faMethod", "faPercentage",
    "modelCode", "goodTillDate", "rule80A", "percentOffset", "settlingFirm", "shortSaleSlot",
    "designatedLocation", "exemptCode", "startingPrice", "stockRefPrice", "delta",
    "stockRangeLower", "stockRangeUpper", "displaySize", "sweepToFill", "allOrNone", "minQty",
    "ocaType", "triggerMethod", "volatility", "volatilityType", "deltaNeutralOrderType",
    "deltaNeutralAuxPrice", "continuousUpdate", "referencePriceType", "trailStopPrice",
    "trailingPercent", "comboLegsDescrip", "numLegs", "numOrderLegs", "numSmartComboParams",
    "scaleInitLevelSize", "scaleSubsLevelSize", "scalePriceIncrement", "hedgeType",
    "clearingAccount", "clearingIntent", "notHeld", "dncPresent", "algoStrategy", "solicited",
    "status", "randomizeSize", "randomizePrice", "numConditions", "trailStopPrice2",
    "lmtPriceOffset", "cashQty", "dontUseAutoPriceForHedge", "isOmsContainer", "autoCancelDate",
    "filledQuantity", "refFuturesConId", "autoCancelParent", "shareholder", "imbalanceOnly",
    "routeMarketableToBbo", "parentPermId", "completedTime", "completedStatus", "minTradeQty",
    "minCompeteSize", "competeAgainstBestOffset", "midOffsetAtWhole", "midOffsetAtHalf",
)  # fmt: skip
EXEC_DETAILS = (
    "msgId", "reqId", "orderId", *SHORT_CONTRACT, "execId", "time", "acctNumber", "execExchange",
    "side", "shares", "price", "permId", "clientId", "liquidation", "cumQty", "avgPrice",
    "orderRef", "evRule", "evMultiplier", "modelCode", "lastLiquidity", "pendingPriceRevision",
)  # fmt: skip
CONTRACT_DETAILS = (
    "msgId", "reqId", "symbol", "secType", "lastTimes", "strike", "right", "exchange", "currency",
    "localSymbol", "marketName", "tradingClass", "conId", "minTick", "multiplier", "orderTypes",
    "validExchanges", "priceMagnifier", "underConId", "longName", "primaryExchange",
    "contractMonth", "industry", "category", "subcategory", "timeZoneId", "tradingHours",
    "liquidHours", "evRule", "evMultiplier", "numSecIds", "aggGroup", "underSymbol",
    "underSecType", "marketRuleIds", "realExpirationDate", "stockType", "minSize",
    "sizeIncrement", "suggestedSizeIncrement",
)  # fmt: skip
COUNTS = {"numLegs": 0, "numOrderLegs": 0, "numSmartComboParams": 0, "dncPresent": 0,
          "numConditions": 0, "numSecIds": 0}  # fmt: skip
DONE = ("Filled", "Cancelled", "Inactive")
IN_USE = "Unable to connect as the client id is already in use. Retry with a unique client id."
NO_DEFINITION = "No security definition has been found for the request"
LINK_LOST = "Connectivity between IB and TWS has been lost."
LINK_BACK = "Connectivity between IB and TWS has been restored - data maintained."


def message(names: tuple[str, ...], **values: Any) -> list[Any]:
    """A message's fields in `names` order; what `values` does not give is empty."""
    unknown = set(values) - set(names)
    if unknown:
        raise KeyError(f"not fields of this message: {sorted(unknown)}")
    return [values.get(n, COUNTS.get(n, "")) for n in names]


@dataclass
class FakeContract:
    con_id: int
    symbol: str
    expiry: str  # YYYYMMDD
    exchange: str
    local_symbol: str
    multiplier: str = "50"
    currency: str = "USD"
    min_tick: float = 0.25

    def short(self) -> dict[str, Any]:
        return {"conId": self.con_id, "symbol": self.symbol, "secType": "FUT",
                "lastTradeDateOrContractMonth": self.expiry, "multiplier": self.multiplier,
                "exchange": self.exchange, "currency": self.currency,
                "localSymbol": self.local_symbol, "tradingClass": self.symbol}  # fmt: skip


@dataclass
class FakeOrder:
    client_id: int
    order_id: int
    perm_id: int
    contract: FakeContract
    action: str
    quantity: int
    order_type: str
    lmt: str
    aux: str
    tif: str
    account: str
    order_ref: str
    outside_rth: str
    status: str = "Submitted"
    filled: int = 0

    def fields(self) -> dict[str, Any]:
        return {**self.contract.short(), "action": self.action, "totalQuantity": self.quantity,
                "orderType": self.order_type, "lmtPrice": self.lmt, "auxPrice": self.aux,
                "tif": self.tif, "account": self.account, "orderRef": self.order_ref,
                "permId": self.perm_id, "outsideRth": self.outside_rth}  # fmt: skip


@dataclass
class FakeExecution:
    exec_id: str
    order: FakeOrder
    shares: int
    price: float
    cum_qty: int
    commission: float


class _Conn:
    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.client_id: int | None = None


class FakeTws:
    def __init__(self, contracts: list[FakeContract], account: str = "DU1234567",
                 commission: float = 2.05):  # fmt: skip
        self.contracts = {c.con_id: c for c in contracts}
        self.account, self.commission = account, commission
        self.market: dict[str, float] = {}  # symbol -> price market orders fill at, at once
        self.commission_reports = True
        self.orders: dict[tuple[int, int], FakeOrder] = {}
        self.executions: list[FakeExecution] = []
        self.positions: dict[int, int] = {}  # conId -> net contracts
        self.received: list[list[str]] = []  # every message a client sent, as fields
        self._reject: tuple[int, str] | None = None
        self._reject_modify: tuple[int, str] | None = None
        self._conns: list[_Conn] = []
        self._bars: dict[tuple[int, int], _Conn] = {}  # (conId, reqId) -> subscriber
        self._next_id: dict[int, int] = {}
        self._perm = self._exec_n = 1000
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-tws", daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    # --- running ------------------------------------------------------------------------------

    def start(self) -> FakeTws:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def shut() -> None:
            assert self._server is not None
            self._server.close()
            for conn in list(self._conns):
                conn.writer.close()

        self._run(shut())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(5)

    def _do(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on the fake's loop (where its state lives), from the test's thread."""

        async def run() -> Any:
            return fn(*args)

        return self._run(run())

    # --- the wire -----------------------------------------------------------------------------

    @staticmethod
    async def _read(reader: asyncio.StreamReader) -> bytes:
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        return await reader.readexactly(size)

    @staticmethod
    def _send(conn: _Conn, fields: list[Any]) -> None:
        data = "".join(f"{f}\0" for f in fields).encode()
        conn.writer.write(struct.pack(">I", len(data)) + data)

    def _to_client(self, client_id: int, fields: list[Any]) -> None:
        for conn in self._conns:
            if conn.client_id == client_id:
                self._send(conn, fields)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        try:
            if await reader.readexactly(4) != b"API\0":
                return
            lo, hi = (await self._read(reader)).decode().split()[0][1:].split("..")
            if not int(lo) <= SERVER_VERSION <= int(hi):
                return
            self._send(conn, [SERVER_VERSION, CONNECTED_AT])
            self._conns.append(conn)
            while True:
                fields = (await self._read(reader)).decode().split("\0")[:-1]
                self.received.append(fields)
                if not self._handle(conn, fields):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if conn in self._conns:
                self._conns.remove(conn)
            self._bars = {k: c for k, c in self._bars.items() if c is not conn}
            writer.close()

    def _handle(self, conn: _Conn, f: list[str]) -> bool:
        """One client message; False closes the connection."""
        msg = int(f[0])
        if msg == 71:  # startApi: version, clientId, optional capabilities
            client_id = int(f[2])
            if any(c.client_id == client_id for c in self._conns):
                self._send(conn, [4, 2, -1, 326, IN_USE, ""])
                return False
            conn.client_id = client_id
            self._send(conn, [9, 1, self._next_id.setdefault(client_id, 1)])
            self._send(conn, [15, 1, self.account])
        elif msg == 3:
            self._place(conn, f)
        elif msg == 4:  # cancelOrder: version, orderId, manualCancelOrderTime
            self._cancel(conn, int(f[2]))
        elif msg in (5, 16):  # reqOpenOrders, reqAllOpenOrders
            for o in self.orders.values():
                if o.status not in DONE and (msg == 16 or o.client_id == conn.client_id):
                    self._send(conn, self._open_order(o))
                    self._send(conn, self._order_status(o))
            self._send(conn, [53, 1])
        elif msg == 99:  # reqCompletedOrders: apiOnly
            for o in self.orders.values():
                if o.status in DONE:
                    self._send(conn, message(COMPLETED_ORDER, msgId=101, **o.fields(),
                                             status=o.status, filledQuantity=o.filled,
                                             completedStatus=o.status))  # fmt: skip
            self._send(conn, [102])
        elif msg == 7:  # reqExecutions: version, reqId, filter (clientId, account, ...)
            req_id = int(f[2])
            for ex in self.executions:
                if ex.order.client_id == conn.client_id:
                    self._send(conn, self._exec_details(ex, req_id))
                    self._send(conn, self._commission(ex))
            self._send(conn, [55, 1, req_id])
        elif msg == 61:  # reqPositions
            for con_id, qty in self.positions.items():
                c = self.contracts[con_id]
                self._send(conn, [61, 3, self.account, con_id, c.symbol, "FUT", c.expiry, "", "",
                                  c.multiplier, c.exchange, c.currency, c.local_symbol, c.symbol,
                                  qty, 0.0])  # fmt: skip
            self._send(conn, [62, 1])
        elif msg == 9:  # reqContractDetails: version, reqId, contract, includeExpired, ...
            self._contract_details(conn, int(f[2]), dict(zip(CONTRACT_FIELDS, f[3:15], strict=True)))
        elif msg == 50:  # reqRealTimeBars: version, reqId, contract, barSize, whatToShow, ...
            want = dict(zip(CONTRACT_FIELDS, f[3:15], strict=True))
            self._bars[(int(want["conId"] or 0), int(f[2]))] = conn
        elif msg == 51:  # cancelRealTimeBars
            self._bars = {k: c for k, c in self._bars.items() if k[1] != int(f[2])}
        elif msg == 6:  # reqAccountUpdates: the download ends at once (no values)
            self._send(conn, [54, 1, f[3]])
        elif msg == 76:  # reqAccountUpdatesMulti
            self._send(conn, [74, 1, f[2]])
        elif msg == 8:  # reqIds
            self._send(conn, [9, 1, self._next_id.get(conn.client_id or 0, 1)])
        elif msg == 49:  # reqCurrentTime
            self._send(conn, [49, 1, 1709647200])
        return True

    # --- orders -------------------------------------------------------------------------------

    def _find_contract(self, want: dict[str, str]) -> FakeContract | None:
        if want["conId"] not in ("", "0"):
            return self.contracts.get(int(want["conId"]))
        for c in self.contracts.values():
            if (c.symbol == want["symbol"] and want["exchange"] in ("", c.exchange)
                    and c.expiry.startswith(want["lastTradeDateOrContractMonth"])
                    and want["localSymbol"] in ("", c.local_symbol)):  # fmt: skip
                return c
        return None

    def _contract_details(self, conn: _Conn, req_id: int, want: dict[str, str]) -> None:
        c = self._find_contract(want)
        if c is None:
            self._send(conn, [4, 2, req_id, 200, NO_DEFINITION, ""])
            return
        self._send(conn, message(
            CONTRACT_DETAILS, msgId=10, reqId=req_id, symbol=c.symbol, secType="FUT",
            lastTimes=c.expiry, exchange=c.exchange, currency=c.currency,
            localSymbol=c.local_symbol, marketName=c.symbol, tradingClass=c.symbol,
            conId=c.con_id, minTick=c.min_tick, multiplier=c.multiplier,
            orderTypes="LMT,MKT,MOC,STP", validExchanges=c.exchange, longName=c.symbol,
            contractMonth=c.expiry[:6], timeZoneId="US/Central", realExpirationDate=c.expiry,
        ))  # fmt: skip
        self._send(conn, [52, 1, req_id])

    def _open_order(self, o: FakeOrder) -> list[Any]:
        return message(OPEN_ORDER, msgId=5, orderId=o.order_id, **o.fields(),
                       clientId=o.client_id, status=o.status)  # fmt: skip

    @staticmethod
    def _order_status(o: FakeOrder) -> list[Any]:
        return [3, o.order_id, o.status, o.filled, o.quantity - o.filled, 0, o.perm_id, 0, 0,
                o.client_id, "", 0]  # fmt: skip

    def _error(self, client_id: int, req_id: int, code: int, text: str) -> None:
        self._to_client(client_id, [4, 2, req_id, code, text, ""])

    def _place(self, conn: _Conn, f: list[str]) -> None:
        client_id, order_id = conn.client_id or 0, int(f[P_ORDER_ID])
        self._next_id[client_id] = max(self._next_id.get(client_id, 1), order_id + 1)
        old = self.orders.get((client_id, order_id))
        if old is not None:
            if self._reject_modify is not None:
                self._error(client_id, order_id, *self._reject_modify)
                return
            old.quantity, old.lmt, old.aux = int(float(f[P_QTY])), f[P_LMT], f[P_AUX]
            self._to_client(client_id, self._open_order(old))
            self._to_client(client_id, self._order_status(old))
            return
        contract = self._find_contract(dict(zip(CONTRACT_FIELDS, f[2:14], strict=True)))
        if contract is None:
            self._error(client_id, order_id, 200, NO_DEFINITION)
            return
        self._perm += 1
        o = FakeOrder(client_id, order_id, self._perm, contract, f[P_ACTION], int(float(f[P_QTY])),
                      f[P_TYPE], f[P_LMT], f[P_AUX], f[P_TIF], f[P_ACCOUNT], f[P_REF],
                      f[P_OUTSIDE_RTH])  # fmt: skip
        self.orders[(client_id, order_id)] = o
        if self._reject is not None:
            (code, text), self._reject = self._reject, None
            o.status = "Inactive"
            self._error(client_id, order_id, code, text)
            self._to_client(client_id, self._order_status(o))
            return
        self._to_client(client_id, self._open_order(o))
        self._to_client(client_id, self._order_status(o))
        price = self.market.get(contract.symbol)
        if o.order_type == "MKT" and price is not None:
            self._execute(o, o.quantity, price)

    def _cancel(self, conn: _Conn, order_id: int) -> None:
        client_id = conn.client_id or 0
        o = self.orders.get((client_id, order_id))
        if o is None:
            self._error(client_id, order_id, 10147, f"OrderId {order_id} that needs to be "
                        "cancelled is not found.")  # fmt: skip
        elif o.status in DONE:
            self._error(client_id, order_id, 161, "Cancel attempted when order is not in a "
                        f"cancellable state.  Order permId ={o.perm_id}")  # fmt: skip
        else:
            self._end(o, 202, "Order Canceled - reason:")

    def _end(self, o: FakeOrder, code: int, text: str) -> None:
        o.status = "Cancelled"
        self._error(o.client_id, o.order_id, code, text)
        self._to_client(o.client_id, self._order_status(o))

    def _execute(self, o: FakeOrder, shares: int, price: float) -> FakeExecution:
        self._exec_n += 1
        o.filled += shares
        ex = FakeExecution(f"0000e0d5.{self._exec_n:08x}.01.01", o, shares, price, o.filled,
                           self.commission * shares)  # fmt: skip
        self.executions.append(ex)
        sign = 1 if o.action == "BUY" else -1
        self.positions[o.contract.con_id] = self.positions.get(o.contract.con_id, 0) + sign * shares
        self._to_client(o.client_id, self._exec_details(ex, -1))
        if self.commission_reports:
            self._to_client(o.client_id, self._commission(ex))
        if o.filled == o.quantity:
            o.status = "Filled"
        self._to_client(o.client_id, self._order_status(o))
        return ex

    def _exec_details(self, ex: FakeExecution, req_id: int) -> list[Any]:
        o = ex.order
        return message(
            EXEC_DETAILS, msgId=11, reqId=req_id, orderId=o.order_id, **o.contract.short(),
            execId=ex.exec_id, time="20240305 14:00:01 UTC", acctNumber=o.account,
            execExchange=o.contract.exchange, side="BOT" if o.action == "BUY" else "SLD",
            shares=ex.shares, price=ex.price, permId=o.perm_id, clientId=o.client_id,
            cumQty=ex.cum_qty, avgPrice=ex.price, orderRef=o.order_ref, lastLiquidity=1,
        )  # fmt: skip

    def _commission(self, ex: FakeExecution) -> list[Any]:
        return [59, 1, ex.exec_id, ex.commission, ex.order.contract.currency, "", "", ""]

    # --- the test's script (thread-safe) ------------------------------------------------------

    def order(self, order_ref: str) -> FakeOrder:
        found = [o for o in self.orders.values() if o.order_ref == order_ref]
        if len(found) != 1:
            raise KeyError(f"{len(found)} orders with orderRef {order_ref!r}")
        return found[0]

    def fill(self, order_ref: str, shares: int, price: float) -> str:
        """An execution of `shares` of the order at `price`; its execId."""
        return self._do(lambda: self._execute(self.order(order_ref), shares, price).exec_id)

    def reject_next(self, code: int = 201, text: str = "Order rejected - reason: margin") -> None:
        self._do(setattr, self, "_reject", (code, text))

    def reject_modifies(self, code: int | None = 201, text: str = "Order rejected") -> None:
        self._do(setattr, self, "_reject_modify", None if code is None else (code, text))

    def cancel_by_ib(self, order_ref: str, code: int = 202,
                     text: str = "Order Canceled - reason: expired") -> None:  # fmt: skip
        self._do(lambda: self._end(self.order(order_ref), code, text))

    def resend_execution(self, exec_id: str) -> None:
        """The same execDetails and commissionReport again, as TWS may after a hiccup."""

        def resend() -> None:
            (ex,) = [e for e in self.executions if e.exec_id == exec_id]
            self._to_client(ex.order.client_id, self._exec_details(ex, -1))
            self._to_client(ex.order.client_id, self._commission(ex))

        self._do(resend)

    def correct_execution(self, exec_id: str, price: float) -> str:
        """IB's correction of an execution: the same id, its last part counted up."""

        def correct() -> str:
            (ex,) = [e for e in self.executions if e.exec_id == exec_id]
            head, n = exec_id.rsplit(".", 1)
            fixed = FakeExecution(f"{head}.{int(n) + 1:02d}", ex.order, ex.shares, price,
                                  ex.cum_qty, ex.commission)  # fmt: skip
            self.executions.append(fixed)
            self._to_client(ex.order.client_id, self._exec_details(fixed, -1))
            return fixed.exec_id

        return self._do(correct)

    def drop(self) -> None:
        """Close every client connection (a TWS restart, a network drop)."""
        self._do(lambda: [c.writer.close() for c in list(self._conns)])

    def link(self, up: bool) -> None:
        """TWS's own link to IB's servers: error 1100 (lost) or 1102 (restored)."""
        code, text = (1102, LINK_BACK) if up else (1100, LINK_LOST)
        self._do(lambda: [self._send(c, [4, 2, -1, code, text, ""]) for c in self._conns])

    def bar(self, symbol: str, start_s: int, o: float, h: float, low: float, c: float,
            volume: float = 1.0) -> None:  # fmt: skip
        """A 5-second TRADES bar starting at `start_s` to every subscriber of `symbol`."""

        def send() -> None:
            for (con_id, req_id), conn in self._bars.items():
                if self.contracts[con_id].symbol == symbol:
                    self._send(conn, [50, 3, req_id, start_s, o, h, low, c, volume, c, 1])

        self._do(send)

    def connected_clients(self) -> list[int]:
        return self._do(lambda: [c.client_id for c in self._conns if c.client_id is not None])

    def sent_orders(self) -> list[list[str]]:
        return self._do(lambda: [f for f in self.received if f[0] == "3"])
