"""API requests as OpenTelemetry spans and a duration histogram, by route template (not by URL,
which would make every account and run its own series); nothing when telemetry is off."""

from __future__ import annotations

from foxhunt import telemetry

from ..test_telemetry import metric_points


def test_requests_are_spans_and_a_histogram_by_route(client, headers, otel_memory):
    spans, reader = otel_memory
    client.get("/api/v1/runs/nope", headers=headers["viewer"])
    client.get("/api/v1/me", headers=headers["viewer"])
    client.get("/api/v1/me")
    done = {s.name: s for s in spans.get_finished_spans()}
    assert "HTTP GET /api/v1/runs/{run}" in done
    run_span = done["HTTP GET /api/v1/runs/{run}"]
    assert run_span.attributes["http.response.status_code"] == 404
    assert run_span.attributes["enduser.id"] == "vic"
    points = metric_points(reader)["foxhunt.api.request.duration"]
    by_route = {(p.attributes["http.route"], p.attributes["http.response.status_code"]): p.count
                for p in points}
    assert by_route[("/api/v1/me", 200)] == 1 and by_route[("/api/v1/me", 401)] == 1
    assert by_route[("/api/v1/runs/{run}", 404)] == 1


def test_off_by_default(client, headers):
    assert not telemetry.enabled()
    assert client.get("/api/v1/me", headers=headers["viewer"]).status_code == 200
