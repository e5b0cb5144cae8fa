"""A risk engine over an account and an order book, fed events the way the OMS feeds them."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from itertools import count

from foxhunt.events import Event
from foxhunt.orders import (
    Contract,
    OrderBook,
    OrderFilled,
    OrderInitialized,
    OrderSubmitted,
    OrderType,
    Side,
    TimeInForce,
)
from foxhunt.orders.events import OrderEvent
from foxhunt.portfolio import Account, AccountOpened, PriceMarked
from foxhunt.risk import RiskConfig, RiskEngine

ES = Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25"))
CL = Contract("CL", Decimal("0.01"), Decimal(1000), Decimal("2.50"))
ES_4500 = 18000  # 4500.00 in ES ticks
CL_80 = 8000  # 80.00 in CL ticks
SEC = 1_000_000_000


def months(*symbols: str) -> dict[str, Contract]:
    """ES's contract months (ESH24, ...) with ES's spec, as a rolling account holds them."""
    return {s: dataclasses.replace(ES, symbol=s) for s in symbols}


class Desk:
    def __init__(self, cash: str = "100000", contracts: dict[str, Contract] | None = None,
                 **limits):  # fmt: skip
        self.account = Account(contracts or {"ES": ES, "CL": CL})
        self.book = OrderBook()
        self.risk = RiskEngine(RiskConfig(**limits), self.account, self.book)
        self.ids = count(1)
        self.apply(AccountOpened(ts_ns=0, account="test", currency="USD",
                                 starting_cash=Decimal(cash)))  # fmt: skip

    def apply(self, event: Event) -> None:
        if isinstance(event, OrderEvent):
            self.book.apply(event)
        self.account.apply(event)
        self.risk.apply(event)

    def mark(self, symbol: str, ticks: int, ts: int = 1) -> None:
        self.apply(PriceMarked(ts_ns=ts, symbol=symbol, price_ticks=ticks))

    def order(self, qty: int, side: Side = Side.BUY, symbol: str = "ES", *,
              order_type: OrderType = OrderType.MARKET, limit: int | None = None,
              stop: int | None = None, reduce_only: bool = False, tag: str = "",
              ts: int = 1) -> OrderInitialized:  # fmt: skip
        return OrderInitialized(
            ts_ns=ts, client_order_id=f"c{next(self.ids)}", symbol=symbol, side=side,
            quantity=qty, order_type=order_type, time_in_force=TimeInForce.GTC,
            limit_ticks=limit, stop_ticks=stop, reduce_only=reduce_only, tag=tag,
        )  # fmt: skip

    def check(self, qty: int, side: Side = Side.BUY, symbol: str = "ES", ts: int = 1, **kw):
        return self.risk.check_order(self.order(qty, side, symbol, ts=ts, **kw), ts)

    def send(self, qty: int, side: Side = Side.BUY, symbol: str = "ES", ts: int = 1, **kw):
        """An order that passed: initialized and submitted (working, not filled)."""
        init = self.order(qty, side, symbol, ts=ts, **kw)
        self.apply(init)
        self.apply(OrderSubmitted(ts_ns=ts, client_order_id=init.client_order_id))
        return self.book.get(init.client_order_id)

    def hold(self, qty: int, symbol: str = "ES", price: int = ES_4500, ts: int = 1) -> None:
        """Fill a market order of `qty` signed contracts at `price`."""
        order = self.send(abs(qty), Side.of(qty), symbol, ts=ts)
        self.apply(OrderFilled(
            ts_ns=ts, client_order_id=order.client_order_id, fill_id="f", symbol=symbol,
            side=order.side, quantity=abs(qty), price_ticks=price, commission=Decimal(0),
        ))  # fmt: skip
