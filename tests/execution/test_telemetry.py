"""An order's life in OpenTelemetry (the SDK's in-memory exporters): spans for the submit, its
risk checks, the log append, the send and each report; counters of orders sent and denied, and
the fill latency. Off, the engine touches no instrument."""

from __future__ import annotations

from foxhunt import telemetry
from foxhunt.execution import venue as v
from foxhunt.orders import OrderRequest, OrderStatus, Side

from ..test_telemetry import metric_points
from .helpers import T0, RecordingVenue, engine


def test_an_orders_life_is_traced_and_counted(otel_memory):
    spans, reader = otel_memory
    eng = engine(venue=RecordingVenue(), max_position=2)
    eng.mark("ES", "4500.00", T0)
    spans.clear()
    sent, denied = eng.submit_many([OrderRequest("ES", Side.BUY, 2, client_order_id="a"),
                                    OrderRequest("ES", Side.BUY, 1, client_order_id="b")],
                                   T0 + 1)  # fmt: skip
    assert (sent.status, denied.status) == (OrderStatus.SUBMITTED, OrderStatus.DENIED)
    eng.on_report(v.Accepted(client_order_id="a", ts_ns=T0 + 2, venue_order_id="V1"))
    eng.on_report(v.Filled(client_order_id="a", ts_ns=T0 + 3, fill_id="f1", quantity=2,
                           price_ticks=18_000))  # fmt: skip
    got = {s.name: [] for s in spans.get_finished_spans()}
    for s in spans.get_finished_spans():
        got[s.name].append(s)
    (submit,) = got["foxhunt.orders.submit"]
    assert dict(submit.attributes) == {"foxhunt.orders": 2, "foxhunt.orders.sent": 1,
                                       "foxhunt.orders.denied": 1}  # fmt: skip
    checks = got["foxhunt.order.risk_check"]
    assert [c.attributes["foxhunt.order.id"] for c in checks] == ["a", "b"]
    assert "foxhunt.risk.check" not in checks[0].attributes
    assert checks[1].attributes["foxhunt.risk.check"] == "max_position"
    children = [*checks, *got["foxhunt.orders.log_append"], *got["foxhunt.order.send"]]
    assert {c.parent.span_id for c in children} == {submit.context.span_id}
    assert [s.attributes["foxhunt.order.id"] for s in got["foxhunt.order.send"]] == ["a"]
    reports = {s.attributes["foxhunt.report"]: s for s in got["foxhunt.order.report"]}
    assert set(reports) == {"Accepted", "Filled"}
    fill = reports["Filled"].attributes
    assert fill["foxhunt.quantity"] == 2 and fill["foxhunt.order.fill_latency_ms"] >= 0
    m = metric_points(reader)
    assert [p.value for p in m["foxhunt.orders.submitted"]] == [1]
    (reject,) = m["foxhunt.orders.risk_rejects"]
    assert reject.value == 1 and reject.attributes["foxhunt.risk.check"] == "max_position"
    (latency,) = m["foxhunt.orders.fill_latency"]
    assert latency.count == 1


def test_off_the_engine_builds_no_instrument():
    telemetry.shutdown()
    eng = engine(venue=RecordingVenue())
    eng.mark("ES", "4500.00", T0)
    eng.submit(OrderRequest("ES", Side.BUY, 1, client_order_id="a"), T0 + 1)
    eng.on_report(v.Accepted(client_order_id="a", ts_ns=T0 + 2, venue_order_id="V1"))
    assert eng._telemetry is None
