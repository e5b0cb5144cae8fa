"""API requests as OpenTelemetry spans and a duration histogram, by route template (not by URL,
which would make every account and run its own series); nothing when telemetry is off."""

from __future__ import annotations

import pytest

from foxhunt import telemetry


@pytest.fixture
def memory(monkeypatch):
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    assert telemetry.configure("foxhunt-serve", span_exporter=spans, metric_reader=reader)
    yield spans, reader
    telemetry.shutdown()


def test_requests_are_spans_and_a_histogram_by_route(client, headers, memory):
    spans, reader = memory
    client.get("/api/v1/runs/nope", headers=headers["viewer"])
    client.get("/api/v1/me", headers=headers["viewer"])
    client.get("/api/v1/me")
    done = {s.name: s for s in spans.get_finished_spans()}
    assert "HTTP GET /api/v1/runs/{run}" in done
    run_span = done["HTTP GET /api/v1/runs/{run}"]
    assert run_span.attributes["http.response.status_code"] == 404
    assert run_span.attributes["enduser.id"] == "vic"
    points = [p for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name == "foxhunt.api.request.duration"
              for p in m.data.data_points]
    by_route = {(p.attributes["http.route"], p.attributes["http.response.status_code"]): p.count
                for p in points}
    assert by_route[("/api/v1/me", 200)] == 1 and by_route[("/api/v1/me", 401)] == 1
    assert by_route[("/api/v1/runs/{run}", 404)] == 1


def test_off_by_default(client, headers):
    assert not telemetry.enabled()
    assert client.get("/api/v1/me", headers=headers["viewer"]).status_code == 200
