"""`--venue` specs: which live venue (and its market data) a trader connects to.

    fix:FILE                 a FIX 4.4 session described by a QuickFIX settings file
    ib:HOST:PORT[:CLIENT]    TWS or IB Gateway (7497/4002 paper, 7496/4001 live), client id
                             (default 1)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from foxhunt.errors import ConfigError
from foxhunt.execution.venue import LiveVenue
from foxhunt.live.feed import Feed
from foxhunt.orders.contract import Contract

_IB = re.compile(r"^ib:(?P<host>[A-Za-z0-9.\-]+|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})"
                 r"(?::(?P<client>\d{1,9}))?$")  # fmt: skip


@dataclass(frozen=True)
class VenueSpec:
    kind: str  # fix or ib
    path: Path | None = None
    host: str = ""
    port: int = 0
    client_id: int = 1

    @property
    def label(self) -> str:
        if self.kind == "fix":
            return f"fix:{self.path}"
        return f"ib:{self.host}:{self.port}:{self.client_id}"


def parse_venue(text: str) -> VenueSpec:
    """A `--venue` value, or ConfigError naming what is wrong with it."""
    if text.startswith("fix:"):
        path = Path(text[4:]).expanduser()
        if not text[4:]:
            raise ConfigError("--venue fix:FILE: give the QuickFIX session settings file")
        if not path.is_file():
            raise ConfigError(f"--venue {text}: no session settings file {path}")
        return VenueSpec("fix", path=path)
    if text.startswith("ib:"):
        m = _IB.match(text)
        if m is None:
            raise ConfigError(f"--venue {text!r}: use ib:HOST:PORT or ib:HOST:PORT:CLIENT_ID "
                              "(e.g. ib:127.0.0.1:7497)")
        port = int(m["port"])
        if not 0 < port < 65536:
            raise ConfigError(f"--venue {text!r}: port {port} is not a TCP port")
        return VenueSpec("ib", host=m["host"].strip("[]"), port=port,
                         client_id=int(m["client"] or 1))
    raise ConfigError(f"--venue {text!r}: use fix:FILE (a FIX 4.4 session) or ib:HOST:PORT "
                      "(Interactive Brokers)")


def open_venue(spec: VenueSpec, contracts: Mapping[str, Contract], state: Path,
               account: str) -> tuple[LiveVenue, Feed]:  # fmt: skip
    """The venue and its market data feed; `state` is where the venue keeps its journal (and
    a FIX session its sequence numbers)."""
    state.mkdir(parents=True, exist_ok=True)
    if spec.kind == "fix":
        from foxhunt.live.fix import open_fix_venue

        return open_fix_venue(spec.path, contracts, state)
    from foxhunt.live.ib import open_ib_venue

    return open_ib_venue(spec.host, spec.port, spec.client_id, account, contracts, state)
