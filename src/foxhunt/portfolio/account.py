"""The account: cash, positions, last prices, and equity, folded from fills and marks.

Money follows futures accounting: the balance is the starting cash plus realised PnL minus
commissions; equity adds the open positions' unrealised PnL at the last prices. (`env/fills.py`
keeps cash as the flows of notional instead; both give the same equity at the same marks.)
A fill also marks its instrument at the fill price: it is a trade we know of.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from foxhunt.errors import UnknownSymbolError
from foxhunt.events import Event
from foxhunt.orders.contract import Contract
from foxhunt.orders.errors import TradingError
from foxhunt.orders.events import OrderFilled
from foxhunt.portfolio.events import AccountOpened, PositionAdopted, PriceMarked
from foxhunt.portfolio.position import Position


class Account:
    def __init__(self, contracts: Mapping[str, Contract]):
        self.contracts = dict(contracts)
        self._tick_value = {s: c.tick_value for s, c in self.contracts.items()}
        self._balance = Decimal(0)
        self.name = ""
        self.currency = ""
        self.starting_cash = Decimal(0)
        self.realised = Decimal(0)  # closed PnL, before commission
        self.commissions = Decimal(0)
        self.positions: dict[str, Position] = {}
        self.marks: dict[str, int] = {}  # symbol -> last price in ticks
        self.mark_ts: dict[str, int] = {}

    @property
    def is_open(self) -> bool:
        return bool(self.currency)

    def contract(self, symbol: str) -> Contract:
        try:
            return self.contracts[symbol]
        except KeyError:
            raise UnknownSymbolError(
                f"no contract spec for {symbol!r} in account {self.name!r}"
            ) from None

    def position(self, symbol: str) -> int:
        pos = self.positions.get(symbol)
        return pos.quantity if pos is not None else 0

    @property
    def balance(self) -> Decimal:
        """Starting cash + realised - commissions (kept up to date by the events that change
        it: every mark reads equity)."""
        return self._balance

    def unrealised(self, symbol: str | None = None) -> Decimal:
        total = Decimal(0)
        for sym, pos in self.positions.items():
            if pos.quantity and (symbol is None or sym == symbol):
                total += pos.unrealised_ticks(self.marks[sym]) * self._tick_value[sym]
        return total

    def equity(self) -> Decimal:
        equity = self._balance
        for sym, pos in self.positions.items():
            if pos.quantity:
                equity += pos.unrealised_ticks(self.marks[sym]) * self._tick_value[sym]
        return equity

    def gross_exposure(self) -> Decimal:
        """Sum over instruments of |contracts| x last price x point value."""
        total = Decimal(0)
        for sym, pos in self.positions.items():
            if pos.quantity:
                total += abs(pos.quantity) * self.marks[sym] * self.contracts[sym].tick_value
        return total

    def apply(self, event: Event) -> None:
        if type(event) is PriceMarked:  # every bar: first
            self.contract(event.symbol)
            self.marks[event.symbol] = event.price_ticks
            self.mark_ts[event.symbol] = event.ts_ns
        elif isinstance(event, OrderFilled):
            self._fill(event)
        elif isinstance(event, PositionAdopted):
            self._adopt(event)
        elif isinstance(event, AccountOpened):
            if self.is_open:
                raise TradingError(f"account {self.name} is already open")
            self.name, self.currency = event.account, event.currency
            self.starting_cash = event.starting_cash
            self._balance = self.starting_cash + self.realised - self.commissions

    def check_fill(self, fill: OrderFilled) -> None:
        """Raise if `apply(fill)` would fail; changes nothing."""
        contract = self.contract(fill.symbol)
        if contract.currency != self.currency:
            raise TradingError(
                f"fill {fill.fill_id}: {fill.symbol} trades in {contract.currency}, "
                f"the account {self.name!r} is in {self.currency or 'no currency (not opened)'}"
            )

    def _fill(self, fill: OrderFilled) -> None:
        self.check_fill(fill)
        contract = self.contracts[fill.symbol]
        pos = self.positions.get(fill.symbol)
        if pos is None:
            pos = self.positions[fill.symbol] = Position(fill.symbol)
        realised = pos.fill(fill.signed_quantity, fill.price_ticks, fill.ts_ns)
        self.realised += realised * contract.tick_value
        self.commissions += fill.commission
        self._balance = self.starting_cash + self.realised - self.commissions
        self.marks[fill.symbol] = fill.price_ticks
        self.mark_ts[fill.symbol] = fill.ts_ns

    def _adopt(self, event: PositionAdopted) -> None:
        contract = self.contract(event.symbol)
        pos = self.positions.get(event.symbol)
        if pos is None:
            pos = self.positions[event.symbol] = Position(event.symbol)
        delta = event.quantity - pos.quantity
        if delta:
            self.realised += pos.fill(delta, event.price_ticks, event.ts_ns) * contract.tick_value
            self._balance = self.starting_cash + self.realised - self.commissions
        self.marks[event.symbol] = event.price_ticks
        self.mark_ts[event.symbol] = event.ts_ns

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "currency": self.currency,
            "starting_cash": self.starting_cash,
            "realised": self.realised,
            "commissions": self.commissions,
            "positions": {s: p.snapshot() for s, p in sorted(self.positions.items())},
            "marks": dict(sorted(self.marks.items())),
            "mark_ts": dict(sorted(self.mark_ts.items())),
        }
