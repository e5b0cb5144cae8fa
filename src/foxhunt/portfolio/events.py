"""Account events: the opening balance, the prices positions are marked at, and a position an
operator adopted from the venue."""

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



@event("position_adopted", "adopt:{symbol}:{ts_ns}")
class PositionAdopted(Event):
    """An operator adopted the venue's position after a reconciliation found them apart: the
    log's position becomes `quantity`, the difference booked at `price_ticks` (the last price)
    without commission, as a fill the log never saw. `reason` is the operator's."""

    symbol: str
    quantity: int
    price_ticks: int
    reason: str
