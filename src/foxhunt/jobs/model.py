"""A job, its kinds and its states: an explicit state machine whose illegal moves raise.

    queued ──claim──> running ──> succeeded | failed
      │                 │  └─ lease ran out: claimed again (running, attempt + 1)
      └──cancel──> cancelled <──cancel──┘

A finished job (succeeded, failed, cancelled) never moves again: to run it again, submit it
again.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from foxhunt.errors import FoxhuntError


class JobError(FoxhuntError):
    """A job request that cannot be honoured (unknown job, bad arguments, illegal move)."""


class UnknownJobError(JobError):
    pass


class IllegalTransitionError(JobError):
    pass


class JobKind(StrEnum):
    TRAIN = "train"
    BACKTEST = "backtest"
    TUNE = "tune"
    PAPER = "paper"
    LIVE = "live"

    @classmethod
    def parse(cls, text: str) -> JobKind:
        try:
            return cls(text)
        except ValueError:
            raise JobError(f"job kind {text!r}: expected one of "
                           f"{', '.join(k.value for k in cls)}") from None


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in FINISHED


FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLED}),
    # running -> running: another worker takes over a job whose lease ran out
    JobState.RUNNING: frozenset({JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED,
                                 JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


def check_transition(job_id: int, current: JobState, new: JobState) -> None:
    """Raise `IllegalTransitionError` (one line) unless `current -> new` is a move of the
    state machine."""
    if new not in TRANSITIONS[current]:
        why = " (a finished job never moves again; submit it again)" if current.finished else ""
        raise IllegalTransitionError(f"job {job_id} is {current}: it cannot become {new}{why}")


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class Job(BaseModel):
    """One row of the `jobs` table, as read."""

    model_config = ConfigDict(frozen=True)

    id: int
    kind: JobKind
    args: list[str]
    state: JobState
    submitted_by: str
    submitted_at: float
    started_at: float | None = None
    finished_at: float | None = None
    heartbeat_at: float | None = None
    lease_until: float | None = None
    attempts: int = 0
    worker: str | None = None
    gpus: int = 0
    progress: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    error: str | None = None

    def lease_expired(self, now: float | None = None) -> bool:
        return (self.state is JobState.RUNNING and self.lease_until is not None
                and self.lease_until < (time.time() if now is None else now))

    def doc(self) -> dict[str, Any]:
        """The job as in the `job` and `jobs` JSON documents (times as ISO 8601, UTC)."""
        d = self.model_dump(mode="json")
        for key in ("submitted_at", "started_at", "finished_at", "heartbeat_at", "lease_until"):
            d[key] = iso(getattr(self, key))
        return d
