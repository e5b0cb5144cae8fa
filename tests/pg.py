"""A real PostgreSQL server for the tests, started by the tests themselves.

`PostgresServer` runs `initdb` and `pg_ctl start` into a temporary folder, on a free port, with
its unix socket in that folder; clients connect over the socket. `initdb` refuses to run as
root, so as root the server runs as the `postgres` user (`runuser -u postgres --`) and the
folder is handed to it. The binaries are found under /usr/lib/postgresql/<version>/bin (the
Debian layout; `.ci/run` installs the `postgresql` package) or on PATH.

Fixtures (import them into a test package's conftest.py):
- `postgres`: one server per test session (per xdist worker); the tests that need it skip,
  saying why, only when the binaries are absent;
- `log_url`: an event-log URL on each backend, "sqlite" (a file) and "postgresql" (a fresh
  database of the session's server), for tests that must hold on both.

Also usable on its own, e.g. by benchmarks/bench_oms.py: `with PostgresServer() as pg: pg.url()`.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Self

import pytest

PG_USER = "postgres"  # the OS user the server runs as when the tests run as root


def find_bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/*/bin holding initdb, else initdb's folder on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServerError(RuntimeError):
    pass


class PostgresServer:
    """A throwaway PostgreSQL cluster; `stop()` (or leaving the `with`) removes it."""

    def __init__(self, bin_dir: Path | None = None, *, fsync: bool = True):
        self.bin_dir = bin_dir or find_bin_dir()
        if self.bin_dir is None:
            raise PostgresServerError("PostgreSQL binaries not found under "
                                      "/usr/lib/postgresql/*/bin or on PATH")
        self.fsync = fsync
        # under /tmp: the postgres user must reach it, and a unix socket path is short
        self.folder = Path(tempfile.mkdtemp(prefix="foxhunt-pg-", dir="/tmp"))
        self.data, self.socket_dir = self.folder / "data", self.folder  # socket beside the data
        self.port = _free_port()
        self.user = "foxhunt"
        self._names = itertools.count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(PG_USER)
            except KeyError:
                raise PostgresServerError(f"running as root and there is no {PG_USER!r} user "
                                          "to run initdb as") from None
            self._as = ["runuser", "-u", PG_USER, "--"]
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self._started = False

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as, *args], check=False, capture_output=True,
                              text=True, timeout=120)
        if proc.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise PostgresServerError(f"{Path(args[0]).name} failed ({proc.returncode}): "
                                      f"{(proc.stderr or proc.stdout).strip()}\n{tail}")

    def start(self) -> Self:
        b = self.bin_dir
        self._run(str(b / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust",
                  "-E", "UTF8", "--no-sync", "--no-instructions")
        opts = (f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
                f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200")
        self._run(str(b / "pg_ctl"), "-D", str(self.data), "-o", opts,
                  "-l", str(self.folder / "server.log"), "-w", "-t", "60", "start")
        self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")
            self._started = False
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def url(self, database: str = "postgres") -> str:
        return (f"postgresql+psycopg://{self.user}@/{database}"
                f"?host={self.socket_dir}&port={self.port}")

    def create_database(self) -> str:
        """A new, empty database; returns its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(host=str(self.socket_dir), port=self.port, user=self.user,
                             dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def postgres():
    if find_bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin "
                    "or on PATH); `apt-get install postgresql`, as .ci/run does")
    pytest.importorskip("psycopg", reason="psycopg is not installed (the test extra has it)")
    # fsync off: a test kills clients, never the server, so the server's own durability is
    # not what is tested and need not cost disk flushes
    server = PostgresServer(fsync=False).start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request, tmp_path):
    """An empty event log's URL, on a SQLite file and on a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'log.sqlite'}"
    return request.getfixturevalue("postgres").create_database()
