"""Jobs as OpenTelemetry spans and metrics, where `foxhunt.telemetry` is on (`foxhunt worker`
configures it as service `foxhunt-worker`).

Spans (instrumentation scope `foxhunt.jobs`): `foxhunt.job`, one per attempt of a job on a
worker, from its claim to its end, with `foxhunt.job.id`, `foxhunt.job.kind`,
`foxhunt.job.attempt`, `foxhunt.worker` and at its end `foxhunt.job.state` (the job's state
then: `running` where the worker gave it up, taken over or stopping); status ERROR where it
failed. Its events say what happened on the way: claimed, retried (the other way of
`--resume`), heartbeat failed and restored, cancelled, lease lost, worker stopping
(docs/telemetry.md, "Jobs", says when each comes).
Metrics: observable gauge `foxhunt.jobs.queue_depth` (jobs queued, read from the database at
each export) and counter `foxhunt.jobs.finished` (jobs this worker ended, by
`foxhunt.job.kind` and `foxhunt.job.state`).

Off, a worker builds none of this: a job's span is `telemetry.span`'s no-op.
"""

from __future__ import annotations

from typing import Any

from foxhunt import telemetry
from foxhunt.db import DatabaseError
from foxhunt.jobs.model import Job, JobState

SCOPE = "foxhunt.jobs"
SPAN = "foxhunt.job"

CLAIMED = "foxhunt.job.claimed"
RETRIED = "foxhunt.job.retried"
HEARTBEAT_FAILED = "foxhunt.job.heartbeat_failed"
HEARTBEAT_RESTORED = "foxhunt.job.heartbeat_restored"
CANCELLED = "foxhunt.job.cancelled"
LEASE_LOST = "foxhunt.job.lease_lost"
WORKER_STOPPING = "foxhunt.job.worker_stopping"


def job_attributes(job: Job, worker: str) -> dict[str, Any]:
    return {"foxhunt.job.id": job.id, "foxhunt.job.kind": job.kind.value,
            "foxhunt.job.attempt": job.attempts, "foxhunt.worker": worker}


def job_span(job: Job, worker: str):
    """The `foxhunt.job` span of one attempt (a no-op when telemetry is off)."""
    return telemetry.span(SPAN, job_attributes(job, worker), tracer_name=SCOPE)


def mark_ended(span: Any, job: Job) -> None:
    """The job's state at the attempt's end on its span; ERROR status where it failed."""
    span.set_attribute("foxhunt.job.state", job.state.value)
    if job.state is JobState.FAILED and span.is_recording():
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, job.error or "failed"))


class JobMetrics:
    """A worker's instruments, built once where telemetry is on."""

    def __init__(self, store) -> None:
        from opentelemetry.metrics import Observation

        self._store, self._observation = store, Observation
        m = telemetry.meter(SCOPE)
        self.finished = m.create_counter(
            "foxhunt.jobs.finished", unit="{job}",
            description="jobs this worker ended: succeeded, failed, or cancelled while running")
        m.create_observable_gauge(
            "foxhunt.jobs.queue_depth", callbacks=[self._queue_depth], unit="{job}",
            description="jobs queued in the database, waiting for a worker")

    def _queue_depth(self, options: Any) -> list[Any]:
        """Read at each export; a database out of reach skips a reading rather than fail it."""
        try:
            return [self._observation(self._store.count([JobState.QUEUED]))]
        except DatabaseError:
            return []

    def ended(self, job: Job) -> None:
        if job.state.finished:
            self.finished.add(1, {"foxhunt.job.kind": job.kind.value,
                                  "foxhunt.job.state": job.state.value})

    @classmethod
    def if_enabled(cls, store) -> JobMetrics | None:
        return cls(store) if telemetry.enabled() else None
