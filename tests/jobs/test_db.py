"""foxhunt's database (foxhunt.db): opened by URL, its tables created by the modules that own
them, every failure one line."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from foxhunt.db import (
    DatabaseError,
    create_tables,
    default_db_url,
    open_db,
    write_transaction,
)


def notes_table() -> tuple[sa.MetaData, sa.Table]:
    metadata = sa.MetaData()
    return metadata, sa.Table("notes", metadata, sa.Column("id", sa.Integer, primary_key=True),
                              sa.Column("text", sa.String(50)))


def test_the_default_database_is_a_sqlite_file_in_foxhunt_home(tmp_path):
    url = default_db_url(tmp_path / "home")
    assert url == f"sqlite:///{tmp_path / 'home' / 'foxhunt.db'}"
    engine = open_db(url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    assert (tmp_path / "home" / "foxhunt.db").exists()


def test_a_module_creates_its_own_tables_and_creating_again_changes_nothing(db_url):
    engine = open_db(db_url)
    metadata, notes = notes_table()
    create_tables(engine, metadata)
    with write_transaction(engine) as conn:
        conn.execute(notes.insert().values(text="kept"))
    create_tables(engine, metadata)
    with engine.connect() as conn:
        assert conn.execute(sa.select(notes.c.text)).scalars().all() == ["kept"]


def test_a_sqlite_write_transaction_holds_the_write_lock_from_its_start(tmp_path):
    engine = open_db(f"sqlite:///{tmp_path / 'f.db'}")
    other = sa.create_engine(f"sqlite:///{tmp_path / 'f.db'}",
                             connect_args={"timeout": 0.05})
    with (write_transaction(engine), pytest.raises(sa.exc.OperationalError, match="locked"),
          other.begin() as conn):
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")


@pytest.mark.parametrize("url, needle", [
    ("nonsense", "not a database URL"),
    ("mysql://u@h/db", "mysql is not supported"),
])
def test_a_bad_url_is_one_line(url, needle):
    with pytest.raises(DatabaseError, match=needle) as caught:
        open_db(url)
    assert "\n" not in str(caught.value) and "sqlite:///PATH" in str(caught.value)


def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path):
    path = tmp_path / "foxhunt.db"
    path.write_bytes(b"hello, not SQLite" * 100)
    with pytest.raises(DatabaseError, match=r"not a SQLite database") as caught:
        open_db(f"sqlite:///{path}")
    assert "\n" not in str(caught.value)
    assert path.read_bytes() == b"hello, not SQLite" * 100


def test_a_damaged_sqlite_file_is_one_line(tmp_path):
    path = tmp_path / "foxhunt.db"
    engine = open_db(f"sqlite:///{path}")
    create_tables(engine, notes_table()[0])
    engine.dispose()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)
    path.write_bytes(bytes(data))
    with pytest.raises(DatabaseError, match="damaged") as caught:
        open_db(f"sqlite:///{path}")
    assert "\n" not in str(caught.value)


def test_an_unreachable_server_is_one_line_without_the_password():
    url = "postgresql+psycopg://me:secret@127.0.0.1:1/nowhere?connect_timeout=2"
    with pytest.raises(DatabaseError, match="unreachable") as caught:
        open_db(url)
    message = str(caught.value)
    assert "\n" not in message and "secret" not in message and "127.0.0.1" in message


def test_a_missing_postgres_database_says_so(postgres):
    with pytest.raises(DatabaseError, match="does not exist"):
        open_db(postgres.url("no_such_db"))
