"""A FIX 4.4 stack on QuickFIX: `FixVenue`, the gateway the OMS trades through (an initiator,
a `LiveVenue`); `FixMarketData`, bars over the same session (a `Feed`); `LocalExchange`, an
acceptor that fills orders against stored bars with the paper venue's fill model, to rehearse
against (`foxhunt venue`). Importing this package loads no QuickFIX: the modules import it
where they use it."""

from foxhunt.live.fix.gateway import FixVenue
from foxhunt.live.fix.marketdata import FixMarketData
from foxhunt.live.fix.settings import SessionFileError, load_session_file, write_session_file

__all__ = ["FixMarketData", "FixVenue", "SessionFileError", "load_session_file",
           "write_session_file"]
