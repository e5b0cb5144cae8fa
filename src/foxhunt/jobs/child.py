"""A job's child process: `python -m foxhunt ...`, which dies with whoever started it.

The child leads its own process group (what it starts is stopped with it) and asks the kernel
for SIGKILL when its parent dies (`prctl(PR_SET_PDEATHSIG)`, Linux), so a worker killed with
`kill -9` leaves no training behind to race the worker that resumes the job. Its stdout (the
`--json` document) is kept whole; of its stderr the last lines, for the error line.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from typing import NamedTuple

STOP_GRACE_S = 5.0
STDERR_LINES = 40
_PR_SET_PDEATHSIG = 1


class Outcome(NamedTuple):
    returncode: int
    stdout: str
    stderr_tail: list[str]


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
"""Looked up here, so the forked child calls it without loading anything (no lock taken
between fork and exec, which is what makes a `preexec_fn` unsafe beside threads)."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ChildProcess:
    """One running child; `poll`, `stop` and `outcome` never block for long."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 cwd: str | None = None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                                     start_new_session=True,
                                     preexec_fn=_die_with_parent)  # noqa: PLW1509
        self.pid = self.proc.pid
        self._out: list[str] = []
        self._err: deque[str] = deque(maxlen=STDERR_LINES)
        self._readers = [threading.Thread(target=self._drain, args=(self.proc.stdout, self._out.append), daemon=True),
                         threading.Thread(target=self._drain, args=(self.proc.stderr, self._err.append), daemon=True)]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _drain(stream, keep) -> None:
        for line in stream:
            keep(line)
        stream.close()

    def poll(self) -> int | None:
        return self.proc.poll()

    def stop(self) -> None:
        """SIGTERM to the child's group, SIGKILL after `STOP_GRACE_S`."""
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def outcome(self) -> Outcome:
        code = self.proc.wait()
        for reader in self._readers:
            reader.join(5)
        return Outcome(code, "".join(self._out), [ln.rstrip("\n") for ln in self._err])


def home_of(env: dict[str, str]) -> str | None:
    """The folder a job's child runs in: its FOXHUNT_HOME, so that a relative path in a job's
    arguments (the API takes no other) means the same on every worker; None where that folder
    is not on this machine (a Ray node without the shared home)."""
    home = env.get("FOXHUNT_HOME")
    return home if home and os.path.isdir(home) else None


def run_to_end(argv: list[str], env: dict[str, str]) -> Outcome:
    """Run a child to its end in its FOXHUNT_HOME (a Ray task's body: cancelling the task
    kills its process, and with it the child)."""
    return ChildProcess(argv, env, cwd=home_of(env)).outcome()
