"""A worker's telemetry: a `foxhunt.job` span per attempt with its events, the queue's depth
and the jobs it ended, through the SDK's in-memory exporters."""

from __future__ import annotations

import threading
import time

from foxhunt import telemetry
from foxhunt.db import DatabaseError
from foxhunt.jobs import JobState, JobStore
from foxhunt.jobs.child import Outcome
from foxhunt.jobs.worker import Worker, WorkerConfig

from ..cli.test_cli import run_json
from ..test_telemetry import metric_points
from .fakes import Endlessly, Scripted


def job_spans(spans) -> list:
    return [s for s in spans.get_finished_spans() if s.name == "foxhunt.job"]


def events(span) -> list[str]:
    return [e.name for e in span.events]


def test_foxhunt_worker_traces_each_job_and_reports_the_queue(capsys, market, tmp_path, otel_memory,
                                                              monkeypatch):
    spans, reader = otel_memory
    configured = []
    real_configure = telemetry.configure
    monkeypatch.setattr(telemetry, "configure",
                        lambda name, **kw: configured.append(name) or real_configure(name, **kw))
    db = f"sqlite:///{tmp_path / 'foxhunt.db'}"
    store = JobStore.open(db)
    ran = store.submit("backtest", ["SYN", "--strategy", "sma:10,30", "--device", "cpu"])
    store.submit("backtest", ["SYN", "--strategy", "sma:5,20", "--device", "cpu"])
    doc = run_json(capsys, "worker", "--db", db, "--once", "--max-jobs", "1")
    assert configured == ["foxhunt-worker"]
    (span,) = job_spans(spans)
    assert dict(span.attributes) == {
        "foxhunt.job.id": ran.id, "foxhunt.job.kind": "backtest", "foxhunt.job.attempt": 1,
        "foxhunt.worker": doc["jobs"][0]["worker"], "foxhunt.job.state": "succeeded"}
    assert events(span) == ["foxhunt.job.claimed"]
    assert span.events[0].attributes["foxhunt.job.resumed"] is False
    assert span.instrumentation_scope.name == "foxhunt.jobs"
    points = metric_points(reader)
    assert [p.value for p in points["foxhunt.jobs.queue_depth"]] == [1]
    (finished,) = points["foxhunt.jobs.finished"]
    assert finished.value == 1 and dict(finished.attributes) == {
        "foxhunt.job.kind": "backtest", "foxhunt.job.state": "succeeded"}


def running_worker(store: JobStore, tmp_path, **config) -> tuple[Worker, threading.Thread, Endlessly]:
    executor = Endlessly()
    worker = Worker(store, WorkerConfig(home=tmp_path, once=True, heartbeat_s=0.05, **config),
                    executor)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert executor.started.wait(10)
    return worker, thread, executor


def test_a_cancelled_job_and_a_failed_heartbeat_are_events(tmp_path, otel_memory, monkeypatch):
    spans, reader = otel_memory
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    job = store.submit("train", ["SYN"])
    renew, failures = store.heartbeat, iter([DatabaseError("database is locked")])

    def flaky_heartbeat(*args):
        for exc in failures:
            raise exc
        return renew(*args)

    monkeypatch.setattr(store, "heartbeat", flaky_heartbeat)
    _, thread, _ = running_worker(store, tmp_path)
    time.sleep(0.3)
    store.cancel(job.id)
    thread.join(10)
    (span,) = job_spans(spans)
    assert events(span) == ["foxhunt.job.claimed", "foxhunt.job.heartbeat_failed",
                            "foxhunt.job.heartbeat_restored", "foxhunt.job.cancelled"]
    assert span.events[1].attributes["foxhunt.error"] == "database is locked"
    assert span.attributes["foxhunt.job.state"] == "cancelled"
    (finished,) = metric_points(reader)["foxhunt.jobs.finished"]
    assert finished.attributes["foxhunt.job.state"] == "cancelled"


def test_a_job_taken_over_or_left_by_a_stopping_worker_is_not_finished(tmp_path, otel_memory):
    spans, reader = otel_memory
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    taken = store.submit("train", ["SYN"])
    _, thread, _ = running_worker(store, tmp_path, lease_s=0.01)
    other = None
    while other is None:  # its lease runs out between heartbeats: another worker claims it
        other = store.claim("other", lease_s=60)
    thread.join(10)
    left = store.submit("train", ["SYN"])
    worker, thread, _ = running_worker(store, tmp_path)
    worker.stop()
    thread.join(10)
    by_id = {s.attributes["foxhunt.job.id"]: s for s in job_spans(spans)}
    assert events(by_id[taken.id])[-1] == "foxhunt.job.lease_lost"
    assert by_id[taken.id].events[-1].attributes["foxhunt.worker.now"] == "other"
    assert events(by_id[left.id])[-1] == "foxhunt.job.worker_stopping"
    assert {s.attributes["foxhunt.job.state"] for s in by_id.values()} == {"running"}
    assert store.get(left.id).state is JobState.RUNNING
    assert "foxhunt.jobs.finished" not in metric_points(reader)


def test_a_failed_job_span_has_error_status(tmp_path, otel_memory):
    from opentelemetry.trace import StatusCode

    spans, _ = otel_memory
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    store.submit("backtest", ["NOPE"])
    executor = Scripted(Outcome(1, "", ["error: NOPE: no such symbol"]))
    Worker(store, WorkerConfig(home=tmp_path, once=True), executor).run()
    (span,) = job_spans(spans)
    assert span.attributes["foxhunt.job.state"] == "failed"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "NOPE: no such symbol"


def test_a_jobs_child_gets_the_job_spans_trace_context(tmp_path, otel_memory):
    """The worker hands the child its job span's context (TRACEPARENT), so a training job's
    spans join the job's trace (tests/test_telemetry.py checks the child's side)."""
    spans, _ = otel_memory
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    store.submit("backtest", ["SYN"])
    envs = []
    executor = Scripted(Outcome(0, '{"kind": "backtest"}\n', []))
    start = executor.start
    executor.start = lambda job, command, env: envs.append(env) or start(job, command, env)
    Worker(store, WorkerConfig(home=tmp_path, once=True), executor).run()
    (span,) = job_spans(spans)
    (env,) = envs
    assert env[telemetry.TRACEPARENT_ENV].split("-")[1:3] == [f"{span.context.trace_id:032x}",
                                                            f"{span.context.span_id:016x}"]
