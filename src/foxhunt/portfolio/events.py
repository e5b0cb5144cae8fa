"""Account events: the opening balance and the prices positions are marked at."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import ClassVar

from foxhunt.orders.events import Event


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountOpened(Event):
    """The first event of every log: the account's currency and starting cash."""

    KIND: ClassVar[str] = "account_opened"
    account: str
    currency: str
    starting_cash: Decimal

    @property
    def event_id(self) -> str:
        return f"account:{self.account}:opened"


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceMarked(Event):
    """The last price of an instrument as the trading core saw it (a bar close, a trade).

    Marks are logged because equity, the daily loss and the drawdown are folded from them.
    """

    KIND: ClassVar[str] = "price_marked"
    symbol: str
    price_ticks: int

    @property
    def event_id(self) -> str:
        return f"mark:{self.symbol}:{self.ts_ns}"


PORTFOLIO_EVENTS: tuple[type[Event], ...] = (AccountOpened, PriceMarked)
