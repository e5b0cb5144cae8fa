"""`foxhunt venue ESU24` plays a stored contract month: its own bars, by its root's spec (the
month lookup `foxhunt live` uses, `cli.evaluate.load_traded_series`), so a month is rehearsed
on one machine: `foxhunt live ESU24` against it trades the month's own prices. Real processes
on loopback, the exchange in lockstep; every wait bounded."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from foxhunt.data.store import MarketStore
from foxhunt.live.feed import FeedEnded
from foxhunt.live.fix.gateway import FixVenue
from foxhunt.orders import Contract

from ...backtest.test_backtest_cli_rolls import continuous_home
from ...cli.bad_input_cases import cli, cli_ok
from .helpers import free_port
from .test_live_kill import Venue, foxhunt

FROM = "2024-08-01T00:00:00Z"  # the exchange plays ESU24 from here; live warms up before it


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return continuous_home(tmp_path_factory)


class MonthVenue(Venue):
    """`foxhunt venue SYMBOL` in its own process, in lockstep, from FROM."""

    def __init__(self, home: Path, symbol: str, state: str):
        self.port = free_port()
        self.proc = foxhunt(home, "venue", symbol, "--bars", "1d", "--port", str(self.port),
                            "--state", state, "--speed", "step", "--from", FROM, "--json")
        self.session_file = self.event("session_file")["path"]


def month_bars(home: Path, symbol: str):
    with MarketStore(home / "store.duckdb", read_only=True) as store:
        bars = store.read_bars(symbol, "1d")
    start = int(np.datetime64(FROM.rstrip("Z"), "ns").astype(np.int64))
    return bars.slice(int(np.searchsorted(bars.ts, start)), len(bars))


def test_the_venue_plays_a_contract_months_own_bars(home, tmp_path):
    venue = MonthVenue(home, "ESU24", str(tmp_path / "state"))
    es = Contract("ESU24", "0.25", "50", "2.25")  # ES's tick, point value and commission
    client = FixVenue(Path(venue.session_file), {"ESU24": es})
    try:
        client.connect(10)
        feed = client.feed()
        feed.subscribe("ESU24")
        got = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                bar = feed.next_bar(10)
            except FeedEnded:
                break
            assert bar is not None, "no bar within 10 s"
            got.append((bar.ts_ns, bar.open, bar.high, bar.low, bar.close))
        feed.close()
    finally:
        client.shutdown()
        venue.stop()
    own = month_bars(home, "ESU24")
    assert len(own) > 20 and got == list(zip(own.ts.tolist(), own.open.tolist(),
                                             own.high.tolist(), own.low.tolist(),
                                             own.close.tolist(), strict=True))


def test_live_on_a_month_trades_its_own_prices_against_the_venue_on_that_month(home, tmp_path):
    venue = MonthVenue(home, "ESU24", str(tmp_path / "state"))
    try:
        doc = cli_ok(home, "live", "ESU24", "--bars", "1d", "--venue",
                     f"fix:{venue.session_file}", "--strategy", "buy-and-hold", "--history-to",
                     FROM, "--account", "month", "--stale-after", "600")
    finally:
        venue.stop()
    own = month_bars(home, "ESU24")
    assert (doc["symbol"], doc["bars"], doc["orders"], doc["fills"], doc["position"]) == (
        "ESU24", len(own), 1, 1, 3)
    # buy-and-hold buys 3 at the first live bar's close: filled at ESU24's own open of the next
    # bar plus a tick, $2.25 a contract, marked at ESU24's last close ($50 a point: ES's spec)
    entry = Decimal(repr(float(own.open[1]))) + Decimal("0.25")
    last = Decimal(repr(float(own.close[-1])))
    assert Decimal(doc["pnl"]) == (last - entry) * 3 * 50 - 3 * Decimal("2.25")
    assert doc["ended"].endswith("the venue's data ended for ESU24")
    # the account's commands read a month's log by its root's spec, as paper's months
    positions = cli_ok(home, "positions", "--account", "month")
    held = {p["symbol"]: p for p in positions["positions"]}
    assert (held["ESU24"]["position"], held["ESU24"]["root"], held["ESU24"]["contract"]) == (
        3, "ES", "ESU24")
    orders = cli_ok(home, "orders", "--account", "month")
    assert [o["symbol"] for o in orders["orders"]] == ["ESU24"]
    assert cli_ok(home, "risk", "status", "--account", "month")["trading_state"] == "ACTIVE"


def test_a_month_not_stored_is_refused_in_one_line(home):
    code, out, err = cli(home, "venue", "ESX24", "--bars", "1d", "--port", str(free_port()))
    assert (code, out) == (1, "") and err.count("\n") == 1, (code, out, err)
    assert err.strip() == ("error: ESX24: no such contract month stored; import it (foxhunt data "
                           "import ESX24.csv --symbol ...) or give a stored month's symbol")
