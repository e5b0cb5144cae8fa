"""Contract months: ESH24 is the E-mini S&P 500 contract that expires in March 2024.

A future trades as a sequence of contract months, each its own instrument with its own prices
and an expiry; a continuous series (`data.continuous`) is stitched from them. This module
names them and tells when each stops trading:

- `parse_symbol` reads a raw symbol: a root, a month code (F G H J K M N Q U V X Z = January
  to December) and a year of 1, 2 or 4 digits, with or without a space (`ESH4`, `ESH24`,
  `ES H4`, `ESH2024`). A year of 1 or 2 digits is the first year ending in those digits on or
  after `reference_year`: an importer passes the year of the contract's first bar, and a
  contract trades only before it expires, so ESH4 with bars from 2013 is March 2014 (any
  listing less than 10 years ahead, which holds for every root foxhunt ships).
- `FuturesContract` is a resolved contract month: its root, year, month and expiry, the last
  trading day, from the exchange's definitions when the import has them and else from the
  root's rule (`data.expiry`). Its canonical symbol, under which the store keeps its bars, has
  a two-digit year: ESH24.
- `session_days` gives each bar the trading day it belongs to, the same rule the env uses for
  session ends (a bar belongs to the session whose close is the first at or after the bar's
  close), so roll rules decide once per trading day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal
from zoneinfo import ZoneInfo

import numpy as np

from foxhunt.data.instruments import InstrumentRegistry, Session
from foxhunt.errors import DataError

MONTH_CODES = "FGHJKMNQUVXZ"
"""The exchange month codes, January (F) to December (Z)."""
_SYMBOL = re.compile(r"^([A-Z0-9]+?) ?([FGHJKMNQUVXZ]) ?(\d{1,2}|\d{4})$")
_DAY_NS = 86_400 * 10**9
_QUARTER_HOUR_NS = 900 * 10**9
ExpirySource = Literal["definition", "rule"]


@dataclass(frozen=True, order=True)
class FuturesContract:
    """One contract month of a root. Ordered by root, then year and month (= by expiry)."""

    root: str
    year: int
    month: int  # 1..12
    expiry: date  # the last trading day
    expiry_source: ExpirySource = "rule"

    def __post_init__(self) -> None:
        if not 1 <= self.month <= 12:
            raise DataError(f"{self.root}: contract month {self.month} is not 1..12")

    @property
    def code(self) -> str:
        return MONTH_CODES[self.month - 1]

    @property
    def symbol(self) -> str:
        """The canonical symbol, root + month code + two-digit year: ESH24."""
        return f"{self.root}{self.code}{self.year % 100:02d}"

    def __str__(self) -> str:
        return self.symbol


def parse_symbol(text: str, reference_year: int) -> tuple[str, int, int]:
    """(root, year, month) of a raw contract symbol (module docstring); one-line error if it is
    not one."""
    raw = str(text).strip().upper()
    m = _SYMBOL.match(raw)
    if m is None:
        raise DataError(
            f"{text!r} is not a contract symbol: expected a root, a month code (F G H J K M N Q "
            "U V X Z) and a year, e.g. ESH4, ESH24 or 'ES H4'")
    root, code, digits = m.groups()
    if len(digits) == 4:
        year = int(digits)
    else:
        mod = 10 ** len(digits)
        year = reference_year + (int(digits) - reference_year) % mod
    return root, year, MONTH_CODES.index(code) + 1


def root_of(symbol: str) -> str | None:
    """The root of a contract month's symbol (ESH24 -> ES); None for any other symbol (ES,
    MES, 6E, SYN: a root or an instrument without months)."""
    try:
        root, _, _ = parse_symbol(symbol, 2000)
    except DataError:
        return None
    return root


def is_contract_symbol(text: str, registry: InstrumentRegistry) -> bool:
    """Whether `text` names a contract month of a known root (and is not itself a known
    instrument: `MES` is a root, not M-E-S)."""
    return text not in registry and root_of(text) in registry


def resolve(text: str, registry: InstrumentRegistry, first_ts: int,
            expiry: date | None = None) -> FuturesContract:
    """The contract month `text` names, for bars that start at `first_ts` (ns UTC): its expiry
    from the definitions (`expiry`, the last trading day) where given, else from its root's
    `expiry` rule. One-line errors name the symbol and what is missing."""
    first_year = datetime.fromtimestamp(first_ts / 1e9, tz=UTC).year
    root, year, month = parse_symbol(text, first_year)
    if root not in registry:
        raise DataError(f"{text!r}: unknown root {root!r}; known roots: "
                        f"{', '.join(registry.symbols)} (add it to instruments.toml in "
                        "FOXHUNT_HOME)")
    inst = registry.get(root)
    if inst.months is not None and MONTH_CODES[month - 1] not in inst.months:
        raise DataError(f"{text!r}: {root} lists contract months {' '.join(inst.months)}, not "
                        f"{MONTH_CODES[month - 1]} ([{root}] months in instruments.toml)")
    if expiry is not None:
        return FuturesContract(root, year, month, expiry, "definition")
    if inst.expiry is None:
        raise DataError(f"{text!r}: {root} has no expiry rule in instruments.toml and the "
                        "import gives no expiration; add an expiration column or an `expiry` "
                        f"rule to [{root}]")
    return FuturesContract(root, year, month, inst.expiry.expiry(year, month), "rule")


def session_days(ts: np.ndarray, session: Session) -> np.ndarray:
    """The trading day of each bar, as days since 1970-01-01 (int64): the local date of the
    first session close at or after the bar's close time (an overnight ES bar at 18:00 Chicago
    on a Monday belongs to Tuesday). Around-the-clock sessions (open == close) split days at
    that time, so SYN's days are UTC days of bars closing after 00:00."""
    ts = np.asarray(ts, dtype=np.int64)
    if ts.size == 0:
        return ts.copy()
    local = ts + _utc_offsets_ns(ts, session.tz)
    close_ns = session.minutes("close") * 60 * 10**9
    return -((close_ns - local) // _DAY_NS)


def day_date(day: int) -> date:
    """The date of a `session_days` value."""
    return date.fromordinal(date(1970, 1, 1).toordinal() + int(day))


def date_day(d: date) -> int:
    """The `session_days` value of a date."""
    return d.toordinal() - date(1970, 1, 1).toordinal()


def _utc_offsets_ns(ts: np.ndarray, tz: str) -> np.ndarray:
    """UTC offset of each timestamp in `tz`, looked up once per quarter hour (zones change
    offset on quarter-hour UTC boundaries), as env.market does for session ends."""
    zone = ZoneInfo(tz)
    buckets, inverse = np.unique(ts // _QUARTER_HOUR_NS, return_inverse=True)
    seconds = [
        datetime.fromtimestamp(int(b) * 900, tz=UTC).astimezone(zone).utcoffset().total_seconds()
        for b in buckets
    ]
    return np.asarray(seconds, dtype=np.int64)[inverse] * 10**9
