"""Suite-wide fixtures: every test gets its own FOXHUNT_HOME; GPU tests skip without CUDA."""

from __future__ import annotations

import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)  # one thread per worker: two workers share the two cores


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("foxhunt_home")
    monkeypatch.setenv("FOXHUNT_HOME", str(home))
    monkeypatch.delenv("FOXHUNT_GPU_PROFILE", raising=False)
    return home


@pytest.fixture
def otel_memory(monkeypatch):
    """Telemetry on, into the SDK's in-memory span exporter and metric reader (an OTLP endpoint
    in the environment ignored), and off again after the test: `(spans, reader)`."""
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from foxhunt import telemetry

    for name in (telemetry.ENDPOINT_ENV, telemetry.TRACES_ENDPOINT_ENV,
                 telemetry.METRICS_ENDPOINT_ENV, telemetry.DISABLED_ENV,
                 telemetry.SERVICE_NAME_ENV):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    assert telemetry.configure("test", span_exporter=spans, metric_reader=reader)
    yield spans, reader
    telemetry.shutdown()


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
