"""OpenTelemetry traces and metrics, exported by OTLP/HTTP where a collector is configured.

Off by default and free when off: `configure` reads the standard OTel environment
(`OTEL_EXPORTER_OTLP_ENDPOINT`, or the per-signal `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`; `OTEL_SDK_DISABLED=true` turns it off) and, where none
is set, returns False without importing opentelemetry. Callers guard their work with
`enabled()` (one attribute read) or use `span()`, whose no-op span costs a function call.

State: this module holds one reference, the providers `configure` built (None when off), so
that `enabled()` is cheap and tests can `configure` and `shutdown` repeatedly. `tracer()` and
`meter()` hand out instruments from these providers, not from OpenTelemetry's globals. Only a
`configure` from the environment also installs them as OpenTelemetry's global providers (which
can be set once per process), so that libraries tracing through `opentelemetry.trace` join
the same export; a `configure` with injected exporters (tests) leaves the globals alone.

docs/telemetry.md lists the spans and metrics foxhunt emits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
METRICS_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
DISABLED_ENV = "OTEL_SDK_DISABLED"
SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"
TRACEPARENT_ENV = "TRACEPARENT"
TRACESTATE_ENV = "TRACESTATE"
"""The W3C trace context a parent process hands its child in the environment (OpenTelemetry's
environment carrier): a job's child process continues the job's trace."""
_CARRIER_ENV = {"traceparent": TRACEPARENT_ENV, "tracestate": TRACESTATE_ENV}
"""The W3C carrier's keys and the environment variables that carry them."""

Attributes = Mapping[str, str | bool | int | float]


@dataclass(frozen=True)
class _Providers:
    tracer_provider: Any  # opentelemetry.sdk.trace.TracerProvider
    meter_provider: Any  # opentelemetry.sdk.metrics.MeterProvider


_active: _Providers | None = None


class NoSpan:
    """What `span()` yields when telemetry is off: accepts a span's calls and records nothing."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Attributes) -> None:
        pass

    def add_event(self, name: str, attributes: Attributes | None = None) -> None:
        pass

    def record_exception(self, exception: BaseException) -> None:
        pass

    def is_recording(self) -> bool:
        return False


NO_SPAN = NoSpan()


def enabled() -> bool:
    """Whether spans and metrics go anywhere; callers skip building attributes when not."""
    return _active is not None


def _from_env(name: str) -> bool:
    return bool(os.environ.get(name, "").strip())


def configure(service_name: str, *, span_exporter: Any = None, metric_reader: Any = None,
              join_parent_trace: bool = True) -> bool:
    """Turn telemetry on and say whether it is on.

    With `span_exporter` (a `SpanExporter`, exported synchronously) or `metric_reader` (a
    `MetricReader`, e.g. the SDK's in-memory ones) telemetry exports there only. Without them
    it follows the environment: OTLP/HTTP exporters (batched spans, metrics read every
    `OTEL_METRIC_EXPORT_INTERVAL` ms, 60 s by default) where an endpoint is set, else off.
    A second call replaces the first (its providers are shut down first). The service is
    named `OTEL_SERVICE_NAME` where set, else `service_name`. With `join_parent_trace` a trace
    context in the environment (TRACEPARENT, set by a worker for its job's child) becomes this
    thread's current context: a bounded run (training) continues its job's trace. A session of
    days (paper, live) passes False: each of its orders is a trace of its own.
    """
    global _active
    injected = span_exporter is not None or metric_reader is not None
    if os.environ.get(DISABLED_ENV, "").strip().lower() == "true" and not injected:
        return False
    traces = injected or _from_env(ENDPOINT_ENV) or _from_env(TRACES_ENDPOINT_ENV)
    metrics = injected or _from_env(ENDPOINT_ENV) or _from_env(METRICS_ENDPOINT_ENV)
    if not (traces or metrics):
        return False
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    shutdown()
    resource = Resource.create({SERVICE_NAME: os.environ.get(SERVICE_NAME_ENV) or service_name})
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=not injected)
    readers = []
    if injected:
        if span_exporter is not None:
            tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        if metric_reader is not None:
            readers.append(metric_reader)
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        if traces:
            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        if metrics:
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers,
                                   shutdown_on_exit=not injected)
    if not injected:
        from opentelemetry import metrics as otel_metrics
        from opentelemetry import trace as otel_trace

        otel_trace.set_tracer_provider(tracer_provider)
        otel_metrics.set_meter_provider(meter_provider)
    _active = _Providers(tracer_provider, meter_provider)
    if join_parent_trace:
        _continue_parent_trace()
    return True


def _continue_parent_trace() -> None:
    """Where the environment carries a parent's trace context (TRACEPARENT), make it this
    thread's current context: the process's first spans are children of the parent's span."""
    if not os.environ.get(TRACEPARENT_ENV):
        return
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {key: os.environ[env] for key, env in _CARRIER_ENV.items() if os.environ.get(env)}
    context.attach(TraceContextTextMapPropagator().extract(carrier))


def trace_env() -> dict[str, str]:
    """The current span's trace context as environment variables for a child process (none
    when telemetry is off or no span is current)."""
    if _active is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return {env: carrier[key] for key, env in _CARRIER_ENV.items() if carrier.get(key)}


def shutdown() -> None:
    """Flush what is pending, shut the providers down and turn telemetry off (tests call it
    between cases; a process exiting flushes by itself)."""
    global _active
    active, _active = _active, None
    if active is not None:
        active.tracer_provider.shutdown()
        active.meter_provider.shutdown()


def tracer(name: str) -> Any:
    """An `opentelemetry.trace.Tracer` of the configured provider; the API's no-op tracer (and
    the API imported) when off: guard with `enabled()` where that import matters."""
    if _active is None:
        from opentelemetry import trace as otel_trace

        return otel_trace.NoOpTracer()
    return _active.tracer_provider.get_tracer(name)


def meter(name: str) -> Any:
    """An `opentelemetry.metrics.Meter` of the configured provider; the API's no-op meter
    when off (see `tracer`)."""
    if _active is None:
        from opentelemetry import metrics as otel_metrics

        return otel_metrics.NoOpMeter(name)
    return _active.meter_provider.get_meter(name)


@contextmanager
def span(name: str, attributes: Attributes | None = None, *,
         tracer_name: str = "foxhunt") -> Iterator[Any]:
    """A span `name` (a child of the current one) around the block, or `NO_SPAN` when off,
    with nothing imported. An exception leaving the block is recorded on the span."""
    if _active is None:
        yield NO_SPAN
        return
    with _active.tracer_provider.get_tracer(tracer_name).start_as_current_span(
            name, attributes=attributes) as current:
        yield current


def force_flush() -> None:
    """Export what is pending now (a job's end, a test's assertion)."""
    if _active is not None:
        _active.tracer_provider.force_flush()
        _active.meter_provider.force_flush()
