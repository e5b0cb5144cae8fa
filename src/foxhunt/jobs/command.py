"""What a job runs: `python -m foxhunt KIND ARGS... --json` in a child process, and how a job
that was cut off (its worker killed) picks up where it stopped.

Each kind resumes its own way, from files the run keeps:
- train: the same `--out` run directory with `--resume` (finished folds are kept; a fold cut
  off restarts from its last resume point);
- tune: the same study (`--out` directory, Optuna storage) with `--resume` once the study was
  created (its `space.toml` is written right after), else started afresh;
- paper: the same account with `--resume` (a run that never started starts);
- backtest: run again.

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
                given = f"jobs/job-{job.id}"
                args += ["--out", str(home / OUT_FOLDER[job.kind] / given)]
            out_dir = resolve_out(given, home, OUT_FOLDER[job.kind])
        if job.attempts > 1 and "--resume" not in args and cls._resumable(job.kind, out_dir):
            args.append("--resume")
        if (job.kind is JobKind.TUNE and trials_per_gpu
                and option_value(args, "--parallel") is None):
            args += ["--parallel", str(trials_per_gpu)]
        return cls(args=[job.kind.value, *args, "--json"], out_dir=out_dir)

    @staticmethod
    def _resumable(kind: JobKind, out_dir: Path | None) -> bool:
        if kind is JobKind.TUNE:
            return out_dir is not None and (out_dir / "space.toml").exists()
        return kind in (JobKind.TRAIN, JobKind.PAPER)
