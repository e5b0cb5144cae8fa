"""Jobs as Ray tasks: `foxhunt worker --ray ADDRESS|auto|local` hands each job it claims to
Ray instead of starting the child itself, so jobs spread over a Ray cluster (a training job
asks for a GPU where the cluster has any). Ray only places and runs the child: the database
stays the queue and the record, and the worker still heartbeats, reports and finishes the job.
Cancelling kills the task's process (`ray.cancel(force=True)`), and the child dies with it.
"""

from __future__ import annotations

import os
import sys

from foxhunt.jobs.child import Outcome, run_to_end
from foxhunt.jobs.command import JobCommand
from foxhunt.jobs.model import Job, JobError, JobKind


def _remote_job(args: list[str], env: dict[str, str]) -> Outcome:
    """On a Ray node: the child on that node's interpreter, with the worker's FOXHUNT_HOME."""
    return run_to_end([sys.executable, "-m", "foxhunt", *args], {**os.environ, **env})


class RayRunning:
    def __init__(self, ray, ref):
        self._ray, self.ref, self.pid = ray, ref, None

    def poll(self) -> int | None:
        ready, _ = self._ray.wait([self.ref], timeout=0)
        return None if not ready else self.outcome().returncode

    def stop(self) -> None:
        self._ray.cancel(self.ref, force=True)

    def outcome(self) -> Outcome:
        try:
            return Outcome(*self._ray.get(self.ref))
        except Exception as exc:  # noqa: BLE001 - Ray's task errors, one line for the job
            line = str(exc).strip().splitlines()
            return Outcome(1, "", [f"error: the Ray task failed ({line[-1] if line else exc})"])


class RayExecutor:
    """Starts jobs as Ray tasks on the cluster at `address` ("auto": the running one;
    "local": a new one on this machine, `num_cpus` CPUs)."""

    def __init__(self, address: str, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise JobError("--ray needs Ray: pip install 'foxhunt[ray]'") from None
        self._ray = ray
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, "log_to_driver": False}
            try:
                if address == "local":
                    ray.init(num_cpus=num_cpus, **kwargs)
                else:
                    ray.init(address=address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise JobError(f"--ray {address}: cannot join the Ray cluster "
                               f"({str(exc).strip().splitlines()[0]}); start it (ray start "
                               "--head) or use --ray local") from None
        self._gpus = ray.cluster_resources().get("GPU", 0) > 0
        self._task = ray.remote(max_retries=0)(_remote_job)

    def start(self, job: Job, command: JobCommand, env: dict[str, str]) -> RayRunning:
        gpus = 1 if self._gpus and job.kind in (JobKind.TRAIN, JobKind.TUNE) and job.gpus else 0
        ref = self._task.options(num_cpus=1, num_gpus=gpus).remote(command.args, env)
        return RayRunning(self._ray, ref)
