"""A fake TWS on loopback per test, and an IB venue (with its OMS) pointed at it."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.live.ib.venue import IbVenue
from foxhunt.orders import Contract
from foxhunt.risk import RiskConfig

from .fake_tws import FakeContract, FakeTws

ES = Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25"))
CL = Contract("CL", Decimal("0.01"), Decimal(1000), Decimal("2.50"))
CONTRACTS = {"ES": ES, "CL": CL}
FUTURES = {"ES": {"exchange": "CME", "expiry": "202406"},
           "CL": {"exchange": "NYMEX", "local_symbol": "CLM4"}}
FAKE_CONTRACTS = [FakeContract(495512563, "ES", "20240621", "CME", "ESM4"),
                  FakeContract(212921504, "CL", "20240520", "NYMEX", "CLM4", "1000", min_tick=0.01)]
ACCOUNT = "DU1234567"
SEC = 1_000_000_000
T0 = 1_709_647_200 * SEC


@pytest.fixture
def tws():
    fake = FakeTws(FAKE_CONTRACTS, ACCOUNT).start()
    yield fake
    fake.stop()


def make_venue(tws: FakeTws, journal, client_id: int = 7, **kw) -> IbVenue:
    kw = {"reconnect_s": 0.2, "commission_wait_s": 0.5, "fill_wait_s": 1.0, "futures": FUTURES,
          **kw}
    return IbVenue("127.0.0.1", tws.port, client_id, ACCOUNT, CONTRACTS, journal, **kw)


@pytest.fixture
def venue(tws, tmp_path):
    v = make_venue(tws, tmp_path / "ib.jsonl")
    v.connect(5)
    yield v
    v.close()


def make_engine(venue, url: str = "sqlite://") -> TradingEngine:
    return TradingEngine.open(SqlEventStore(url), CONTRACTS, RiskConfig(), venue=venue,
                              starting_cash=Decimal(100_000), ts_ns=T0)


def wait_reports(venue, n: int, timeout_s: float = 3.0, engine=None) -> list:
    """At least `n` reports from the venue (applied to `engine` when given), or fail."""
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n:
        batch = venue.reports()
        for r in batch:
            if engine is not None:
                engine.on_report(r)
        got += batch
        if len(got) >= n:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(got)} of {n} reports in {timeout_s}s: {got}")
        time.sleep(0.01)
    return got


def until(check, timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout_s}s")
        time.sleep(0.01)
