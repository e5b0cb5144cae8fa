"""The local exchange's group commit: no acknowledgement leaves before the journal line it
reports is on disk, and orders that arrive while one sync runs share the next sync."""

from __future__ import annotations

import threading
import time

from foxhunt.execution.sim import SimulatedVenue
from foxhunt.orders import OrderRequest, OrderType, Side
from foxhunt.orders.state import OrderStatus

from .helpers import T0, engine, es_market, exchange, free_port, gateway, pump

ORDERS = 30


def test_orders_are_acknowledged_only_after_their_sync_and_a_slow_sync_is_shared(
        tmp_path, monkeypatch):  # fmt: skip
    lock = threading.Lock()
    synced: set[str] = set()  # client order ids whose journal line a sync covered
    syncs: list[int] = []  # how many new orders each sync covered
    acked_unsynced: list[str] = []
    sync = SimulatedVenue.sync

    def slow_sync(self: SimulatedVenue) -> None:
        with lock:
            written = set(self.taken) - synced
        time.sleep(0.03)  # a slow disk: orders keep arriving while it syncs
        sync(self)
        with lock:
            synced.update(written)
            if written:
                syncs.append(len(written))

    monkeypatch.setattr(SimulatedVenue, "sync", slow_sync)
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    send = ex._send_message

    def watched_send(msg, sid):
        if msg.getHeader().getField(35) == "8" and msg.getField(150) == "0":  # an Accepted
            cid = msg.getField(11)
            with lock:
                if cid not in synced:
                    acked_unsynced.append(cid)
        send(msg, sid)

    ex._send_message = watched_send  # this exchange's sends only: QuickFIX is left alone
    venue = gateway(tmp_path, port)
    try:
        eng = engine("sqlite://", venue, max_position=ORDERS, max_gross_notional=0)  # 0: off
        orders = eng.submit_many([
            OrderRequest("ES", Side.BUY if k % 2 else Side.SELL, 1, OrderType.LIMIT,
                         limit_price=4900 if k % 2 else 5100)
            for k in range(ORDERS)], T0 + 1)  # fmt: skip
        pump(eng, venue, lambda: all(o.status is OrderStatus.ACCEPTED for o in orders))
    finally:
        venue.shutdown()
        ex.stop()
    assert acked_unsynced == []
    assert sum(syncs) == ORDERS
    assert len(syncs) < ORDERS / 3, syncs  # shared: one sync for the orders that queued
