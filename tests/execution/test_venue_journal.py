"""The simulated venue's journal: synced to disk before any report leaves the venue (so the
event log never holds a venue fact the journal could lose), not per bar; a damaged journal is
one line naming the file and the line and pointing to the rebuild from the event log."""

from __future__ import annotations

import json
import os

import pytest

from foxhunt.errors import FoxhuntError
from foxhunt.execution import sim
from foxhunt.execution.sim import SimulatedVenue, VenueJournalError
from foxhunt.orders import OrderRequest, OrderType, Side
from foxhunt.orders.errors import TradingError

from .helpers import CONTRACTS, T0, engine

MINUTE = 60 * 10**9
REBUILD = ("the event log is the truth: rebuild the journal from it "
           "(`foxhunt paper ... --resume --rebuild-venue`)")


class Synced:
    """The journal's sync (fdatasync), recording how much of the file it had made durable."""

    def __init__(self, monkeypatch):
        self.calls: dict[int, int] = {}
        self.size: dict[int, int] = {}
        real = sim._datasync

        def sync(fd: int) -> None:
            real(fd)
            self.calls[fd] = self.calls.get(fd, 0) + 1
            self.size[fd] = os.fstat(fd).st_size

        monkeypatch.setattr(sim, "_datasync", sync)

    def of(self, venue: SimulatedVenue) -> int:
        return self.calls.get(venue._journal.fileno(), 0)

    def all_of(self, venue: SimulatedVenue) -> bool:
        fd = venue._journal.fileno()
        return self.size.get(fd) == os.fstat(fd).st_size


def session(journal, synced: Synced | None = None):
    """A venue with a journal and its OMS: a market buy that fills, a stop that rests."""
    venue = SimulatedVenue(CONTRACTS, 1.0, journal=journal)
    eng = engine(venue=venue)
    eng.mark("ES", 100.0, T0)
    return venue, eng


def deliver(venue, eng) -> int:
    reports = venue.reports()
    for r in reports:
        eng.on_report(r)
    return len(reports)


def test_no_report_leaves_the_venue_before_the_journal_holding_it_is_synced(tmp_path, monkeypatch):
    synced = Synced(monkeypatch)
    venue, eng = session(tmp_path / "venue.jsonl")
    venue.on_bar("ES", T0 + MINUTE, 100.0, 100.5, 99.5)  # a quiet bar: no report, no sync
    assert synced.of(venue) == 0 and not synced.all_of(venue)

    eng.submit(OrderRequest("ES", Side.BUY, 1), T0 + MINUTE)  # the acceptance: synced first
    assert synced.all_of(venue)
    assert deliver(venue, eng) == 1

    calls = synced.of(venue)
    for i in range(2, 6):  # bars that fill nothing ride on the next sync
        venue.on_bar("ES", T0 + i * MINUTE, 100.0, 100.5, 99.5)
        if i == 2:
            assert not synced.all_of(venue)  # the fill is written, not yet handed over
            assert deliver(venue, eng) == 1 and synced.all_of(venue)
            calls = synced.of(venue)
        else:
            assert deliver(venue, eng) == 0
    assert synced.of(venue) == calls and not synced.all_of(venue)

    stop = eng.submit(OrderRequest("ES", Side.SELL, 1, OrderType.STOP, stop_price=99.0),
                      T0 + 6 * MINUTE)
    assert synced.all_of(venue)
    deliver(venue, eng)
    eng.modify(stop.client_order_id, T0 + 6 * MINUTE, stop_price=98.75)
    assert synced.all_of(venue)
    deliver(venue, eng)
    venue.on_bar("ES", T0 + 7 * MINUTE, 100.0, 100.5, 99.5)
    eng.cancel(stop.client_order_id, T0 + 7 * MINUTE)
    assert synced.all_of(venue)
    deliver(venue, eng)
    venue.on_bar("ES", T0 + 8 * MINUTE, 100.0, 100.5, 99.5)
    fd = venue._journal.fileno()
    venue.close()  # the last bar's line too
    assert synced.size[fd] == (tmp_path / "venue.jsonl").stat().st_size


def test_the_history_a_restart_reconciles_against_is_synced_before_it_is_read(tmp_path,
                                                                              monkeypatch):
    synced = Synced(monkeypatch)
    venue, eng = session(tmp_path / "venue.jsonl")
    eng.submit(OrderRequest("ES", Side.BUY, 1), T0)
    deliver(venue, eng)
    venue.on_bar("ES", T0 + MINUTE, 100.0, 100.5, 99.5)  # fills: queued, not yet handed over
    assert not synced.all_of(venue)
    assert [type(r).__name__ for r in venue.history] == ["Accepted", "Filled"]
    assert synced.all_of(venue)


def journal_lines(tmp_path) -> list[str]:
    """A real journal: an order line, a fill report, bar lines, a resting stop."""
    venue, eng = session(tmp_path / "venue.jsonl")
    eng.submit(OrderRequest("ES", Side.BUY, 2), T0)
    deliver(venue, eng)
    venue.on_bar("ES", T0 + MINUTE, 100.0, 100.5, 99.5)
    deliver(venue, eng)
    eng.submit(OrderRequest("ES", Side.SELL, 2, OrderType.STOP, stop_price=99.0), T0 + MINUTE)
    deliver(venue, eng)
    venue.on_bar("ES", T0 + 2 * MINUTE, 100.0, 100.5, 99.5)
    venue.close()
    lines = (tmp_path / "venue.jsonl").read_text().splitlines()
    assert [json.loads(x)["op"] for x in lines] == ["order", "report", "bar", "order", "bar"]
    return lines


def edit(line: str, **change) -> str:
    rec = json.loads(line)
    for key, value in change.items():
        if "." in key:
            outer, inner = key.split(".")
            rec[outer][inner] = value
        elif value is None:
            del rec[key]
        else:
            rec[key] = value
    return json.dumps(rec)


DAMAGED = {
    "garbage": (lambda line: "\x00\x17garbage{", "is not JSON ("),
    "a JSON list": (lambda line: "[1, 2]", "is damaged (not an object)"),
    "a missing key": (lambda line: edit(line, ts=None), "is damaged (no 'ts')"),
    "a wrong type": (lambda line: edit(line, ts="soon"), "is damaged (symbol 'ES' or ts 'soon')"),
    "an unknown op": (lambda line: edit(line, op="teleport"), "is damaged (unknown op 'teleport')"),
}
ORDER_DAMAGED = {
    "a leaves quantity as text": ({"order.leaves": "2"}, "leaves is '2', not int"),
    "an unknown side": ({"order.side": "SIDEWAYS"}, "'SIDEWAYS' is not a valid Side"),
    "a venue order id as a number": ({"report.venue_order_id": 7}, "venue_order_id is 7, not str"),
}


@pytest.mark.parametrize("kind", list(DAMAGED))
def test_a_damaged_line_in_the_middle_names_the_file_and_line_and_the_way_out(tmp_path, kind):
    lines = journal_lines(tmp_path)
    damage, what = DAMAGED[kind]
    lines[2] = damage(lines[2])  # the first bar's line
    path = tmp_path / "venue.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    with pytest.raises(VenueJournalError) as err:
        SimulatedVenue(CONTRACTS, journal=path)
    message = str(err.value)
    assert message.startswith(f"venue journal {path}: line 3 {what}") and "\n" not in message
    assert message.endswith(REBUILD)
    assert path.read_bytes() == before
    assert isinstance(err.value, TradingError) and isinstance(err.value, FoxhuntError)


@pytest.mark.parametrize("kind", list(ORDER_DAMAGED))
def test_an_order_line_whose_fields_do_not_fit_is_refused(tmp_path, kind):
    lines = journal_lines(tmp_path)
    change, what = ORDER_DAMAGED[kind]
    lines[3] = edit(lines[3], **change)  # the stop's order line
    path = tmp_path / "venue.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(VenueJournalError, match=rf"^venue journal {path}: line 4 is damaged "
                                                rf"\(.*{what}.*\); the event log is the truth"):
        SimulatedVenue(CONTRACTS, journal=path)


def test_a_torn_last_line_never_happened_and_a_whole_one_without_its_newline_is_kept(tmp_path):
    lines = journal_lines(tmp_path)
    path = tmp_path / "venue.jsonl"
    path.write_text("\n".join(lines[:4]) + "\n" + lines[4][:17])  # died writing the last bar
    venue = SimulatedVenue(CONTRACTS, journal=path)
    assert venue.last_bar == {"ES": T0 + MINUTE} and len(venue.working) == 1
    venue.close()
    assert path.read_text() == "\n".join(lines[:4]) + "\n"

    path.write_text("\n".join(lines))  # every byte but the last newline reached the disk
    venue = SimulatedVenue(CONTRACTS, journal=path)
    assert venue.last_bar == {"ES": T0 + 2 * MINUTE}
    venue.on_bar("ES", T0 + 3 * MINUTE, 100.0, 100.5, 99.5)
    venue.close()
    again = SimulatedVenue(CONTRACTS, journal=path)  # the next line did not glue onto it
    assert again.last_bar == {"ES": T0 + 3 * MINUTE} and again.working == venue.working
