"""foxhunt's own SQL database: jobs, and (from the server) users, API keys and the audit trail.

One database per installation or team: a SQLite file, `FOXHUNT_HOME/foxhunt.db`, by default; a
PostgreSQL database by URL (`postgresql+psycopg://USER@HOST/DB`) when several machines share it.
Each module that keeps tables here declares them on its own `sa.MetaData` and calls
`create_tables(engine, metadata)` before use: idempotent, and safe when two processes start at
once. This module sits below every layer (it imports only `foxhunt.errors`), so the jobs
runner and the server can both build on it.

SQLite is opened in WAL mode (readers never wait for the writer), with a busy timeout (a
writer waits for another instead of failing at once) and foreign keys on. The driver's own
transaction handling is switched off so that `write_transaction` can start with `BEGIN
IMMEDIATE`: the write lock is taken first, so a read-then-write (claiming a job) cannot be
overtaken between its read and its write.

Every failure to reach or use the database is a `DatabaseError`: one line naming the database
(its file, or its URL without the password), what went wrong and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy.exc import SQLAlchemyError

from foxhunt.errors import FoxhuntError

DB_FILE = "foxhunt.db"
BUSY_TIMEOUT_MS = 10_000
_PG_DDL_LOCK = "SELECT pg_advisory_xact_lock(7302664824)"
"""Two processes creating tables in one PostgreSQL database at once take turns."""
_SQLITE_MAGIC = b"SQLite format 3\x00"
URL_HELP = "use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"


class DatabaseError(FoxhuntError):
    """foxhunt's database could not be opened, read or written."""


def default_db_url(home: Path) -> str:
    """The SQLite file `home/foxhunt.db` (home: FOXHUNT_HOME)."""
    return f"sqlite:///{Path(home).expanduser() / DB_FILE}"


def without_password(url: str) -> str:
    """The URL as given, its password left out (in the authority and in the query)."""
    url = re.sub(r"^([\w+.-]+://[^:/@?#]*):[^@/?#]*@", r"\1@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)


def first_line(exc: BaseException, limit: int = 160) -> str:
    """The driver's message, first line only (SQLAlchemy appends the statement, psycopg's run
    over several lines), cut to `limit` characters."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    line = text.splitlines()[0].strip() if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _reason(backend: str, exc: BaseException) -> str:
    """What went wrong and what to do, in a few words, for a failure of `backend`."""
    orig = getattr(exc, "orig", None) or exc
    line, low = first_line(exc), first_line(exc).lower()
    if backend == "sqlite":
        if "not a database" in low or "malformed" in low:
            return (f"the file is damaged ({line}); restore it from a backup or move it aside "
                    "(a new one is created)")
        if "locked" in low or "busy" in low:
            return "another process holds it locked; run the command again"
        if "unable to open" in low or "readonly" in low:
            return f"it cannot be opened for writing ({line}); check the path and permissions"
        return f"SQLite failed ({line}); run the command again"
    state = getattr(orig, "sqlstate", None) or ""
    if state.startswith("28"):
        return f"the server refused the login ({line}); check the user and password"
    if state == "3D000":
        return "the database does not exist; create it (createdb NAME) or correct the URL"
    if state.startswith(("08", "57P")) or (not state and isinstance(
            exc, sa.exc.OperationalError | sa.exc.InterfaceError)):
        return f"the database server is unreachable ({line}); start it or correct the URL"
    return f"the database refused the operation ({line}); check the server's log"


def db_error(engine: sa.Engine, doing: str, exc: BaseException) -> DatabaseError:
    """`exc`, raised by `engine` while `doing` something, as one line."""
    return DatabaseError(f"database {_name(engine.url)}: {doing}: "
                         f"{_reason(engine.dialect.name, exc)}")


def _name(url: sa.URL) -> str:
    if url.get_backend_name() == "sqlite" and url.database:
        return url.database
    return without_password(url.render_as_string(hide_password=False))


def _sqlite_connect(dbapi_conn, _record) -> None:
    dbapi_conn.isolation_level = None  # transactions are begun by `_sqlite_begin`
    cur = dbapi_conn.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={BUSY_TIMEOUT_MS}",
                   "foreign_keys=ON"):
        cur.execute(f"PRAGMA {pragma}")
    cur.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    immediate = conn.get_execution_options().get("immediate", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def parse_url(url: str) -> sa.URL:
    """`url` checked to be SQLite or PostgreSQL; a bare `postgresql://` means psycopg (3)."""
    try:
        parsed = sa.engine.make_url(url)
        backend = parsed.get_backend_name()
    except (SQLAlchemyError, ValueError) as exc:
        raise DatabaseError(f"database {without_password(url)}: not a database URL "
                            f"({first_line(exc)}); {URL_HELP}") from None
    if backend == "postgresql" and parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if backend not in ("sqlite", "postgresql"):
        raise DatabaseError(f"database {without_password(url)}: {backend} is not supported; "
                            f"{URL_HELP}")
    return parsed


def open_db(url: str) -> sa.Engine:
    """An engine on `url`, checked reachable and sound (a SQLite file's folder is created; a
    file that is not a SQLite database is refused before anything writes to it)."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        _check_sqlite_file(parsed)
    try:
        engine = sa.create_engine(parsed, pool_pre_ping=parsed.get_backend_name() != "sqlite")
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise DatabaseError(f"database {without_password(url)}: cannot open it "
                            f"({first_line(exc)}); {URL_HELP}") from None
    if engine.dialect.name == "sqlite":
        sa_event.listen(engine, "connect", _sqlite_connect)
        sa_event.listen(engine, "begin", _sqlite_begin)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT count(*) FROM " + (
                "sqlite_master" if engine.dialect.name == "sqlite" else "pg_class")).scalar()
    except (SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        engine.dispose()
        raise db_error(engine, "cannot open it", exc) from None
    return engine


def _check_sqlite_file(url: sa.URL) -> None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        header = path.read_bytes()[:16] if path.exists() else None
    except OSError as exc:
        raise DatabaseError(f"database {database}: cannot reach it ({exc.strerror or exc}); "
                            "check the path and its permissions") from None
    if header is not None and header and not header.startswith(_SQLITE_MAGIC):
        raise DatabaseError(f"database {database}: the file is not a SQLite database; check "
                            "the path (--db), or restore the file from a backup")


def create_tables(engine: sa.Engine, metadata: sa.MetaData) -> None:
    """Create what of `metadata` is missing; idempotent, and two processes may race."""
    try:
        with write_transaction(engine) as conn:
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql(_PG_DDL_LOCK)
            metadata.create_all(conn)
    except (SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        raise db_error(engine, "cannot create its tables", exc) from None


@contextmanager
def write_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction that takes SQLite's write lock at its start (`BEGIN IMMEDIATE`), so what it
    reads stays true until it commits; on PostgreSQL an ordinary transaction (lock rows with
    `FOR UPDATE`)."""
    with engine.connect().execution_options(immediate=True) as conn, conn.begin():
        yield conn


__all__ = ["DatabaseError", "create_tables", "db_error", "default_db_url", "first_line",
           "open_db", "parse_url", "without_password", "write_transaction"]
