"""Paper trading across rolls (issue 38): buy-and-hold over the synthetic ES contract set, its
position held in the real months and rolled as two orders; a run killed with SIGKILL at each
point of a roll and restarted completes the roll, never doubles it, and ends to the cent where
an uninterrupted run ends (test_paper_rolls.py: where the rolling backtest ends).

The paper process is a fork of the test process (as in test_crash_recovery.py). The fault is
injected in the child only, at a named point of the first roll, by a patch that sends the
process SIGKILL there: nothing is cleaned up, as with `kill -9`. The restart runs unpatched.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from decimal import Decimal
from pathlib import Path

import pytest

from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.execution import venue as v
from foxhunt.execution.rolls import RollCompleted, RollStarted
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.orders import OrderFilled, OrderInitialized
from foxhunt.portfolio.account import Account
from foxhunt.risk import RiskConfig

from .helpers import OPEN_LIMITS
from .rolling_helpers import ROLLS, cents, es_market, months_of, trader

FIRST = "R-ESH24-ESM24"


@pytest.fixture(scope="module")
def market():
    return es_market()


# --- kill -9 at each point of the first roll ---------------------------------------------

def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _inject(point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL at `point` of the first roll (the child's process only)."""
    if point == "started":  # RollStarted logged, the out leg not yet sent
        record = TradingEngine.record_roll

        def after_start(self, event):
            record(self, event)
            if isinstance(event, RollStarted):
                _die()
        monkeypatch.setattr(TradingEngine, "record_roll", after_start)
    elif point == "between_legs":  # the out leg filled and logged, the in leg not yet sent
        submit = TradingEngine.submit

        def before_in_leg(self, request, ts_ns):
            if request.client_order_id == f"{FIRST}-in":
                _die()
            return submit(self, request, ts_ns)
        monkeypatch.setattr(TradingEngine, "submit", before_in_leg)
    elif point == "in_leg_logged":  # the in leg in the log, the venue never took it
        take = SimulatedVenue.submit

        def venue_submit(self, order):
            if order.client_order_id == f"{FIRST}-in":
                _die()
            return take(self, order)
        monkeypatch.setattr(SimulatedVenue, "submit", venue_submit)
    elif point == "out_fill_at_venue":  # the venue filled the out leg, the log does not know
        on_report = TradingEngine.on_report

        def report(self, r, **kw):
            if r.client_order_id == f"{FIRST}-out" and type(r).__name__ == "Filled":
                _die()
            return on_report(self, r, **kw)
        monkeypatch.setattr(TradingEngine, "on_report", report)
    else:
        raise AssertionError(point)


def _child(market, url: str, journal: Path, point: str | None) -> None:
    if point is not None:
        _inject(point, pytest.MonkeyPatch())
    trader(market, url, journal).run()
    os._exit(0)


def _run(market, url, journal, point) -> int | None:
    proc = multiprocessing.get_context("fork").Process(target=_child,
                                                       args=(market, url, journal, point))
    proc.start()
    proc.join(120)
    assert proc.exitcode is not None, "the paper process hung"
    return proc.exitcode


def _positions_at(market, url: str, kind: type, roll_id: str) -> dict[str, int]:
    """The first roll's months' positions in the log right after the roll's `kind` event."""
    acct = Account(months_of(market))
    for _, event in SqlEventStore(url).read():
        acct.apply(event)
        if isinstance(event, kind) and event.roll_id == roll_id:
            return {s: acct.position(s) for s in ("ESH24", "ESM24")}
    raise AssertionError(f"no {kind.__name__} of {roll_id} in the log")


@pytest.mark.parametrize("point", ["started", "out_fill_at_venue", "between_legs",
                                   "in_leg_logged"])
def test_kill_9_inside_a_roll_then_restart_completes_it_once(market, tmp_path, point):
    url, journal = f"sqlite:///{tmp_path / 'log.sqlite'}", tmp_path / "venue.jsonl"
    assert _run(market, url, journal, point) == -signal.SIGKILL
    crashed = TradingEngine(SqlEventStore(url), months_of(market))
    assert FIRST in crashed.rolls and not crashed.rolls.get(FIRST).is_terminal

    # the restart (a fresh trader on the same log and journal) finishes the roll, and says so
    final = trader(market, url, journal)
    got = final.run()
    assert got.reconciled["rolls_resumed"] == 1
    assert got.rolls[0].startswith(f"roll {FIRST}: +3 ESH24 -> ESM24 COMPLETED (after a restart; it was "
                               f"roll {FIRST}: +3 ESH24 -> ESM24 ")
    got.rolls[0] = got.rolls[0].split(" (after")[0]
    clean = trader(market).run()
    assert got.pnl == clean.pnl and cents(got.pnl) == Decimal("8983.50")
    assert [(f.bar, f.client_order_id, f.quantity, f.price) for f in got.fills] == \
        [(f.bar, f.client_order_id, f.quantity, f.price) for f in clean.fills]
    assert got.rolls == clean.rolls == [f"roll R-{a}-{b}: +3 {a} -> {b} COMPLETED"
                                        for a, b in ROLLS]
    # after the roll: 3 contracts in the new month, none in the old
    assert _positions_at(market, url, RollCompleted, FIRST) == {"ESH24": 0, "ESM24": 3}
    # each leg's order once in the log, filled once; the venue took each once
    events = [e for _, e in SqlEventStore(url).read()]
    for leg in (f"{FIRST}-out", f"{FIRST}-in"):
        assert sum(isinstance(e, OrderInitialized) and e.client_order_id == leg
                   for e in events) == 1
        assert [e.quantity for e in events
                if isinstance(e, OrderFilled) and e.client_order_id == leg] == [3]
    final.venue.close()
    venue = SimulatedVenue(final.venue.contracts, journal=journal)
    accepted = [r.client_order_id for r in venue.history if type(r).__name__ == "Accepted"]
    assert len(accepted) == len(set(accepted))
    assert sum(isinstance(e, RollStarted) for e in events) == 3


def test_a_restart_that_cannot_complete_the_roll_reports_it_in_one_line(market, tmp_path):
    """Killed between the legs; the account restarts with ESM24 limited to 1 contract: the in
    leg is denied, the roll ends FAILED saying what each month holds, and nothing is doubled."""
    url, journal = f"sqlite:///{tmp_path / 'log.sqlite'}", tmp_path / "venue.jsonl"
    assert _run(market, url, journal, "between_legs") == -signal.SIGKILL
    tight = RiskConfig.model_validate({**OPEN_LIMITS.model_dump(),
                                       "instruments": {"ESM24": {"max_position": 1}}})
    restarted = trader(market, url, journal, risk=tight)
    got = restarted.run()
    line = (f"roll {FIRST}: +3 ESH24 -> ESM24 FAILED: in leg {FIRST}-in denied: max position 1 "
            "ESM24: order would take the position to +3; ESH24 holds +0, ESM24 +0")
    assert got.rolls[0].startswith(line)
    assert _positions_at(market, url, RollStarted, FIRST) == {"ESH24": 3, "ESM24": 0}
    events = [e for _, e in SqlEventStore(url).read()]
    assert not any(isinstance(e, OrderFilled) and e.client_order_id == f"{FIRST}-in"
                   for e in events)
    held = [restarted.engine.account.position(s) for s in ("ESH24", "ESM24", "ESU24", "ESZ24")]
    assert all(abs(q) <= 3 for q in held) and held[0] == 0


def test_a_venue_that_rejects_the_out_leg_fails_the_roll_and_the_old_month_is_held_then_flattened(
        market, monkeypatch):
    """The old month stays held (marked at its own closes, the policy sees its position), and
    the window's last bar, 2024-03-14, flattens it at its close."""
    take = SimulatedVenue.submit

    def reject_out_legs(self, order):
        if order.client_order_id.endswith("-out"):
            self.known.add(order.client_order_id)
            self._report(v.Rejected(client_order_id=order.client_order_id, ts_ns=order.ts_last,
                                    reason="contract halted"))
            return None
        return take(self, order)

    monkeypatch.setattr(SimulatedVenue, "submit", reject_out_legs)
    paper = trader(market, stop=53)
    got = paper.run()
    assert got.rolls == [(f"roll {FIRST}: +3 ESH24 -> ESM24 FAILED: out leg {FIRST}-out "
                          "REJECTED with nothing closed (contract halted); ESH24 holds +3, "
                          "ESM24 +0")]
    held = [(f.symbol, f.client_order_id, f.quantity, f.price) for f in got.fills]
    assert held == [("ESH24", "P0", 3, Decimal("5000.50")),  # no order in ESM24
                    ("ESH24", "F52-ESH24", -3, Decimal("5014.00"))]  # 03-14's close less a tick
    acct = paper.engine.account
    assert acct.position("ESH24") == acct.position("ESM24") == 0
