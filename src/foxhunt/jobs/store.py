"""The `jobs` table: the queue, and what each job is doing, in foxhunt's database (db.py).

Every change of state is one transaction that reads the job's state, checks the move against
the state machine (`model.check_transition`) and writes it only where the row still holds what
was read (`WHERE state = <read>`), so two processes racing over one job cannot both win.

Claiming takes the oldest job that is queued, or running with its lease run out (its worker
was killed or lost the database). PostgreSQL: `SELECT ... FOR UPDATE SKIP LOCKED`, so claimers
pass over each other's rows instead of queueing on them. SQLite: the whole claim is one `BEGIN
IMMEDIATE` transaction (one writer at a time), and the `UPDATE` is conditional too. A claim
sets the worker, a lease `lease_s` ahead and attempts + 1; the worker renews the lease with
`heartbeat` and learns there whether the job was cancelled meanwhile.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from foxhunt.db import create_tables, db_error, open_db, write_transaction
from foxhunt.jobs.model import (
    Job,
    JobError,
    JobKind,
    JobState,
    UnknownJobError,
    check_transition,
)

MAX_ATTEMPTS = 3
"""A job whose worker died this many times fails instead of being claimed again."""
ERROR_CHARS = 500

metadata = sa.MetaData()
jobs_table = sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("submitted_by", sa.String(255), nullable=False, default=""),
    sa.Column("submitted_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float),
    sa.Column("finished_at", sa.Float),
    sa.Column("heartbeat_at", sa.Float),
    sa.Column("lease_until", sa.Float),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("worker", sa.String(255)),
    sa.Column("gpus", sa.Integer, nullable=False, default=0),
    sa.Column("progress", sa.Text, nullable=False, default="{}"),
    sa.Column("result", sa.Text),
    sa.Column("error", sa.Text),
)
_JSON_COLUMNS = ("args", "progress", "result")


def _job(row: sa.Row) -> Job:
    doc = dict(row._mapping)
    for key in _JSON_COLUMNS:
        if doc[key] is not None:
            doc[key] = json.loads(doc[key])
    return Job(**doc)


class JobStore:
    """The jobs of one database. Thread-safe (an engine's pool); one per process is enough."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self._dbapi_error = engine.dialect.loaded_dbapi.Error
        create_tables(engine, metadata)

    @classmethod
    def open(cls, url: str) -> JobStore:
        return cls(open_db(url))

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self, doing: str) -> Iterator[sa.Connection]:
        try:
            with write_transaction(self.engine) as conn:
                yield conn
        except (SQLAlchemyError, self._dbapi_error) as exc:
            raise db_error(self.engine, doing, exc) from None

    # -- what a user or the server does ------------------------------------------------------

    def submit(self, kind: JobKind | str, args: Sequence[str], submitted_by: str = "",
               gpus: int | None = None) -> Job:
        """Queue a job; `args` is the command's argument list (`foxhunt KIND ARGS...`). `gpus`:
        GPUs it asks for (default: 1 for train and tune, 0 otherwise)."""
        kind = JobKind.parse(kind) if isinstance(kind, str) else kind
        if not all(isinstance(a, str) for a in args):
            raise JobError("job arguments: a list of strings, as on the command line")
        if "--json" in args:
            args = [a for a in args if a != "--json"]  # the worker adds it
        if gpus is None:
            gpus = 1 if kind in (JobKind.TRAIN, JobKind.TUNE) else 0
        row = {"kind": kind.value, "args": json.dumps(list(args)), "state": JobState.QUEUED.value,
               "submitted_by": submitted_by, "submitted_at": time.time(), "attempts": 0,
               "gpus": gpus, "progress": "{}"}
        with self._tx("cannot queue the job") as conn:
            job_id = conn.execute(jobs_table.insert().values(row)).inserted_primary_key[0]
        return self.get(job_id)

    def get(self, job_id: int) -> Job:
        try:
            with self.engine.connect() as conn:
                row = conn.execute(sa.select(jobs_table).where(jobs_table.c.id == job_id)).first()
        except (SQLAlchemyError, self._dbapi_error) as exc:
            raise db_error(self.engine, "cannot read the jobs", exc) from None
        if row is None:
            raise UnknownJobError(f"job {job_id}: no such job (foxhunt jobs lists them)")
        return _job(row)

    def list(self, states: Sequence[JobState | str] = (), limit: int = 100) -> list[Job]:
        """The newest `limit` jobs (in `states`, when given), newest first."""
        q = sa.select(jobs_table).order_by(jobs_table.c.id.desc()).limit(limit)
        if states:
            q = q.where(jobs_table.c.state.in_([JobState(s).value for s in states]))
        try:
            with self.engine.connect() as conn:
                return [_job(r) for r in conn.execute(q)]
        except (SQLAlchemyError, self._dbapi_error) as exc:
            raise db_error(self.engine, "cannot read the jobs", exc) from None

    def count(self, states: Sequence[JobState | str] = ()) -> int:
        """How many jobs are in `states` (every job when empty): the queue's depth, for one."""
        q = sa.select(sa.func.count()).select_from(jobs_table)
        if states:
            q = q.where(jobs_table.c.state.in_([JobState(s).value for s in states]))
        try:
            with self.engine.connect() as conn:
                return int(conn.execute(q).scalar() or 0)
        except (SQLAlchemyError, self._dbapi_error) as exc:
            raise db_error(self.engine, "cannot read the jobs", exc) from None

    def cancel(self, job_id: int) -> Job:
        """Cancel a queued or running job; a running job's worker stops it within a heartbeat."""
        self._move(job_id, JobState.CANCELLED, finished_at=time.time())
        return self.get(job_id)

    # -- what a worker does --------------------------------------------------------------------

    def claim(self, worker: str, lease_s: float, max_gpus: int | None = None) -> Job | None:
        """The oldest claimable job, now this worker's (running, leased), or None. `max_gpus`:
        only jobs asking for at most that many GPUs."""
        now = time.time()
        t = jobs_table
        claimable = sa.or_(t.c.state == JobState.QUEUED.value,
                           sa.and_(t.c.state == JobState.RUNNING.value, t.c.lease_until < now))
        query = sa.select(t.c.id, t.c.state, t.c.attempts).where(claimable).order_by(t.c.id)
        if max_gpus is not None:
            query = query.where(t.c.gpus <= max_gpus)
        with self._tx("cannot claim a job") as conn:
            while True:
                row = conn.execute(query.limit(1).with_for_update(skip_locked=True)).first()
                if row is None:
                    return None
                job_id, state, attempts = row
                if attempts >= MAX_ATTEMPTS:
                    self._fail_abandoned(conn, job_id, attempts, now)
                    continue
                check_transition(job_id, JobState(state), JobState.RUNNING)
                done = conn.execute(t.update().where(t.c.id == job_id, claimable).values(
                    state=JobState.RUNNING.value, worker=worker, attempts=attempts + 1,
                    lease_until=now + lease_s, heartbeat_at=now,
                    started_at=sa.func.coalesce(t.c.started_at, now)))
                if done.rowcount == 1:
                    break
        return self.get(job_id)

    def _fail_abandoned(self, conn: sa.Connection, job_id: int, attempts: int, now: float) -> None:
        conn.execute(jobs_table.update().where(jobs_table.c.id == job_id).values(
            state=JobState.FAILED.value, finished_at=now, lease_until=None,
            error=f"its worker stopped {attempts} times without finishing it (killed, or lost "
                  "the database); submit it again"))

    def heartbeat(self, job_id: int, worker: str, lease_s: float) -> JobState:
        """Renew this worker's lease on a running job; returns the job's state, which is not
        `running` (or the job is no longer this worker's: `cancelled` is returned then too)
        when the worker must stop it."""
        now = time.time()
        t = jobs_table
        with self._tx("cannot renew the job's lease") as conn:
            done = conn.execute(t.update().where(
                t.c.id == job_id, t.c.worker == worker, t.c.state == JobState.RUNNING.value,
            ).values(lease_until=now + lease_s, heartbeat_at=now))
            if done.rowcount == 1:
                return JobState.RUNNING
            state = conn.execute(sa.select(t.c.state).where(t.c.id == job_id)).scalar()
        return JobState.CANCELLED if state in (None, JobState.RUNNING.value) else JobState(state)

    def report(self, job_id: int, worker: str, progress: dict[str, Any]) -> None:
        """Store a running job's progress (`phase`, `fold`, `epoch`, `fraction`, ...)."""
        t = jobs_table
        with self._tx("cannot store the job's progress") as conn:
            conn.execute(t.update().where(t.c.id == job_id, t.c.worker == worker,
                                          t.c.state == JobState.RUNNING.value)
                         .values(progress=json.dumps(progress, default=str)))

    def finish(self, job_id: int, worker: str, state: JobState, result: dict[str, Any] | None = None,
               error: str | None = None) -> Job:
        """End this worker's running job as succeeded or failed. A job cancelled meanwhile (or
        taken over by another worker) stays as it is."""
        if state not in (JobState.SUCCEEDED, JobState.FAILED):
            raise JobError(f"finish: {state} is not an outcome (succeeded or failed)")
        self._move(job_id, state, worker=worker, finished_at=time.time(),
                   result=None if result is None else json.dumps(result, default=str),
                   error=None if error is None else error[:ERROR_CHARS], lease_until=None,
                   quiet_if_lost=True)
        return self.get(job_id)

    def _move(self, job_id: int, new: JobState, worker: str | None = None,
              quiet_if_lost: bool = False, **values: Any) -> None:
        """`job_id` to `new`, checked against the state machine, in one transaction. With
        `worker`, only while the job is that worker's (else, with `quiet_if_lost`, nothing)."""
        t = jobs_table
        with self._tx(f"cannot mark the job {new}") as conn:
            row = conn.execute(sa.select(t.c.state, t.c.worker).where(t.c.id == job_id)
                               .with_for_update()).first()
            if row is None:
                raise UnknownJobError(f"job {job_id}: no such job (foxhunt jobs lists them)")
            current = JobState(row.state)
            if worker is not None and (row.worker != worker or current is not JobState.RUNNING):
                if quiet_if_lost:
                    return
                raise JobError(f"job {job_id} is not running on worker {worker}")
            check_transition(job_id, current, new)
            conn.execute(t.update().where(t.c.id == job_id, t.c.state == current.value)
                         .values(state=new.value, **values))
