"""Rolling z-scoring of raw feature chunks beside their computation: a worker thread scales
finished chunks while the caller computes the next ones."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Self

import numpy as np
import torch

from foxhunt.features.normalise import RollingZScore


class Scaling:
    """Runs `RollingZScore.rows` jobs (raw, k0, k1, base) into `out`: at once on the calling
    thread, or, `threaded`, on a worker thread, the caller taking queued jobs itself when it
    calls `help` or `wait`. Jobs write disjoint rows of `out`; each thread has its own
    scaler (work buffers)."""

    Job = tuple[np.ndarray, int, int, int]

    def __init__(self, make: Callable[[], RollingZScore], out: np.ndarray, threaded: bool):
        self.out, self.threaded = out, threaded
        self.own = make()
        self.error: BaseException | None = None
        if threaded:
            self.jobs: queue.Queue[tuple[Scaling.Job, threading.Event] | None] = queue.Queue()
            self.side = make()
            self.thread = threading.Thread(target=self._work, name="foxhunt-zscore", daemon=True)

    def __enter__(self) -> Self:
        if self.threaded:
            try:
                self.thread.start()
            except RuntimeError:  # no thread to be had: scale on this one
                self.threaded = False
        return self

    def __exit__(self, *exc: object) -> None:
        if self.threaded:
            self.jobs.put(None)
            self.thread.join()

    def _run(self, scaler: RollingZScore, item: tuple[Scaling.Job, threading.Event]) -> None:
        (raw, k0, k1, base), finished = item
        try:
            if self.error is None:
                scaler.rows(raw, k0, k1, self.out, base)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread by wait()
            self.error = exc
        finally:
            finished.set()

    def _work(self) -> None:
        while (item := self.jobs.get()) is not None:
            self._run(self.side, item)

    def submit(self, job: Scaling.Job) -> threading.Event:
        finished = threading.Event()
        if not self.threaded:
            self.own.rows(job[0], job[1], job[2], self.out, job[3])
            finished.set()
            return finished
        self.jobs.put((job, finished))
        return finished

    def _take(self) -> bool:
        """Run one queued job here; whether there was one."""
        try:
            item = self.jobs.get_nowait()
        except queue.Empty:
            return False
        assert item is not None
        self._run(self.own, item)
        return True

    def help(self, backlog: int) -> None:
        """Run queued jobs here until at most `backlog` wait."""
        while self.threaded and self.jobs.qsize() > backlog and self._take():
            pass

    def wait(self, jobs: list[threading.Event]) -> None:
        """Return once the given jobs are done, running queued jobs meanwhile."""
        if self.threaded:
            for finished in jobs:
                while not finished.is_set():
                    if not self._take():
                        finished.wait()
            if self.error is not None:
                raise self.error


def second_core() -> bool:
    """Whether this process may run on more than one core and torch is allowed more than one
    thread (`torch.set_num_threads(1)` keeps the feature pipeline on one core too)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores > 1 and torch.get_num_threads() > 1
