"""Jobs: train, backtest, tune, paper and live runs queued in foxhunt's database and run by workers.

`model` holds a job and its state machine, `store` the `jobs` table (submit, list, cancel,
claim, heartbeat, progress, finish), `command` what a job runs (a `foxhunt` child process) and
how it resumes, `progress` what the worker reads of a running job, `worker` the loop that
claims and runs jobs, locally or as Ray tasks (`ray_exec`), `observe` its spans and metrics.

The database is the queue and the source of truth: a worker holds a job by a lease it renews
every second; a job whose lease ran out (its worker was killed) is claimed again by another
and resumed from its run directory; a job never runs on two workers at once.
"""

from foxhunt.jobs.model import (
    IllegalTransitionError,
    Job,
    JobError,
    JobKind,
    JobState,
    UnknownJobError,
)
from foxhunt.jobs.store import JobStore

__all__ = ["IllegalTransitionError", "Job", "JobError", "JobKind", "JobState", "JobStore",
           "UnknownJobError"]
