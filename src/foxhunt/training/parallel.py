"""Walk-forward folds trained at once, in worker processes (`foxhunt train --parallel-folds N`).

Folds are independent given the run's spec and `fold_seed(fold)` (`fold_state.FOLD_BOUNDARY`),
so a fold trained in a worker is the fold the sequential path trains: on the CPU its
checkpoint and folds.json entry are identical bit for bit (tests/training/test_parallel_folds.py).

Each worker is a spawned process that trains the folds it takes from a queue, one at a time,
on its own device: on CUDA worker w sees only GPU `w mod count` (`CUDA_VISIBLE_DEVICES`), so a
worker's later folds reuse what its first compiled, as the sequential path's do; on the CPU
the workers share the cores, `max(1, cores // N)` threads each. The parent alone writes the run
directory's shared files: the epochs' lines as they come (each carries its fold), folds.json in
fold order after each fold, and at the end run.jsonl and timings.jsonl grouped by fold, as the
sequential path leaves them. A worker writes only its fold's checkpoints.
"""

from __future__ import annotations

import gc
import json
import math
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import torch

from foxhunt.errors import ConfigError, FoxhuntError
from foxhunt.training.checkpoint import read_checkpoint
from foxhunt.training.tracking import RunTracker
from foxhunt.training.trainer import (
    PHASES,
    FoldReport,
    RunResult,
    WalkForwardTrainer,
    asdict_report,
)
from foxhunt.training.walkforward import Fold

POLL_S = 0.5
"""How often the parent, waiting for its workers' news, checks that each is still alive."""
STOP_S = 10.0
"""How long a worker told to stop (SIGTERM) has before it is killed."""
LOGS = ("run.jsonl", "timings.jsonl")
CALLBACKS = ("on_epoch", "on_fold", "tracker")


class FoldWorkerError(FoxhuntError):
    """A fold failed in its worker, or a worker died: the run stops with this one line."""


class ParallelFolds:
    """`WalkForwardTrainer.run(parallel=ParallelFolds(n))`: up to `n` folds at once."""

    def __init__(self, width: int):
        if width < 1:
            raise ConfigError(f"parallel folds: {width} is not a number of folds at once "
                              "(1 or more)")
        self.width = width

    def run(self, trainer: WalkForwardTrainer, result: RunResult, done: dict[int, FoldReport],
            pending: list[Fold], resume: bool, began: float) -> None:
        run_parallel(trainer, result, done, pending, resume, self.width, began)


def run_parallel(trainer: WalkForwardTrainer, result: RunResult, done: dict[int, FoldReport],
                 pending: list[Fold], resume: bool, width: int, began: float) -> None:
    """`trainer.run`'s folds, `width` at once (at most one a pending fold): the parent records
    what the workers report, in the order they report it, and raises the first failure."""
    width = min(width, len(pending))
    walls = [0.0]

    def phases() -> dict[str, Any]:
        return {**trainer.phase_split(walls[0]), "wall_s": round(time.perf_counter() - began, 3),
                "parallel_folds": width}

    for index in sorted(done):
        trainer._fold_recorded(result, done[index], phases())
    prior = _prepare_logs(trainer, pending) if resume else {}
    with _Workers(trainer, width, resume) as workers:
        workers.submit([(fold.index, prior.get(fold.index, [])) for fold in pending])
        for kind, *body in workers.news(len(pending)):
            if kind == "epoch":
                line, timing = body
                trainer._log_epoch(line, timing)
                if trainer.on_epoch:
                    trainer.on_epoch({**line, **timing})
            else:
                doc, fold_phases, wall = body
                for key in PHASES:
                    trainer.phases[key] += fold_phases[key]
                walls[0] += wall
                trainer._fold_recorded(result, FoldReport(**doc), phases())
    _group_logs(trainer.run_dir)


def _prepare_logs(trainer: WalkForwardTrainer, pending: list[Fold]) -> dict[int, list[dict]]:
    """Before any worker starts, what `_resume` does to the logs for each unfinished fold (cut
    after its resume point), and each fold's lines kept: the workers then never read a file
    the parent appends to."""
    prior = {}
    for fold in pending:
        path = trainer.run_dir / "checkpoints" / f"fold{fold.index}_last.pt"
        last = read_checkpoint(path)["extra"]["epoch"] if path.exists() else -1
        trainer._truncate_logs(fold.index, last)
        prior[fold.index] = trainer._logged_epochs(fold.index) if last >= 0 else []
    return prior


def _group_logs(run_dir: Path) -> None:
    """run.jsonl and timings.jsonl with each fold's lines together, in fold order (each fold's
    in the order it wrote them), as the sequential path writes them."""
    for name in LOGS:
        path = run_dir / name
        if path.exists():
            lines = [ln for ln in path.read_text().splitlines() if ln]
            lines.sort(key=lambda ln: json.loads(ln)["fold"])
            path.write_text("".join(ln + "\n" for ln in lines))


def fold_threads(width: int) -> int:
    """CPU threads a worker gets when `width` share the cores. A CPU run is reproduced bit for
    bit only at the same threads a process (float sums split differently), so a parallel CPU
    run equals the sequential run at this many threads (`torch.set_num_threads`); every worker
    at the parent's count instead oversubscribes the cores (a 2-fold test run: 110 s against
    38 s one fold at a time)."""
    return max(1, torch.get_num_threads() // width)


def _placements(device: torch.device, width: int) -> list[dict[str, Any]]:
    """Per worker: the GPU it sees (of those this process sees, in turn) or its CPU threads."""
    if device.type == "cuda":
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = ([g.strip() for g in seen.split(",") if g.strip()] if seen
                else [str(i) for i in range(max(1, torch.cuda.device_count()))])
        return [{"gpu": gpus[w % len(gpus)]} for w in range(width)]
    return [{"threads": fold_threads(width)}] * width


class _Workers:
    """`width` spawned fold workers, their job queue and their news; stopped on leaving, however
    the run ends (a failure, Ctrl-C, a callback that raises)."""

    def __init__(self, trainer: WalkForwardTrainer, width: int, resume: bool):
        state = {k: v for k, v in trainer.__dict__.items() if k not in CALLBACKS}
        try:
            blob = pickle.dumps(state)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise FoxhuntError(f"parallel folds: the trainer cannot be sent to a worker process "
                               f"({exc}); give picklable callables or train one fold at a time"
                               ) from None
        mp = multiprocessing.get_context("spawn")
        self.jobs, self.events = mp.Queue(), mp.Queue()
        self.procs = [mp.Process(target=_worker_main, name=f"foxhunt-fold-worker-{w}",
                                 args=(blob, place, self.jobs, self.events, resume))
                      for w, place in enumerate(_placements(trainer.device, width))]

    def __enter__(self) -> Self:
        for proc in self.procs:
            proc.start()
        return self

    def submit(self, jobs: list[tuple[int, list[dict]]]) -> None:
        for job in jobs:
            self.jobs.put(job)
        for _ in self.procs:
            self.jobs.put(None)

    def news(self, folds: int) -> Iterator[tuple[Any, ...]]:
        """Each epoch's and each finished fold's message until `folds` folds are done; a
        worker's failure, or its death, raises `FoldWorkerError`."""
        while folds:
            try:
                msg = self.events.get(timeout=POLL_S)
            except queue.Empty:
                self._check_alive()
                continue
            if msg[0] == "error":
                where = "parallel folds: a worker" if msg[1] is None else f"fold {msg[1]}"
                raise FoldWorkerError(f"{where}: {msg[2]}")
            folds -= msg[0] == "fold"
            yield msg[0], *msg[2:]

    def _check_alive(self) -> None:
        for proc in self.procs:
            if proc.exitcode not in (None, 0):
                raise FoldWorkerError(f"parallel folds: {proc.name} died (exit code "
                                      f"{proc.exitcode}) before its fold finished")
        if all(proc.exitcode == 0 for proc in self.procs) and self.events.empty():
            raise FoldWorkerError("parallel folds: every worker ended with folds unreported")

    def __exit__(self, failed: type[BaseException] | None, *_: object) -> None:
        """After the last fold the workers end on their own (their queue said stop); after a
        failure they are told to stop (SIGTERM), and killed if they do not within STOP_S."""
        for proc in self.procs:
            if failed is not None and proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + STOP_S
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.terminate()
                proc.join(STOP_S)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for q in (self.jobs, self.events):
            q.cancel_join_thread()
            q.close()


class _FoldWorker(WalkForwardTrainer):
    """The parent's trainer in a worker: it trains the folds it is given and sends their epoch
    lines and reports to the parent instead of writing the run's shared files."""

    events: Any
    prior: dict[int, list[dict[str, Any]]]
    parent: int

    @classmethod
    def of(cls, state: dict[str, Any], events: Any) -> _FoldWorker:
        worker = cls.__new__(cls)
        worker.__dict__.update(state)
        worker.on_epoch = worker.on_fold = None
        worker.tracker, worker.events, worker.prior = RunTracker.off(), events, {}
        worker.parent = os.getppid()
        return worker

    def _log_epoch(self, line: dict[str, Any], timing: dict[str, Any]) -> None:
        """To the parent; a worker whose parent is gone (killed outright) stops here rather
        than train on for no one."""
        if os.getppid() != self.parent:
            raise SystemExit(1)
        self.events.put(("epoch", line["fold"], line, timing))

    def _truncate_logs(self, fold: int, last_epoch: int) -> None:
        """Done by the parent before the workers started (`_prepare_logs`)."""

    def _logged_epochs(self, fold: int) -> list[dict[str, Any]]:
        return self.prior.get(fold, [])

    def train_one(self, index: int, prior: list[dict[str, Any]], resume: bool) -> None:
        """Fold `index` from its boundary (or resume point) to its report, which goes to the
        parent with the fold's phase seconds and wall."""
        fold = next(f for f in self.folds if f.index == index)
        self.prior[index], self.phases = prior, dict.fromkeys(PHASES, 0.0)
        start = time.perf_counter()
        report = self._run_fold(fold, resume)
        self.events.put(("fold", index, asdict_report(report), dict(self.phases),
                         time.perf_counter() - start))
        self._give_back_memory()

    def _give_back_memory(self) -> None:
        """The finished fold's GPU memory back to the device, not kept in this process's cache,
        for workers sharing a GPU (a fold's learner is released on return, its cached blocks
        are not)."""
        if self.device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()


def _worker_main(blob: bytes, place: dict[str, Any], jobs: Any, events: Any,
                 resume: bool) -> None:
    """A worker's life: see only its GPU (before anything touches CUDA) or its share of the
    cores, then train folds until the queue says stop. Ctrl-C is the parent's to handle: it
    stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if "gpu" in place:
        os.environ["CUDA_VISIBLE_DEVICES"] = place["gpu"]
    else:
        torch.set_num_threads(place["threads"])
    index = None
    try:
        state = pickle.loads(blob)
        if state["device"].type == "cuda":
            state["device"] = torch.device("cuda")
        worker = _FoldWorker.of(state, events)
        while (job := jobs.get()) is not None:
            index, prior = job
            worker.train_one(index, prior, resume)
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent as one line
        if not isinstance(exc, FoxhuntError):
            traceback.print_exc(file=sys.stderr)
        events.put(("error", index, _one_line(exc)))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    what = text[0] if text else ""
    if isinstance(exc, FoxhuntError):
        return what or type(exc).__name__
    return f"{type(exc).__name__}: {what}" if what else type(exc).__name__


def rounds(folds: int, width: int) -> int:
    """How many folds' times a run of `folds` folds, `width` at once, takes at least."""
    return math.ceil(folds / max(1, width))

