"""A local exchange and a gateway on loopback, over a few deterministic bars."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import numpy as np

from foxhunt.data.series import Bars
from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.live.fix.exchange import LocalExchange, Market
from foxhunt.live.fix.gateway import FixVenue
from foxhunt.live.fix.settings import write_session_file
from foxhunt.orders import Contract
from foxhunt.risk import RiskConfig

ES = Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25"))
CL = Contract("CL", Decimal("0.01"), Decimal(1000), Decimal("2.50"))
SEC = 1_000_000_000
T0 = 1_709_647_200 * SEC  # 2024-03-05 14:00 UTC


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def es_bars(n: int = 20) -> Bars:
    """Bar i opens at 5000 + i points, trades 2 points either side, closes half a point up."""
    opens = 5000.0 + np.arange(n)
    ts = T0 + np.arange(1, n + 1) * 60 * SEC
    return Bars(ts, opens, opens + 2, opens - 2, opens + 0.5, np.full(n, 100.0))


def es_market(n: int = 20, session_end: tuple[int, ...] = ()) -> Market:
    m = Market.of(ES, es_bars(n))
    m.session_end[list(session_end)] = True
    return m


def exchange(tmp: Path, port: int, markets: list[Market] | None = None, **kw) -> LocalExchange:
    kw.setdefault("speed", None)
    kw.setdefault("start", "told")
    ex = LocalExchange(markets or [es_market()], tmp / "exchange", port=port, **kw)
    ex.start()
    return ex


def gateway(tmp: Path, port: int, heartbeat_s: int = 30, **kw) -> FixVenue:
    path = tmp / "client" / "session.cfg"
    if not path.exists():
        write_session_file(path, port=port, heartbeat_s=heartbeat_s, reconnect_s=1)
    venue = FixVenue(path, {"ES": ES, "CL": CL}, **kw)
    venue.connect(10)
    return venue


def engine(url: str, venue=None, **limits) -> TradingEngine:
    store = SqlEventStore(url)
    risk = RiskConfig(**{"max_position": 20, "max_order_rate": 1000, **limits})
    eng = TradingEngine.open(store, {"ES": ES, "CL": CL}, risk, venue=venue,
                             starting_cash=Decimal(1_000_000), ts_ns=T0)  # fmt: skip
    eng.mark("ES", 5000, T0)
    eng.mark("CL", 80, T0)
    return eng


def until(predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.02)


def deliver(eng: TradingEngine, venue: FixVenue) -> list:
    """Hand every queued report to the engine; the reports handed."""
    got = venue.reports()
    for r in got:
        eng.on_report(r)
    return got


def pump(eng: TradingEngine, venue: FixVenue, done: Callable[[], bool],
         timeout_s: float = 10.0) -> None:  # fmt: skip
    """Deliver reports until `done()` holds."""
    def step() -> bool:
        deliver(eng, venue)
        return done()

    until(step, timeout_s)
