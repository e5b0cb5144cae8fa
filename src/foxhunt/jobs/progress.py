"""A running job's progress, read by its worker from what the run writes anyway.

The child runs with `--json`, which keeps its terminal output quiet; its run directory says
how far it got: a training run's `run.jsonl` holds one line per finished epoch (fold, epoch,
loss, validation Sharpe) and `spec.json` the folds and epochs it will run; a study's
`trials/NNNN/` one folder per trial started. Reading files (not the child's output) also works
for a child on another machine of a Ray cluster that shares the run folders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from foxhunt.jobs.command import JobCommand, option_value
from foxhunt.jobs.model import Job, JobKind


def _last_line(path: Path) -> tuple[int, dict[str, Any] | None]:
    """(how many whole lines `path` holds, the last of them parsed)."""
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        return len(lines), (json.loads(lines[-1]) if lines else None)
    except (OSError, ValueError):
        return 0, None


def train_progress(out_dir: Path) -> dict[str, Any]:
    done, last = _last_line(out_dir / "run.jsonl")
    try:
        spec = json.loads((out_dir / "spec.json").read_text())
        total = spec["walkforward"]["folds"] * spec["train"]["epochs"]
    except (OSError, ValueError, KeyError, TypeError):
        total = None
    doc: dict[str, Any] = {"phase": "training" if last else "setting up", "epochs_done": done}
    if total:
        doc.update(epochs_total=total, fraction=min(1.0, done / total))
    if last:
        doc.update(fold=last.get("fold"), epoch=last.get("epoch"), loss=last.get("loss"),
                   val_sharpe=(last.get("val") or {}).get("sharpe"))
    return doc


def tune_progress(out_dir: Path, args: list[str]) -> dict[str, Any]:
    trials_dir = out_dir / "trials"
    started = sum(1 for p in trials_dir.iterdir() if p.is_dir()) if trials_dir.is_dir() else 0
    total = int(option_value(args, "--trials") or 50)
    return {"phase": "trials", "trials_started": started, "trials_total": total,
            "fraction": min(1.0, max(0, started - 1) / total)}


def probe(job: Job, command: JobCommand) -> dict[str, Any]:
    """What `job` has done so far, as its `progress` column holds it."""
    if command.out_dir is not None and job.kind is JobKind.TRAIN:
        return train_progress(command.out_dir)
    if command.out_dir is not None and job.kind is JobKind.TUNE:
        return tune_progress(command.out_dir, job.args)
    return {"phase": "running"}
