"""The gateway's report journal: a fill is fsync'd before QuickFIX may count it delivered; a
report that an order status request restores (accepted, canceled, expired, rejected) is only
flushed, and when a power cut takes it, reconciliation at the next start restores it."""

from __future__ import annotations

import json

from foxhunt.live.fix.gateway import FixVenue
from foxhunt.live.reconcile import reconcile_live
from foxhunt.orders import OrderRequest, OrderType, Side
from foxhunt.orders.state import OrderStatus

from .helpers import CL, ES, T0, engine, es_market, exchange, free_port, gateway, pump, until


def test_fills_are_fsynced_and_what_a_status_restores_is_flushed(tmp_path):
    port = free_port()
    ex = exchange(tmp_path, port, [es_market(10)])
    venue = gateway(tmp_path, port)
    synced: dict[str, set[bool]] = {}
    append = venue._append

    def spy(rec, sync):
        if "kind" in rec:
            synced.setdefault(rec["kind"], set()).add(sync)
        append(rec, sync)

    venue._append = spy
    eng = engine("sqlite://", venue)
    try:
        market = eng.submit(OrderRequest("ES", Side.BUY, 1), T0 + 1)
        limit = eng.submit(OrderRequest("ES", Side.SELL, 1, OrderType.LIMIT, limit_price=5100),
                           T0 + 1)  # fmt: skip
        pump(eng, venue, lambda: limit.status is OrderStatus.ACCEPTED)
        ex.play()
        assert ex.wait(10)
        pump(eng, venue, lambda: market.status is OrderStatus.FILLED)
        eng.cancel(limit.client_order_id, T0 + 2)
        pump(eng, venue, lambda: limit.status is OrderStatus.CANCELED)
    finally:
        venue.shutdown()
        ex.stop()
    restorable = {"Accepted", "Canceled", "Expired", "Rejected"}
    assert synced["Filled"] == {True} and synced["Accepted"] == synced["Canceled"] == {False}
    for kind, how in synced.items():  # e.g. a CancelRejected, when a cancel crossed the end
        assert how == {kind not in restorable}, kind


def test_an_acceptance_a_power_cut_took_is_restored_by_reconciliation(tmp_path):
    """The journal and the log both lack the Accepted (the trader held it deferred, for the
    next order's transaction): the next start asks the venue and logs it."""
    port = free_port()
    url = f"sqlite:///{tmp_path / 'log.db'}"
    ex = exchange(tmp_path, port, [es_market(10)])
    venue = gateway(tmp_path, port)
    try:
        limit = engine(url, venue).submit(OrderRequest("ES", Side.SELL, 2, OrderType.LIMIT,
                                                       limit_price=5100), T0 + 1)  # fmt: skip
        until(lambda: any(type(r).__name__ == "Accepted" for r in venue.history))
        venue.shutdown()
        lines = venue.journal_path.read_text().splitlines()
        kept = [ln for ln in lines if json.loads(ln).get("kind") != "Accepted"]
        assert len(kept) == len(lines) - 1
        venue.journal_path.write_text("".join(f"{ln}\n" for ln in kept))
        venue = FixVenue(venue.config.path, {"ES": ES, "CL": CL})
        venue.connect(10)
        eng = engine(url, venue)
        assert eng.book.get(limit.client_order_id).status is OrderStatus.SUBMITTED
        rec = reconcile_live(eng, venue, "ES", ts_ns=T0 + 2)
        assert rec.ok, rec.line()
        assert rec.resolved == {limit.client_order_id: "accepted"}
        assert eng.book.get(limit.client_order_id).status is OrderStatus.ACCEPTED
    finally:
        venue.shutdown()
        ex.stop()
