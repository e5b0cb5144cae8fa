"""A damaged event log, or a database that goes away, is one line naming the log, saying what
went wrong and what to do; never a traceback, and nothing is written to a damaged file.

Every operation of the store (open, read, also half-way through its iterator, contains,
append) raises `EventLogError`, which the CLI prints as one line."""

from __future__ import annotations

import logging
import os
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from foxhunt.cli import main
from foxhunt.execution import EventLogError, SqlEventStore, TradingEngine
from foxhunt.portfolio import AccountOpened, PriceMarked

from ..pg import PostgresServer, find_bin_dir
from .helpers import CONTRACTS

RESTORE = "restore it from a backup; `sqlite3 {path} .recover | sqlite3 NEW.sqlite` may save " \
          "its events"


def marks(n: int, start: int = 1) -> list[PriceMarked]:
    return [PriceMarked(ts_ns=i, symbol="ES", price_ticks=18_000 + i % 100)
            for i in range(start, start + n)]


def a_log(path: Path, n: int = 3000) -> Path:
    """A closed log of `n` events (about 110 bytes each), checkpointed into its file."""
    store = SqlEventStore(f"sqlite:///{path}")
    store.append([AccountOpened(ts_ns=0, account="paper", currency="USD",
                                starting_cash=Decimal(100_000)), *marks(n - 1)])
    store.close()
    return path


def garbage_in_the_middle(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(bytes(range(256)) * 32)


def truncated(path: Path) -> None:
    os.truncate(path, path.stat().st_size * 2 // 3)


def text(path: Path) -> None:
    path.write_text("seq,event\n1,account_opened\n" * 50)


def empty(path: Path) -> None:
    path.write_bytes(b"")


DAMAGE = {
    "garbage over the middle": (garbage_in_the_middle, "the file is damaged ("),
    "truncated": (truncated, "the file is damaged (truncated: "),
    "not SQLite (text)": (text, "the file is not a SQLite database; check the path"),
    "empty": (empty, ("the file is empty (0 bytes), and a log is never empty once created; "
                      "restore it from a backup, or delete it if it never held events")),
}


def folder_state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_file_is_refused_on_open_and_left_as_it_was(tmp_path, kind):
    path = a_log(tmp_path / "paper.sqlite")
    damage, what = DAMAGE[kind]
    damage(path)
    before = folder_state(tmp_path)
    with pytest.raises(EventLogError) as err:
        SqlEventStore(f"sqlite:///{path}")
    message = str(err.value)
    assert message.startswith(f"event log {path}: cannot open it: {what}")
    assert "\n" not in message and "SELECT" not in message
    if kind in ("garbage over the middle", "truncated"):
        assert message.endswith(RESTORE.format(path=path))
    assert folder_state(tmp_path) == before  # no table, no trigger, no -wal or -shm left


def test_a_file_damaged_while_open_fails_each_operation_in_one_line(tmp_path):
    path = a_log(tmp_path / "paper.sqlite")
    store = SqlEventStore(f"sqlite:///{path}")
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # the second half of the file's pages turn to garbage
        fh.seek(size // 2)
        fh.write(b"\xa5" * (size - size // 2))
    store.engine.dispose()  # connections opened from now on read the pages from the disk
    damaged = f"event log {path}: {{}}: the file is damaged (database disk image is malformed); " \
              + RESTORE.format(path=path)
    read = []
    with pytest.raises(EventLogError) as err:
        for stored in store.read(batch=100):
            read.append(stored.seq)
    assert read == list(range(1, len(read) + 1)) and 0 < len(read) < 3000  # failed half-way
    assert str(err.value) == damaged.format("cannot read it")
    with pytest.raises(EventLogError) as err:
        store.contains("mark:ES:2999")
    assert str(err.value) == damaged.format("cannot read it")
    with pytest.raises(EventLogError) as err:
        store.append(marks(1, start=5000))
    assert str(err.value) == damaged.format("append failed, nothing stored")


def test_an_event_that_does_not_decode_names_its_seq(tmp_path):
    path = a_log(tmp_path / "paper.sqlite", n=10)
    with sqlite3.connect(path) as conn:  # what the triggers exist to prevent
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET payload = '{\"symbol\": ' WHERE seq = 7")
    store = SqlEventStore(f"sqlite:///{path}")
    with pytest.raises(EventLogError, match=rf"^event log {path}: event 7 cannot be read \(.*\); "
                       "the log is damaged or was written by a newer foxhunt: restore it from a "
                       "backup, or upgrade foxhunt$"):
        list(store.read())
    with pytest.raises(EventLogError, match="event 7 cannot be read"):
        TradingEngine(store, CONTRACTS)


def test_a_new_log_is_created_whole(tmp_path):
    """Built aside and linked into place: the folder holds the log and nothing half-made."""
    path = tmp_path / "new" / "paper.sqlite"
    store = SqlEventStore(f"sqlite:///{path}")
    assert store.journal_mode == "wal" and store.last_seq() == 0
    assert not [p for p in path.parent.iterdir() if ".new-" in p.name]
    store.append(marks(3))
    store.close()
    assert [s.seq for s in SqlEventStore(f"sqlite:///{path}").read()] == [1, 2, 3]


@pytest.mark.parametrize("command", [["orders"], ["positions"], ["risk", "status"],
                                     ["risk", "halt", "--reason", "x"]])
def test_the_cli_says_one_line_on_a_damaged_log(capsys, isolated_home, command):
    path = a_log(isolated_home / "trading" / "paper.sqlite")
    garbage_in_the_middle(path)
    with pytest.raises(SystemExit) as exit_:
        main(command)
    err = capsys.readouterr().err
    assert exit_.value.code != 0
    assert err.count("\n") == 1 and err.startswith(f"error: event log {path}: cannot open it: "
                                                   "the file is damaged (")


@pytest.fixture
def server():
    if find_bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (no initdb); `apt-get install postgresql`")
    pytest.importorskip("psycopg", reason="psycopg is not installed (the test extra has it)")
    pg = PostgresServer(fsync=False).start()  # its own: this test stops it
    yield pg
    pg.stop()


def test_a_postgresql_server_that_stops_mid_run_is_one_line_per_operation(server, caplog):
    url = server.create_database().replace("foxhunt@", "foxhunt:s3cret@")  # trust: unused
    shown = url.replace(":s3cret", "")
    store = SqlEventStore(url)
    store.append(marks(30))
    events = store.read(batch=10)
    first = [next(events) for _ in range(10)]
    server.stop()  # immediate shutdown, as a crash or an operator would
    unreachable = "the database server is unreachable ("
    todo = "; restart it and run the command again (with --resume for a paper run)"
    failures = []
    with pytest.raises(EventLogError) as err:
        list(events)
    failures.append(("cannot read it", str(err.value)))
    for doing, call in [("cannot read it", lambda: store.contains("mark:ES:1")),
                        ("append failed, nothing stored", lambda: store.append(marks(1, 99))),
                        ("cannot open it", lambda: SqlEventStore(url))]:
        with pytest.raises(EventLogError) as err:
            call()
        failures.append((doing, str(err.value)))
    assert [e.event.ts_ns for e in first] == list(range(1, 11))
    for doing, message in failures:
        assert message.startswith(f"event log {shown}: {doing}: {unreachable}"), message
        assert message.endswith(todo) and "\n" not in message and "s3cret" not in message
        assert "SELECT" not in message and "INSERT" not in message
    store.close()
    noise = [r.getMessage()[:80] for r in caplog.records if r.levelno >= logging.WARNING]
    assert noise == []  # nothing else reaches stderr: no pool traceback, no driver echo


def test_a_paper_resume_on_a_damaged_log_is_one_line(capsys, isolated_home):
    main(["data", "synth", "--symbol", "SYN", "--bars", "300", "--seed", "3", "--json"])
    capsys.readouterr()
    path = a_log(isolated_home / "trading" / "paper.sqlite")
    truncated(path)
    with pytest.raises(SystemExit):
        main(["paper", "SYN", "--bars", "1min", "--strategy", "sma:10,30", "--resume"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: event log {path}: cannot open it: "
                                                   "the file is damaged (truncated: ")
