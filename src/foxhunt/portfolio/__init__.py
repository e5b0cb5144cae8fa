"""Portfolio: positions (FIFO lots in ticks), the account (balance, marks, equity) and the
account events. Folded from fills and marks; imports `orders` below it."""

from foxhunt.portfolio.account import Account
from foxhunt.portfolio.events import AccountOpened, PriceMarked
from foxhunt.portfolio.position import Position

__all__ = ["Account", "AccountOpened", "Position", "PriceMarked"]
