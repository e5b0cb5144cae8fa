"""Account events: the opening balance and the prices positions are marked at."""

from __future__ import annotations

from decimal import Decimal

from foxhunt.events import Event, event


@event("account_opened", "account:{account}:opened")
class AccountOpened(Event):
    """The first event of every log: the account's currency and starting cash."""

    account: str
    currency: str
    starting_cash: Decimal


@event("price_marked", "mark:{symbol}:{ts_ns}")
class PriceMarked(Event):
    """The last price of an instrument as the trading core saw it (a bar close, a trade).

    Marks are logged because equity, the daily loss and the drawdown are folded from them.
    """

    symbol: str
    price_ticks: int

