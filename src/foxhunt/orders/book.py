"""All orders of one account, by client order id, with the working exposure per instrument.

The book changes only through `apply(event)`. It keeps, per symbol, the contracts that working
orders could still buy and sell, so a risk check reads exposure in O(1).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from foxhunt.orders.errors import DuplicateOrderError, UnknownOrderError
from foxhunt.orders.events import OrderEvent, OrderInitialized
from foxhunt.orders.order import Order


class OrderBook:
    def __init__(self) -> None:
        self._orders: dict[str, Order] = {}
        self._working: dict[str, Order] = {}
        self._buying: dict[str, int] = {}  # symbol -> leaves of working buy orders
        self._selling: dict[str, int] = {}  # symbol -> leaves of working sell orders

    def __len__(self) -> int:
        return len(self._orders)

    def __contains__(self, client_order_id: str) -> bool:
        return client_order_id in self._orders

    def __iter__(self) -> Iterator[Order]:
        return iter(self._orders.values())

    def get(self, client_order_id: str) -> Order:
        try:
            return self._orders[client_order_id]
        except KeyError:
            raise UnknownOrderError(f"unknown client order id {client_order_id!r}") from None

    def working(self, symbol: str | None = None) -> list[Order]:
        """Orders that can still fill, in the order they were created."""
        return [o for o in self._working.values() if symbol is None or o.symbol == symbol]

    def working_buy_qty(self, symbol: str) -> int:
        return self._buying.get(symbol, 0)

    def working_sell_qty(self, symbol: str) -> int:
        return self._selling.get(symbol, 0)

    def apply(self, event: OrderEvent) -> Order:
        if isinstance(event, OrderInitialized):
            if event.client_order_id in self._orders:
                raise DuplicateOrderError(
                    f"client order id {event.client_order_id!r} is already used by "
                    f"{self._orders[event.client_order_id]!r}"
                )
            order = Order(event)
            self._orders[order.client_order_id] = order
            return order
        order = self.get(event.client_order_id)
        before = order.signed_leaves
        order.apply(event)
        self._account(order, before)
        return order

    def _account(self, order: Order, before: int) -> None:
        after = order.signed_leaves
        if after == before:
            if order.is_working:
                self._working[order.client_order_id] = order
            return
        side_book = self._buying if order.side.sign > 0 else self._selling
        side_book[order.symbol] = side_book.get(order.symbol, 0) + abs(after) - abs(before)
        if order.is_working:
            self._working[order.client_order_id] = order
        else:
            self._working.pop(order.client_order_id, None)

    def snapshot(self) -> dict[str, Any]:
        return {
            "orders": {cid: o.snapshot() for cid, o in self._orders.items()},
            "working": list(self._working),
            "buying": {k: v for k, v in sorted(self._buying.items()) if v},
            "selling": {k: v for k, v in sorted(self._selling.items()) if v},
        }
