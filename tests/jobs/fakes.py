"""Executors whose children are stand-ins, for what a worker does around a child: its end,
its retry, its spans."""

from __future__ import annotations

import threading

from foxhunt.jobs.child import Outcome
from foxhunt.jobs.worker import LocalExecutor


class Ended:
    """A child that has already ended with `outcome`."""

    pid = None

    def __init__(self, outcome):
        self._outcome = outcome

    def poll(self):
        return self._outcome.returncode

    def stop(self):
        pass

    def outcome(self):
        return self._outcome


class Scripted:
    """An executor whose children end as scripted; `ran`: the arguments of each."""

    def __init__(self, *outcomes):
        self.outcomes, self.ran = list(outcomes), []

    def start(self, job, command, env):
        self.ran.append(command.args)
        return Ended(self.outcomes.pop(0))


class Endless:
    """A child that runs until stopped."""

    pid = None

    def __init__(self):
        self.stopped = threading.Event()

    def poll(self):
        return -15 if self.stopped.is_set() else None

    def stop(self):
        self.stopped.set()

    def outcome(self):
        return Outcome(-15, "", [])


class Endlessly:
    """An executor whose children run until stopped; `started` once one has."""

    def __init__(self):
        self.started = threading.Event()

    def start(self, job, command, env):
        self.started.set()
        return Endless()


class Recording(LocalExecutor):
    """Real children; `ran`: the arguments of each."""

    def __init__(self):
        self.ran = []

    def start(self, job, command, env):
        self.ran.append(command.args)
        return super().start(job, command, env)
