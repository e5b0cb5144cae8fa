"""The files beside one account's event log: the paper run's arguments (a resume checks them),
the simulated venue's journal, and the lock that one trader holds while it runs.

They belong to the log, not to the account's name alone: the default SQLite log of account `pg`
and a PostgreSQL log given with `--log` for an account also called `pg` keep separate files.
Paths in the arguments file are stored relative to `FOXHUNT_HOME` where they lie inside it, so
moving the home does not break `--resume`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foxhunt.errors import FoxhuntError
from foxhunt.execution.store import without_password
from foxhunt.fileio import write_text_atomic

DEFAULT_LOG = "default"


class AccountBusyError(FoxhuntError):
    """Another process trades this account on this log."""


class AccountFileError(FoxhuntError):
    """An account's arguments file is damaged."""


@dataclass(frozen=True)
class AccountFiles:
    home: Path
    account: str
    log: str  # DEFAULT_LOG, or the --log URL with its password hidden

    @classmethod
    def of(cls, home: Path, account: str, log_url: str | None) -> AccountFiles:
        return cls(home, account, DEFAULT_LOG if log_url is None else without_password(log_url))

    @property
    def folder(self) -> Path:
        return self.home / "trading"

    @property
    def stem(self) -> str:
        if self.log == DEFAULT_LOG:
            return self.account
        return f"{self.account}@{hashlib.sha256(self.log.encode()).hexdigest()[:10]}"

    @property
    def meta(self) -> Path:
        return self.folder / f"{self.stem}.paper.json"

    @property
    def journal(self) -> Path:
        return self.folder / f"{self.stem}.venue.jsonl"

    @property
    def lock_path(self) -> Path:
        return self.folder / f"{self.stem}.lock"

    # --- the run's arguments ----------------------------------------------------------------

    def read_meta(self) -> dict[str, Any] | None:
        """The arguments of the account's paper run, or None when it has none."""
        try:
            doc = json.loads(self.meta.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise AccountFileError(
                f"{self.meta} is damaged ({type(exc).__name__}); it holds the arguments of "
                f"account {self.account!r}'s paper run: restore it, or remove it and start the "
                "run again without --resume"
            ) from None
        if not isinstance(doc, dict):
            raise AccountFileError(f"{self.meta} is damaged (not a JSON object); restore it, "
                                   "or remove it and start the run again without --resume")
        return doc

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_text_atomic(json.dumps(meta, indent=1), self.meta)

    def relative(self, path: Path) -> str:
        """A path as the arguments file keeps it: relative to the home when inside it."""
        resolved = Path(path).resolve()
        try:
            return str(resolved.relative_to(self.home.resolve()))
        except ValueError:
            return str(resolved)

    # --- one trader at a time -----------------------------------------------------------------

    @contextlib.contextmanager
    def hold(self) -> Iterator[bool]:
        """Hold the account's lock for a run; yields whether this call created the lock file
        (a failed start removes what it created). Raises AccountBusyError at once when another
        process holds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            created = not self.lock_path.exists()
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise AccountBusyError(
                    f"account {self.account!r} (log {self.log}) is being traded by another "
                    f"process{self._holder()}; wait for it to end or stop it first"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a file a failed start removed while we opened it
                break
            os.close(fd)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            yield created
        finally:
            os.close(fd)

    def _holder(self) -> str:
        try:
            pid = self.lock_path.read_text().strip()
        except OSError:
            return ""
        return f" (pid {pid})" if pid.isdigit() else ""
