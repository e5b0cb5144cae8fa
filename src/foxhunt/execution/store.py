"""The durable, append-only event log: the source of truth of an account's trading state.

`EventStore` is the small interface the OMS needs. `SqlEventStore` implements it over
SQLAlchemy Core, so a SQLite file (the default, in WAL mode with synchronous=FULL: a committed
append survives a crash or power loss) and a PostgreSQL database by URL share one code path.

One table, `events`: `seq` (1, 2, 3, ... with no gaps, assigned by the writer), `event_id`
(unique: an event is stored once), `kind`, `ts_ns`, `payload` (JSON). Each `append` is one
transaction. Rows are never updated or deleted: triggers refuse it (UPDATE and DELETE on
SQLite; UPDATE, DELETE and TRUNCATE on PostgreSQL). One writer per
log: a second writer's append fails on the `seq` key instead of interleaving.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from foxhunt.execution.codec import EventCodec
from foxhunt.orders.errors import TradingError
from foxhunt.orders.events import Event

HOME_ENV = "FOXHUNT_HOME"  # as foxhunt.config; read here because config sits above this layer


class EventLogError(TradingError):
    """The event log could not be read or written; nothing of the failed append was stored."""


class DuplicateEventError(EventLogError):
    pass


class StoredEvent(NamedTuple):
    seq: int
    event: Event


class EventStore(Protocol):
    def append(self, events: Sequence[Event]) -> int:
        """Store `events` in one transaction, in order; returns the last seq. Raises
        DuplicateEventError (and stores none of them) if one's event_id is already stored."""
        ...

    def read(self, after_seq: int = 0) -> Iterator[StoredEvent]: ...

    def last_seq(self) -> int: ...

    def contains(self, event_id: str) -> bool: ...

    def close(self) -> None: ...


def default_log_url(account: str = "default", home: Path | None = None) -> str:
    """`sqlite:///$FOXHUNT_HOME/trading/<account>.sqlite` (FOXHUNT_HOME defaults to ~/.foxhunt)."""
    home = home or Path(os.environ.get(HOME_ENV) or Path.home() / ".foxhunt").expanduser()
    return f"sqlite:///{home / 'trading' / f'{account}.sqlite'}"


_metadata = sa.MetaData()
events_table = sa.Table(
    "events",
    _metadata,
    sa.Column(
        "seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
        autoincrement=False,
    ),
    sa.Column("event_id", sa.String(255), nullable=False, unique=True),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("ts_ns", sa.BigInteger, nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
)

_APPEND_ONLY = {
    "sqlite": [
        f"CREATE TRIGGER IF NOT EXISTS events_no_{op.lower()} BEFORE {op} ON events "
        "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END"
        for op in ("UPDATE", "DELETE")
    ],
    "postgresql": [
        ("CREATE OR REPLACE FUNCTION foxhunt_events_append_only() RETURNS trigger "
         "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the event log is append-only'; END $$"),
        ("CREATE OR REPLACE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE "
         "ON events FOR EACH STATEMENT EXECUTE FUNCTION foxhunt_events_append_only()"),
    ],
}
"""DDL that makes the table refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL)."""
_PG_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(7302664823)"
"""Two processes creating one PostgreSQL log at once take turns (CREATE OR REPLACE races)."""


def _why(exc: Exception) -> str:
    """The driver's own message, first line only (psycopg's run over several)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return f"{exc.__class__.__name__}: {text.splitlines()[0] if text else '?'}"


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


class SqlEventStore:
    """An event log in any database SQLAlchemy reaches by URL ("sqlite:///path", "sqlite://"
    for memory, "postgresql+psycopg://..."). Tables are created when missing."""

    def __init__(self, url: str, codec: EventCodec | None = None):
        self.url = url
        self.codec = codec or EventCodec()
        self._local = threading.local()
        try:
            backend = sa.engine.make_url(url).get_backend_name()
        except (SQLAlchemyError, ValueError) as exc:
            raise EventLogError(f"event log {url}: not a database URL ({exc})") from None
        ddl = _APPEND_ONLY.get(backend)
        if ddl is None:
            raise EventLogError(f"event log {url}: {backend} is not supported; "
                                "use sqlite:///PATH or postgresql+psycopg://...")
        try:
            engine = sa.create_engine(url)
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise EventLogError(f"event log {url}: cannot open ({exc})") from None
        self.engine = engine
        mark = {"qmark": "?", "format": "%s", "pyformat": "%s"}[engine.dialect.paramstyle]
        self._insert = (f"INSERT INTO events (seq, event_id, kind, ts_ns, payload) "
                        f"VALUES ({', '.join([mark] * 5)})")
        if engine.dialect.name == "sqlite":
            database = engine.url.database
            if database and database != ":memory:":
                try:
                    Path(database).parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise EventLogError(f"event log {url}: cannot create its folder ({exc})") from None
            sa_event.listen(engine, "connect", _sqlite_pragmas)
        try:
            with engine.begin() as conn:
                if engine.dialect.name == "postgresql":
                    conn.exec_driver_sql(_PG_SCHEMA_LOCK)
                _metadata.create_all(conn)
                for statement in ddl:
                    conn.exec_driver_sql(statement)
                self._last = conn.execute(sa.select(sa.func.max(events_table.c.seq))).scalar() or 0
        except SQLAlchemyError as exc:
            raise EventLogError(f"event log {url}: cannot open ({_why(exc)})") from None

    @property
    def journal_mode(self) -> str:
        with self.engine.connect() as conn:
            return str(conn.exec_driver_sql("PRAGMA journal_mode").scalar())

    def last_seq(self) -> int:
        return self._last

    def append(self, events: Sequence[Event]) -> int:
        if not events:
            return self._last
        rows = []
        for i, e in enumerate(events, start=self._last + 1):
            kind, payload = self.codec.encode(e)
            rows.append((i, e.event_id, kind, e.ts_ns, payload))
        ids = [r[1] for r in rows]
        if len(set(ids)) != len(ids):
            raise DuplicateEventError(f"event log {self.url}: one append holds an event twice")
        dbapi = self.engine.dialect.loaded_dbapi
        try:
            # the driver's own statement and transaction on the held connection: SQLAlchemy's
            # compiled insert processes every row's parameters in Python (a third of an append
            # of a thousand marks), its transaction wrapper costs as much as the insert itself
            # (~6 of ~11 us in memory); the commit is the same driver commit
            raw = self._writer().connection.dbapi_connection
            try:
                cursor = raw.cursor()
                try:
                    cursor.executemany(self._insert, rows)
                finally:
                    cursor.close()
                raw.commit()
            except BaseException:
                raw.rollback()
                raise
        except (IntegrityError, dbapi.IntegrityError):
            stored = [i for i in ids if self.contains(i)]
            if stored:
                raise DuplicateEventError(
                    f"event log {self.url}: event {stored[0]} is already stored; nothing appended"
                ) from None
            self._last = self._read_last()
            raise EventLogError(
                f"event log {self.url}: seq {rows[0][0]} was taken by another writer; "
                "one writer per log (nothing appended)"
            ) from None
        except (SQLAlchemyError, dbapi.Error) as exc:
            self._drop_writer()  # a broken connection: the next append opens a fresh one
            raise EventLogError(
                f"event log {self.url}: append failed, nothing stored ({_why(exc)})") from None
        self._last = rows[-1][0]
        return self._last

    def _writer(self) -> sa.Connection:
        """The connection appends go through, held open between them (idle, outside any
        transaction): checking one out of the pool for every append costs as much as the
        insert itself (~25 us of ~45 us on an in-memory log). One per thread that appends."""
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._local.conn = self.engine.connect()
        return conn

    def _drop_writer(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn.close()
            except SQLAlchemyError:
                pass

    def _read_last(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(sa.func.max(events_table.c.seq))).scalar() or 0

    def contains(self, event_id: str) -> bool:
        with self.engine.connect() as conn:
            q = sa.select(events_table.c.seq).where(events_table.c.event_id == event_id)
            return conn.execute(q).first() is not None

    def read(self, after_seq: int = 0, batch: int = 10_000) -> Iterator[StoredEvent]:
        """Every stored event with seq > after_seq, in seq order."""
        t = events_table
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    sa.select(t.c.seq, t.c.kind, t.c.payload)
                    .where(t.c.seq > after_seq)
                    .order_by(t.c.seq)
                    .limit(batch)
                ).all()
            for seq, kind, payload in rows:
                yield StoredEvent(seq, self.codec.decode(kind, payload))
            if len(rows) < batch:
                return
            after_seq = rows[-1][0]

    def close(self) -> None:
        self._drop_writer()
        self.engine.dispose()
