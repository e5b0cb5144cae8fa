"""foxhunt.telemetry: off and import-free without an endpoint, in-memory exporters in tests, OTLP
exporters from the environment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from foxhunt import telemetry

OTEL_ENV = (telemetry.ENDPOINT_ENV, telemetry.TRACES_ENDPOINT_ENV, telemetry.METRICS_ENDPOINT_ENV,
            telemetry.DISABLED_ENV, telemetry.SERVICE_NAME_ENV)


@pytest.fixture(autouse=True)
def no_otel_env(monkeypatch):
    for name in OTEL_ENV:
        monkeypatch.delenv(name, raising=False)
    yield
    telemetry.shutdown()


def metric_points(reader) -> dict[str, list]:
    out: dict[str, list] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
    return out


def test_off_without_an_endpoint_imports_nothing():
    code = ("import sys, foxhunt, foxhunt.telemetry as t, foxhunt.training.trainer\n"
            "assert t.configure('x') is False and not t.enabled()\n"
            "with t.span('s', {'a': 1}) as s:\n"
            "    s.set_attribute('b', 2)\n"
            "    assert not s.is_recording()\n"
            "t.force_flush(); t.shutdown()\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in OTEL_ENV}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_sdk_disabled_wins_over_an_endpoint(monkeypatch):
    monkeypatch.setenv(telemetry.ENDPOINT_ENV, "http://127.0.0.1:9")
    monkeypatch.setenv(telemetry.DISABLED_ENV, "true")
    assert telemetry.configure("x") is False
    assert not telemetry.enabled()


def test_spans_nest_and_carry_attributes(otel_memory):
    spans, _ = otel_memory
    with telemetry.span("outer", {"job": "j1"}) as outer:
        assert outer.is_recording()
        with telemetry.span("inner") as inner:
            inner.set_attribute("n", 3)
    done = {s.name: s for s in spans.get_finished_spans()}
    assert set(done) == {"outer", "inner"}
    assert done["inner"].parent.span_id == done["outer"].context.span_id
    assert done["outer"].attributes["job"] == "j1" and done["inner"].attributes["n"] == 3
    assert done["outer"].resource.attributes["service.name"] == "test"


def test_an_exception_is_recorded_and_raised(otel_memory):
    spans, _ = otel_memory
    with pytest.raises(ValueError), telemetry.span("failing"):
        raise ValueError("boom")
    (failed,) = spans.get_finished_spans()
    assert failed.status.status_code.name == "ERROR"
    assert failed.events[0].name == "exception"


def test_meter_records_to_the_reader(otel_memory):
    _, reader = otel_memory
    telemetry.meter("t").create_histogram("foxhunt.test.latency", unit="s").record(0.5)
    (point,) = metric_points(reader)["foxhunt.test.latency"]
    assert point.count == 1 and point.sum == 0.5


def test_shutdown_turns_it_off_and_configure_again_works(otel_memory):
    telemetry.shutdown()
    assert not telemetry.enabled()
    with telemetry.span("ignored") as s:
        assert s is telemetry.NO_SPAN
    assert not telemetry.tracer("x").start_span("noop").is_recording()
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    again = InMemorySpanExporter()
    assert telemetry.configure("again", span_exporter=again)
    with telemetry.span("second"):
        pass
    assert [s.name for s in again.get_finished_spans()] == ["second"]
    assert otel_memory[0].get_finished_spans() == ()


def test_an_endpoint_builds_otlp_exporters():
    """In a child process: the global providers can be set once per process."""
    code = ("import foxhunt.telemetry as t\n"
            "from opentelemetry import trace\n"
            "assert t.configure('svc') is True and t.enabled()\n"
            "p = trace.get_tracer_provider()\n"
            "proc = p._active_span_processor._span_processors[0]\n"
            "print(type(proc).__name__, type(proc._batch_processor._exporter).__name__,\n"
            "      p.resource.attributes['service.name'])\n"
            "t.shutdown()\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in OTEL_ENV}
    env[telemetry.ENDPOINT_ENV] = "http://127.0.0.1:9"
    env[telemetry.SERVICE_NAME_ENV] = "from-env"
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["BatchSpanProcessor", "OTLPSpanExporter", "from-env"]


@pytest.mark.parametrize("join", [True, False])
def test_a_child_process_continues_the_trace_its_environment_carries(join):
    """What a worker hands its job's child (TRACEPARENT): the child's first span is a child of
    the job's span, in the job's trace; a live or paper session (join_parent_trace=False)
    starts traces of its own."""
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    code = ("import foxhunt.telemetry as t\n"
            "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
            "InMemorySpanExporter\n"
            "spans = InMemorySpanExporter()\n"
            f"assert t.configure('child', span_exporter=spans, join_parent_trace={join})\n"
            "with t.span('foxhunt.train.run'):\n"
            "    pass\n"
            "(s,) = spans.get_finished_spans()\n"
            "print(f'{s.context.trace_id:032x}', s.parent and f'{s.parent.span_id:016x}')\n")
    env = {k: v for k, v in os.environ.items() if k not in OTEL_ENV}
    env[telemetry.TRACEPARENT_ENV] = f"00-{trace_id}-{span_id}-01"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    got_trace, got_parent = out.stdout.split()
    assert (got_trace == trace_id and got_parent == span_id) is join
    if not join:
        assert got_parent == "None"


def test_trace_env_is_the_current_span_and_empty_when_off(otel_memory):
    spans, _ = otel_memory
    with telemetry.span("foxhunt.job"):
        env = telemetry.trace_env()
    (job,) = spans.get_finished_spans()
    assert list(env) == [telemetry.TRACEPARENT_ENV]
    assert env[telemetry.TRACEPARENT_ENV].split("-")[1:3] == [f"{job.context.trace_id:032x}",
                                                            f"{job.context.span_id:016x}"]
    telemetry.shutdown()
    assert telemetry.trace_env() == {}
