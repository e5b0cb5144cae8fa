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
from typing import Any

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


@dataclass(frozen=True)
class FeedSpec:
    kind: str  # venue, replay or databento
    speed: float | None = None  # replay: N x real time (None: as fast as the trader asks)
    dataset: str = ""  # databento
    symbol: str = ""  # databento's symbol (e.g. ES.c.0)


def parse_feed(text: str) -> FeedSpec:
    """A `--feed` value: venue (the venue's own market data), replay:SPEED (stored bars after
    the history, SPEED = max or Nx), databento:DATASET:SYMBOL; ConfigError otherwise."""
    if text == "venue":
        return FeedSpec("venue")
    if text.startswith("replay:"):
        speed = text[len("replay:"):].strip().lower()
        if speed == "max":
            return FeedSpec("replay")
        m = re.fullmatch(r"(\d+(?:\.\d+)?)x", speed)
        if m is None or float(m[1]) <= 0:
            raise ConfigError(f"--feed {text!r}: use replay:max or replay:Nx (N times real time)")
        return FeedSpec("replay", speed=float(m[1]))
    if text.startswith("databento:"):
        parts = text.split(":")
        if len(parts) != 3 or not all(parts[1:]):
            raise ConfigError(f"--feed {text!r}: use databento:DATASET:SYMBOL "
                              "(e.g. databento:GLBX.MDP3:ES.c.0)")
        return FeedSpec("databento", dataset=parts[1], symbol=parts[2])
    raise ConfigError(f"--feed {text!r}: use venue, replay:SPEED or databento:DATASET:SYMBOL")


def check_venue(spec: VenueSpec, contracts: Mapping[str, Contract],
                ib_contracts: Path | None = None, owner: str | None = None) -> Any:  # fmt: skip
    """Read and check what the venue needs (the FIX session file; the IB contract of each
    symbol) before anything is opened or written; ConfigError naming what is wrong. Returns the
    IB contracts (None for FIX)."""
    if spec.kind == "fix":
        if ib_contracts is not None:
            raise ConfigError("--ib-contracts is for --venue ib:HOST:PORT, not a FIX session")
        from foxhunt.live.fix.settings import load_session_file

        config = load_session_file(spec.path)
        if owner is not None:
            _claim(config.store, owner, spec.label, write=False)
        return None
    if ib_contracts is None:
        raise ConfigError("--venue ib:...: give --ib-contracts FILE, a TOML file with an "
                          "[ib.contracts.SYMBOL] table per symbol (exchange and expiry, or con_id)")
    from foxhunt.configbase import read_toml
    from foxhunt.live.ib import parse_futures

    table = read_toml(ib_contracts).get("ib", {}).get("contracts")
    if not isinstance(table, dict):
        raise ConfigError(f"{ib_contracts}: no [ib.contracts.SYMBOL] tables")
    return parse_futures(table, contracts, str(ib_contracts))


def open_venue(spec: VenueSpec, contracts: Mapping[str, Contract], state: Path, account: str,
               ib_contracts: Path | None = None) -> tuple[LiveVenue, Feed]:  # fmt: skip
    """The venue and its market data feed; `state` is where the venue keeps its journal (a
    FIX session keeps its sequence numbers where its settings file says). IB needs the IB
    contract of each symbol: `ib_contracts`, a TOML file with `[ib.contracts.SYMBOL]` tables."""
    futures = check_venue(spec, contracts, ib_contracts)
    state.mkdir(parents=True, exist_ok=True)
    if spec.kind == "fix":
        from foxhunt.live.fix.gateway import FixVenue
        from foxhunt.live.fix.settings import load_session_file

        _claim(load_session_file(spec.path).store, owner_of(account, state), spec.label)
        venue = FixVenue(spec.path, contracts, journal=state / "fix.reports.jsonl")
        return venue, venue.feed()
    from foxhunt.live.ib import IbBars, IbVenue

    venue = IbVenue(spec.host, spec.port, spec.client_id, account, contracts,
                    state / "ib.reports.jsonl", futures=futures)  # fmt: skip
    # market data on a connection of its own: TWS allows one client id per connection
    return venue, IbBars(spec.host, spec.port, spec.client_id + 1, futures)


def owner_of(account: str, state: Path) -> str:
    return f"{account} ({state})"


def _claim(store: Path, owner: str, label: str, write: bool = True) -> None:
    """One FIX session per account: its sequence numbers, and the client order ids the
    venue knows, belong to one event log. The session's store folder names its account."""
    marker = store / "foxhunt-account"
    if marker.exists():
        held = marker.read_text(encoding="utf-8").strip()
        if held != owner:
            raise ConfigError(f"--venue {label}: that FIX session belongs to account {held}; "
                              "give each account its own session (its own SenderCompID)")
        return
    if write:
        store.mkdir(parents=True, exist_ok=True)
        marker.write_text(owner + "\n", encoding="utf-8")


def close_venue(venue: LiveVenue) -> None:
    """Log out and close the venue's journal (a FIX venue keeps it open on `close`, so that it
    can connect again)."""
    getattr(venue, "shutdown", venue.close)()
