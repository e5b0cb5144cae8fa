"""What a job runs: `python -m foxhunt KIND ARGS... --json` in a child process, and how a job
that was cut off (its worker killed) picks up where it stopped.

Each kind resumes its own way, from files the run keeps:
- train: the same `--out` run directory with `--resume` (finished folds are kept; a fold cut
  off restarts from its last resume point);
- tune: the same study (`--out` directory, Optuna storage) with `--resume` once the study was
  created (its `space.toml` is written right after), else started afresh;
- paper: the same account with `--resume` once the run's arguments file exists (written when
  the run starts), else started afresh: `foxhunt paper --resume` refuses an account that never
  started, so that a mistyped name does not start a new run;
- backtest: run again;
- live: run again: every start of `foxhunt live` reconciles the account's log with the venue
  (what the venue did meanwhile is applied, nothing is sent twice); cancelling the job sends
  SIGTERM, which ends the session as Ctrl-C does.

What the run leaves can still mislead for a moment: a tune study created in the storage by a
child killed before it wrote `space.toml` makes the fresh start refuse ("already exists ...
continue it with --resume"). The worker then runs the other of the two once (`fallback`).

A job submitted without `--out` (train, tune) gets `jobs/job-ID` under FOXHUNT_HOME/runs or
/studies, so every attempt writes the same directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from foxhunt.jobs.model import Job, JobKind

OUT_FOLDER = {JobKind.TRAIN: "runs", JobKind.TUNE: "studies"}


def option_value(args: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in `args` (the last one given)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def resolve_out(value: str, home: Path, folder: str) -> Path:
    """`--out` as the CLI places it (cli.common.under_home): a bare NAME under home/folder."""
    if "/" in value or value in (".", ".."):
        return Path(value)
    return home / folder / value


class JobCommand(BaseModel):
    """The child process of one attempt of a job: `foxhunt`'s arguments and the run
    directory (if any)."""

    model_config = ConfigDict(frozen=True)

    args: list[str]
    out_dir: Path | None = None
    retry: bool = False
    """An attempt after the first (a worker was killed): resuming is the worker's choice."""
    added_resume: bool = False
    """Whether `--resume` is the worker's (`fallback` may take it back) or the user's."""

    def argv(self, python: str | None = None) -> list[str]:
        """The child's command line, on `python` (default: this interpreter; a Ray node passes
        its own)."""
        return [python or sys.executable, "-m", "foxhunt", *self.args]

    @classmethod
    def of(cls, job: Job, home: Path, trials_per_gpu: int | None = None) -> JobCommand:
        """The command of `job`'s current attempt (`job.attempts`: 1 the first), FOXHUNT_HOME
        being `home`."""
        args = list(job.args)
        out_dir = None
        if job.kind in OUT_FOLDER:
            given = option_value(args, "--out")
            if given is None:
                out_dir = home / OUT_FOLDER[job.kind] / "jobs" / f"job-{job.id}"
                args += ["--out", str(out_dir)]
            else:
                out_dir = resolve_out(given, home, OUT_FOLDER[job.kind])
        retry = job.attempts > 1
        added = retry and "--resume" not in args and cls._resumable(job, home, out_dir)
        if added:
            args.append("--resume")
        if (job.kind is JobKind.TUNE and trials_per_gpu
                and option_value(args, "--parallel") is None):
            args += ["--parallel", str(trials_per_gpu)]
        return cls(args=[job.kind.value, *args, "--json"], out_dir=out_dir, retry=retry,
                   added_resume=added)

    @staticmethod
    def _resumable(job: Job, home: Path, out_dir: Path | None) -> bool:
        if job.kind is JobKind.TUNE:
            return out_dir is not None and (out_dir / "space.toml").exists()
        if job.kind is JobKind.PAPER:
            from foxhunt.paper.account_files import AccountFiles

            account = option_value(job.args, "--account") or "paper"
            return AccountFiles.of(home, account, option_value(job.args, "--log")).meta.exists()
        return job.kind is JobKind.TRAIN

    def fallback(self, error: str | None) -> JobCommand | None:
        """This command with the worker's choice of `--resume` reversed, where a retried
        attempt's child refused that choice (`error`, its error line, says to run it without
        --resume, or with it); else None. A user's own `--resume` is never taken away, and a
        first attempt's refusal stands (it answers the user's mistake)."""
        if not self.retry or error is None:
            return None
        if self.added_resume and "without --resume" in error:
            args = [a for a in self.args if a != "--resume"]
            return self.model_copy(update={"args": args, "added_resume": False})
        if not self.added_resume and "--resume" not in self.args and "with --resume" in error \
                and "without --resume" not in error:
            args = [*self.args, "--resume"]
            return self.model_copy(update={"args": args, "added_resume": True})
        return None
