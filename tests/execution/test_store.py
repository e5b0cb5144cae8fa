"""The event log: SQLite in WAL mode by default, PostgreSQL by URL; on both: append-only,
gapless sequence numbers, every event kind stored exactly, a duplicate refused whole, one
writer. `log_url` runs a test on a SQLite file and on a database of a real PostgreSQL server."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa

from foxhunt.events import EVENT_CLASSES
from foxhunt.execution import (
    DuplicateEventError,
    EventCodec,
    EventLogError,
    SqlEventStore,
    default_log_url,
)
from foxhunt.orders import (
    OrderAccepted,
    OrderEvent,
    OrderFilled,
    OrderInitialized,
    OrderType,
    Side,
    TimeInForce,
)
from foxhunt.portfolio import AccountOpened, PriceMarked
from foxhunt.risk import Cause, TradingDayStarted, TradingState, TradingStateChanged

INIT = OrderInitialized(
    ts_ns=1, client_order_id="A-1", symbol="ES", side=Side.BUY, quantity=2,
    order_type=OrderType.LIMIT, time_in_force=TimeInForce.DAY, limit_ticks=18000,
)  # fmt: skip
FILL = OrderFilled(
    ts_ns=3, client_order_id="A-1", fill_id="X9", symbol="ES", side=Side.BUY, quantity=1,
    price_ticks=-4, commission=Decimal("2.25"),
)  # fmt: skip


def sample_events():
    return [
        AccountOpened(ts_ns=0, account="a", currency="USD", starting_cash=Decimal("100000.01")),
        INIT,
        OrderAccepted(ts_ns=2, client_order_id="A-1", venue_order_id="v"),
        FILL,
        PriceMarked(ts_ns=4, symbol="ES", price_ticks=18001),
        TradingStateChanged(
            ts_ns=5, change=1, previous=TradingState.ACTIVE, state=TradingState.HALTED,
            cause=Cause.BREAKER, check="max_drawdown", reason="equity fell",
        ),
        TradingDayStarted(ts_ns=6, day="2024-03-05", ends_ns=7, equity=Decimal("-1.5")),
    ]


def test_the_default_log_is_a_sqlite_file_in_foxhunt_home_in_wal_mode(isolated_home):
    url = default_log_url("paper")
    assert url == f"sqlite:///{isolated_home / 'trading' / 'paper.sqlite'}"
    store = SqlEventStore(url)
    assert store.journal_mode == "wal"
    assert (isolated_home / "trading" / "paper.sqlite").exists()


def test_events_come_back_equal_in_order_with_gapless_sequence_numbers(log_url):
    url = log_url
    store = SqlEventStore(url)
    events = sample_events()
    assert store.append(events[:3]) == 3
    assert store.append(events[3:]) == len(events)
    again = SqlEventStore(url)  # a new process reading the file
    stored = list(again.read())
    assert [s.seq for s in stored] == list(range(1, len(events) + 1))
    assert [s.event for s in stored] == events
    assert [s.event for s in again.read(after_seq=5)] == events[5:]
    assert again.last_seq() == len(events)


def test_the_codec_knows_every_order_event_kind():
    codec = EventCodec()
    order_events = [cls for cls in EVENT_CLASSES.values() if issubclass(cls, OrderEvent)]
    assert len(order_events) == 14
    for cls in order_events:
        assert codec._classes[cls.KIND] is cls
    kind, payload = codec.encode(FILL)
    assert kind == "order_filled" and '"commission":"2.25"' in payload
    assert codec.decode(kind, payload) == FILL


def test_a_duplicate_event_is_refused_and_nothing_of_its_append_is_stored(log_url):
    store = SqlEventStore(log_url)
    store.append([INIT])
    with pytest.raises(DuplicateEventError, match="event A-1:order_initialized is already stored"):
        store.append([FILL, INIT])
    assert [s.event for s in store.read()] == [INIT] and store.last_seq() == 1
    assert store.contains(INIT.event_id) and not store.contains(FILL.event_id)


def test_rows_can_be_neither_updated_nor_deleted(log_url):
    store = SqlEventStore(log_url)
    store.append([INIT])
    statements = ["UPDATE events SET kind = 'x'", "DELETE FROM events"]
    if log_url.startswith("postgresql"):
        statements.append("TRUNCATE events")
    for sql in statements:
        with pytest.raises(sa.exc.DatabaseError, match="append-only"), store.engine.begin() as c:
            c.exec_driver_sql(sql)
    assert [s.event for s in store.read()] == [INIT]
    again = SqlEventStore(log_url)  # opening it again leaves the guard in place
    with pytest.raises(sa.exc.DatabaseError, match="append-only"), again.engine.begin() as c:
        c.exec_driver_sql("DELETE FROM events")


def test_a_second_writer_is_refused_instead_of_interleaving(log_url):
    url = log_url
    first, second = SqlEventStore(url), SqlEventStore(url)
    first.append([INIT])
    with pytest.raises(EventLogError, match="seq 1 was taken by another writer"):
        second.append([FILL])
    assert second.last_seq() == 1  # it has caught up and can tell what is stored


def test_an_unreachable_log_is_one_line_naming_it(tmp_path):
    blocker = Path(tmp_path / "file")
    blocker.write_text("")
    with pytest.raises(EventLogError, match=r"event log /.*/file/sub/log\.sqlite: cannot create its folder \(Not a directory\)"):
        SqlEventStore(f"sqlite:///{blocker / 'sub' / 'log.sqlite'}")


def test_an_unreachable_postgresql_server_is_one_line_naming_the_log(tmp_path):
    pytest.importorskip("psycopg", reason="psycopg is not installed (the test extra has it)")
    url = f"postgresql+psycopg://nobody@/none?host={tmp_path}&port=9"
    with pytest.raises(EventLogError) as err:
        SqlEventStore(url)
    message = str(err.value)
    assert message.startswith(f"event log {url}: cannot open it: the database server is "
                              "unreachable (connection ")
    assert message.endswith("; restart it and run the command again (with --resume for a "
                            "paper run)")
    assert "\n" not in message


def test_a_database_the_log_does_not_support_is_named():
    with pytest.raises(EventLogError, match="mysql is not supported; use sqlite:///PATH or "):
        SqlEventStore("mysql://u@localhost/x")
