"""`foxhunt worker`: claim jobs from the database and run them, one per slot.

A slot is a GPU (`--gpus 0,1`: two slots, each job's child sees only its GPU through
CUDA_VISIBLE_DEVICES; a tune job runs `--trials-per-gpu` trials at once on it) or, without
GPUs, a CPU slot (`--slots N`). For each claimed job the worker starts the child (`child.py`,
or a Ray task: `ray_exec.py`) and, every `heartbeat_s`, renews the job's lease, learns whether
it was cancelled (then stops the child) and stores its progress when it changed (at most every
`progress_every_s`). When the child ends, its `--json` document is the job's result, or its
last error line the job's error.

A worker killed with SIGKILL takes its children with it (child.py); its jobs keep state
`running` until their leases run out, when another worker claims and resumes them.

Where telemetry is on, each attempt is a `foxhunt.job` span and the worker reports the queue's
depth and the jobs it ended (observe.py).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from foxhunt import telemetry
from foxhunt.db import DatabaseError
from foxhunt.jobs.child import ChildProcess, Outcome, home_of
from foxhunt.jobs.command import JobCommand
from foxhunt.jobs.model import Job, JobState
from foxhunt.jobs.observe import (
    CANCELLED,
    CLAIMED,
    HEARTBEAT_FAILED,
    HEARTBEAT_RESTORED,
    LEASE_LOST,
    RETRIED,
    WORKER_STOPPING,
    JobMetrics,
    job_span,
    mark_ended,
)
from foxhunt.jobs.progress import probe
from foxhunt.jobs.store import JobStore


class Running(Protocol):
    pid: int | None

    def poll(self) -> int | None: ...

    def stop(self) -> None: ...

    def outcome(self) -> Outcome: ...


class Executor(Protocol):
    def start(self, job: Job, command: JobCommand, env: dict[str, str]) -> Running: ...


class LocalExecutor:
    """Children on this machine, each in its FOXHUNT_HOME."""

    def start(self, job: Job, command: JobCommand, env: dict[str, str]) -> Running:
        env = {**os.environ, **env}
        return ChildProcess(command.argv(), env, cwd=home_of(env))


class WorkerConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    home: Path = Field(description="FOXHUNT_HOME of the children")
    name: str = Field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:"
                                              f"{uuid.uuid4().hex[:6]}")
    gpus: tuple[str, ...] = ()
    slots: int = Field(1, ge=1, description="jobs at once without --gpus")
    trials_per_gpu: int | None = Field(None, ge=1)
    lease_s: float = Field(15.0, gt=0)
    heartbeat_s: float = Field(1.0, gt=0, description="seconds between lease renewals; "
                               "`foxhunt worker` keeps them to a third of the lease at most")
    poll_s: float = Field(1.0, gt=0)
    progress_every_s: float = Field(2.0, ge=0)
    once: bool = False
    max_jobs: int | None = Field(None, ge=1)

    @property
    def slot_gpus(self) -> list[str | None]:
        return list(self.gpus) if self.gpus else [None] * self.slots


def outcome_of(out: Outcome) -> tuple[JobState, dict[str, Any] | None, str | None]:
    """(succeeded or failed, the result document, the error line) of a finished child."""
    if out.returncode == 0:
        for line in reversed(out.stdout.splitlines()):
            try:
                return JobState.SUCCEEDED, json.loads(line), None
            except ValueError:
                continue
        return JobState.SUCCEEDED, None, None
    errors = [ln for ln in out.stderr_tail if ln.startswith("error:")]
    tail = [ln for ln in out.stderr_tail if ln.strip()]
    line = (errors or tail or [f"the command exited with status {out.returncode}"])[-1]
    return JobState.FAILED, None, line.removeprefix("error:").strip()


class JobRun:
    """One attempt of a claimed job, from its child's start to the job's end state, inside its
    `foxhunt.job` span (observe.py)."""

    def __init__(self, store: JobStore, config: WorkerConfig, executor: Executor, job: Job,
                 gpu: str | None, metrics: JobMetrics | None = None):
        self.store, self.config, self.executor, self.job, self.gpu = store, config, executor, job, gpu
        self.metrics = metrics
        self._reported: dict[str, Any] | None = None
        self._heartbeat_ok = True

    def run(self, stopping: threading.Event) -> Job:
        with job_span(self.job, self.config.name) as span:
            span.add_event(CLAIMED, {"foxhunt.job.resumed": self.job.attempts > 1,
                                     **({"foxhunt.gpu": self.gpu} if self.gpu is not None else {})})
            ended = self._run(stopping, span)
            mark_ended(span, ended)
        if self.metrics is not None:
            self.metrics.ended(ended)
        return ended

    def _run(self, stopping: threading.Event, span: Any) -> Job:
        cfg, job = self.config, self.job
        command = JobCommand.of(job, cfg.home, cfg.trials_per_gpu if self.gpu else None)
        ended = self._child(command, stopping, span)
        other = command.fallback(ended[2]) if ended is not None else None
        if other is not None:
            span.add_event(RETRIED, {"foxhunt.error": ended[2] or ""})
            command, ended = other, self._child(other, stopping, span)
        if ended is None:
            return self._given_up(stopping, span)
        state, result, error = ended
        if self._reported is not None and command.out_dir is not None:
            self._quietly(self.store.report, job.id, cfg.name,
                          {**probe(job, command), "phase": "done", "attempt": job.attempts})
        return self.store.finish(job.id, cfg.name, state, result, error)

    def _child(self, command: JobCommand, stopping: threading.Event, span: Any
               ) -> tuple[JobState, dict[str, Any] | None, str | None] | None:  # fmt: skip
        """Run `command`'s child to its end: its outcome, or None where it was stopped (the
        job cancelled or taken over, or the worker stopping)."""
        cfg, job = self.config, self.job
        env = {"FOXHUNT_HOME": str(cfg.home), **telemetry.trace_env()}
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        running = self.executor.start(job, command, env)
        last_report = 0.0
        while running.poll() is None:
            if stopping.is_set() or self._lost(span):
                running.stop()
                return None
            now = time.monotonic()
            if now - last_report >= cfg.progress_every_s:
                progress = {**probe(job, command), "attempt": job.attempts, "pid": running.pid,
                            **({"gpu": self.gpu} if self.gpu is not None else {})}
                if progress != self._reported:
                    self._quietly(self.store.report, job.id, cfg.name, progress)
                    self._reported, last_report = progress, now
            stopping.wait(cfg.heartbeat_s)
        return outcome_of(running.outcome())

    def _lost(self, span: Any) -> bool:
        """Renew the lease: whether the job is no longer this worker's to run (cancelled, taken
        over). A failed renewal is not a loss: the lease outlasts a short database outage."""
        try:
            state = self.store.heartbeat(self.job.id, self.config.name, self.config.lease_s)
        except DatabaseError as exc:
            if self._heartbeat_ok:
                span.add_event(HEARTBEAT_FAILED, {"foxhunt.error": str(exc)})
            self._heartbeat_ok = False
            return False
        if not self._heartbeat_ok:
            span.add_event(HEARTBEAT_RESTORED)
        self._heartbeat_ok = True
        return state is not JobState.RUNNING

    def _given_up(self, stopping: threading.Event, span: Any) -> Job:
        """The job as this worker leaves it after stopping its child, and why on the span."""
        job = self.store.get(self.job.id)
        if stopping.is_set():
            span.add_event(WORKER_STOPPING)
        elif job.state is JobState.CANCELLED:
            span.add_event(CANCELLED)
        else:
            span.add_event(LEASE_LOST, {"foxhunt.worker.now": job.worker or ""})
        return job

    @staticmethod
    def _quietly(call: Callable[..., Any], *args: Any) -> Any:
        """A database call that may fail for a moment (the lease outlasts a short outage)."""
        try:
            return call(*args)
        except DatabaseError:
            return None


class Worker:
    """Claims and runs jobs until stopped (`stop()`), or, with `once`, until the queue is empty
    and its jobs are done, or `max_jobs` jobs have run."""

    def __init__(self, store: JobStore, config: WorkerConfig, executor: Executor | None = None,
                 on_change: Callable[[Job], None] | None = None):
        self.store, self.config = store, config
        self.executor = executor or LocalExecutor()
        self.on_change = on_change or (lambda job: None)
        self.stopping = threading.Event()
        self.metrics = JobMetrics.if_enabled(store)

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> list[Job]:
        """The jobs this worker ran, as they ended."""
        free = self.config.slot_gpus
        running: dict[Future[Job], str | None] = {}
        finished: list[Job] = []
        with ThreadPoolExecutor(len(free), thread_name_prefix="job") as pool:
            try:
                self._loop(pool, free, running, finished)
            except BaseException:
                self.stopping.set()  # the job threads stop their children, then end
                raise
            for future in list(running):
                finished.append(future.result())
        return finished

    def _loop(self, pool: ThreadPoolExecutor, free: list[str | None],
              running: dict[Future[Job], str | None], finished: list[Job]) -> None:
        cfg = self.config
        claimed = 0
        while not self.stopping.is_set():
            while free and (cfg.max_jobs is None or claimed < cfg.max_jobs):
                gpu = free[0]
                job = self.store.claim(cfg.name, cfg.lease_s, None if gpu is None else 1)
                if job is None:
                    break
                free.pop(0)
                claimed += 1
                self.on_change(job)
                run = JobRun(self.store, cfg, self.executor, job, gpu, self.metrics)
                running[pool.submit(run.run, self.stopping)] = gpu
            done_all = cfg.max_jobs is not None and claimed >= cfg.max_jobs
            if not running and (done_all or cfg.once):
                break
            if not running:
                self.stopping.wait(cfg.poll_s)
                continue
            done, _ = wait(running, timeout=cfg.poll_s, return_when=FIRST_COMPLETED)
            for future in done:
                free.append(running.pop(future))
                finished.append(future.result())
                self.on_change(finished[-1])
