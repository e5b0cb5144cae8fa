"""Interactive Brokers: a `LiveVenue` (`IbVenue`) and a `Feed` (`IbBars`) over TWS / IB
Gateway's socket API through ib_async. `config` says where each symbol is at IB, `mapping`
translates orders and prices, `tracker` turns IB's order messages into reports, `journal`
keeps them across restarts, `loop` runs ib_async on a thread of its own."""

from foxhunt.live.ib.config import IbFuture, parse_futures
from foxhunt.live.ib.feed import IbBars
from foxhunt.live.ib.venue import IbVenue

__all__ = ["IbBars", "IbFuture", "IbVenue", "parse_futures"]
