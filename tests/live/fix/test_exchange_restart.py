"""`foxhunt venue` killed (SIGKILL) with an order working, and started again: the order
survives in the exchange's journal, fills when the bars play, and nothing is doubled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.execution import venue as v
from foxhunt.live.feed import FeedEnded
from foxhunt.live.fix.gateway import FixVenue
from foxhunt.orders import Contract, OrderRequest, OrderType, Side
from foxhunt.orders.state import OrderStatus
from foxhunt.risk import RiskConfig

from .helpers import free_port, pump, until


class Exchange:
    """`foxhunt venue SYN` as a subprocess; its --json events read line by line."""

    def __init__(self, port: int, state, home):
        cmd = [sys.executable, "-m", "foxhunt", "venue", "SYN", "--port", str(port), "--state",
               str(state), "--speed", "max", "--json"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "FOXHUNT_HOME": str(home)})
        self.session_file = self.event("session_file")["path"]

    def event(self, kind: str) -> dict:
        for line in self.proc.stdout:
            doc = json.loads(line)
            if doc["event"] == kind:
                return doc
        raise AssertionError(f"foxhunt venue ended without a {kind} event")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def syn(isolated_home):
    from foxhunt.cli import main
    from foxhunt.config import load_settings
    from foxhunt.data.series import BarSpec
    from foxhunt.data.store import MarketStore

    main(["data", "synth", "--bars", "120", "--json"])
    with MarketStore(load_settings(None).store_path, read_only=True) as store:
        bars = store.read_bars("SYN", BarSpec.parse("1min"))
    return Contract.from_instrument(InstrumentRegistry.load().get("SYN")), bars


def test_a_killed_exchange_keeps_the_working_order_and_fills_it_once(tmp_path, isolated_home,
                                                                    syn, capsys):  # fmt: skip
    contract, bars = syn
    port, state = free_port(), tmp_path / "exchange"
    first = Exchange(port, state, isolated_home)
    venue = None
    second = None
    try:
        venue = FixVenue(first.session_file, {"SYN": contract})
        venue.connect(10)
        t0 = int(bars.ts[0]) - 1
        eng = TradingEngine.open(SqlEventStore(f"sqlite:///{tmp_path / 'log.sqlite'}"),
                                 {"SYN": contract}, RiskConfig(), venue=venue, ts_ns=t0)
        eng.mark("SYN", float(bars.close[0]), t0)
        order = eng.submit(OrderRequest("SYN", Side.BUY, 1), t0)
        limit = eng.submit(OrderRequest("SYN", Side.SELL, 1, OrderType.LIMIT,
                                        limit_price=float(bars.close[0]) * 1.04), t0)
        pump(eng, venue, lambda: order.status is OrderStatus.ACCEPTED
             and limit.status is OrderStatus.ACCEPTED)  # fmt: skip

        first.kill()  # no logout, no clean close: the journals are what is left
        until(lambda: not venue.connected, what="the session to drop")
        second = Exchange(port, state, isolated_home)
        until(lambda: venue.connected, 15, what="the gateway to log on again")
        assert venue.take_reconnected()
        working = {o.client_order_id for o in venue.open_orders(5)}
        assert working == {order.client_order_id, limit.client_order_id}

        feed = venue.feed()
        feed.subscribe("SYN")  # the exchange starts playing
        with pytest.raises(FeedEnded):
            while feed.next_bar(5) is not None:
                pass
        pump(eng, venue, lambda: order.status is OrderStatus.FILLED and limit.is_terminal)
        assert venue.positions(5) == {"SYN": eng.account.position("SYN")}
        fills = [r for r in venue.history if isinstance(r, v.Filled)]
        assert len({f.fill_id for f in fills}) == len(fills)
        assert sum(isinstance(r, v.Accepted) for r in venue.history) == 2
        assert order.filled_qty == 1
        eng.store.close()
    finally:
        if venue is not None:
            venue.shutdown()
        for ex in (first, second):
            if ex is not None and ex.proc.poll() is None:
                ex.proc.send_signal(signal.SIGTERM)
                ex.proc.wait(10)
