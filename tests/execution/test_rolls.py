"""The roll state machine (execution.rolls) and its driver (execution.roller): a held position
moves from one contract month to the next as two orders through risk and the log; a reject, a
partial fill or a restart leaves one clear state, and never a doubled position."""

from __future__ import annotations

from decimal import Decimal

import pytest

from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.execution import venue as v
from foxhunt.execution.roller import Roller, ScheduledRoll
from foxhunt.execution.rolls import (
    TRANSITIONS,
    IllegalRollTransition,
    RollCompleted,
    RollFailed,
    RollStarted,
    RollStatus,
)
from foxhunt.orders import Contract, OrderRequest, Side, TradingError
from foxhunt.risk import RiskConfig

from .helpers import T0, RecordingVenue

H = Contract("ESH24", Decimal("0.25"), Decimal(50), Decimal("2.25"))
M = Contract("ESM24", Decimal("0.25"), Decimal(50), Decimal("2.25"))
MONTHS = {"ESH24": H, "ESM24": M}
ROLL = ScheduledRoll("ES", "ESH24", "ESM24", T0 + 100, "volume 150,000 > 30,000")
OUT, IN = "R-ESH24-ESM24-out", "R-ESH24-ESM24-in"


def month_engine(venue, **limits) -> TradingEngine:
    eng = TradingEngine.open(SqlEventStore("sqlite://"), MONTHS, RiskConfig(**limits),
                             venue=venue, starting_cash=Decimal(100_000), ts_ns=T0)
    eng.mark("ESH24", "5000.00", T0)
    eng.mark("ESM24", "5012.50", T0)
    return eng


def fill(eng, cid: str, qty: int, ticks: int, ts: int, n: int = 1) -> None:
    eng.on_report(v.Filled(client_order_id=cid, ts_ns=ts, fill_id=f"{cid}-f{n}", quantity=qty,
                           price_ticks=ticks))


@pytest.fixture
def venue():
    return RecordingVenue()


@pytest.fixture
def held(venue):
    """3 ESH24 held."""
    eng = month_engine(venue)
    eng.submit(OrderRequest("ESH24", Side.BUY, 3, client_order_id="P1"), T0 + 1)
    fill(eng, "P1", 3, 20000, T0 + 2)
    return eng


def roll_kinds(eng) -> list[str]:
    return [s.event.KIND for s in eng.store.read() if s.event.KIND.startswith("roll_")
            or getattr(s.event, "client_order_id", "").startswith("R-")]


def positions(eng) -> tuple[int, int]:
    return eng.account.position("ESH24"), eng.account.position("ESM24")


def test_the_table_has_no_way_out_of_completed_or_failed():
    assert {s for s, _ in TRANSITIONS} == {RollStatus.STARTED, RollStatus.CLOSING,
                                          RollStatus.OPENING}


def test_a_roll_closes_the_old_contract_then_opens_the_new_and_logs_each_step(held, venue):
    roller = Roller(held)
    roll = roller.start(ROLL, T0 + 100)
    assert roll.status is RollStatus.CLOSING and venue.calls[-1] == ("submit", OUT)
    out = held.book.get(OUT)
    assert (out.symbol, out.side, out.quantity, out.reduce_only, out.tag) == \
        ("ESH24", Side.SELL, 3, True, "roll")
    assert roller.advance(T0 + 101) == [] and IN not in held.book  # the in leg waits for the out
    fill(held, OUT, 3, 20050, T0 + 102)
    assert roll.status is RollStatus.OPENING
    assert roller.advance(T0 + 102) == [] and venue.calls[-1] == ("submit", IN)
    inleg = held.book.get(IN)
    assert (inleg.symbol, inleg.side, inleg.quantity) == ("ESM24", Side.BUY, 3)
    fill(held, IN, 3, 20100, T0 + 103)
    assert roller.advance(T0 + 103) == [roll]
    assert roll.status is RollStatus.COMPLETED and positions(held) == (0, 3)
    assert roll_kinds(held) == [
        "roll_started", "order_initialized", "order_submitted", "order_filled",
        "order_initialized", "order_submitted", "order_filled", "roll_completed"]
    assert roll.line() == "roll R-ESH24-ESM24: +3 ESH24 -> ESM24 COMPLETED"
    # the log folds into the same rolls; a step run again sends nothing and starts nothing
    again = TradingEngine(held.store, MONTHS, held.risk_config, venue=venue)
    assert again.snapshot() == held.snapshot()
    calls = list(venue.calls)
    assert Roller(again).start(ROLL, T0 + 104).status is RollStatus.COMPLETED
    assert Roller(again).advance(T0 + 104) == [] and venue.calls == calls


def test_a_short_position_rolls_short(venue):
    eng = month_engine(venue)
    eng.submit(OrderRequest("ESH24", Side.SELL, 2, client_order_id="P1"), T0 + 1)
    fill(eng, "P1", 2, 20000, T0 + 2)
    roller = Roller(eng)
    roller.start(ROLL, T0 + 100)
    assert eng.book.get(OUT).side is Side.BUY
    fill(eng, OUT, 2, 20000, T0 + 101)
    roller.advance(T0 + 101)
    assert eng.book.get(IN).side is Side.SELL
    fill(eng, IN, 2, 20050, T0 + 102)
    roller.advance(T0 + 102)
    assert positions(eng) == (0, -2)


def test_nothing_held_starts_no_roll(venue):
    eng = month_engine(venue)
    assert Roller(eng).start(ROLL, T0 + 100) is None and len(eng.rolls) == 0


def test_a_roll_never_starts_before_the_close_that_decided_it(held, venue):
    with pytest.raises(TradingError, match="roll R-ESH24-ESM24: starts at .*a roll acts after"):
        Roller(held).start(ROLL, ROLL.start_ts - 1)
    assert len(held.rolls) == 0 and venue.calls == [("submit", "P1")]


def test_a_rejected_out_leg_fails_the_roll_and_the_old_position_stays(held, venue):
    roller = Roller(held)
    roll = roller.start(ROLL, T0 + 100)
    held.on_report(v.Rejected(client_order_id=OUT, ts_ns=T0 + 101, reason="market closed"))
    assert roller.advance(T0 + 101) == [roll]
    assert roll.status is RollStatus.FAILED and IN not in held.book
    assert positions(held) == (3, 0)
    assert roll.line() == ("roll R-ESH24-ESM24: +3 ESH24 -> ESM24 FAILED: out leg "
                           "R-ESH24-ESM24-out REJECTED with nothing closed (market closed); "
                           "ESH24 holds +3, ESM24 +0")


def test_a_denied_out_leg_fails_the_roll_and_sends_nothing(held, venue):
    """A crash right after RollStarted, and the position closed meanwhile (an operator's
    flatten): the out leg, reduce-only, would open a position, so risk denies it."""
    held.record_roll(RollStarted(ts_ns=T0 + 100, roll_id=ROLL.roll_id, root="ES",
                                 from_symbol="ESH24", to_symbol="ESM24", quantity=3))
    held.submit(OrderRequest("ESH24", Side.SELL, 3, client_order_id="flat"), T0 + 101)
    fill(held, "flat", 3, 20000, T0 + 102)
    calls = list(venue.calls)
    [roll] = Roller(held).advance(T0 + 103)
    assert roll.status is RollStatus.FAILED and venue.calls == calls
    assert positions(held) == (0, 0)
    assert roll.reason == ("out leg R-ESH24-ESM24-out denied: reduce-only SELL 3 ESH24 would "
                           "take the position from +0 to -3")


def test_a_denied_in_leg_fails_the_roll_flat_never_doubled(venue):
    eng = month_engine(venue, max_position=5, instruments={"ESM24": {"max_position": 1}})
    eng.submit(OrderRequest("ESH24", Side.BUY, 3, client_order_id="P1"), T0 + 1)
    fill(eng, "P1", 3, 20000, T0 + 2)
    roller = Roller(eng)
    roll = roller.start(ROLL, T0 + 100)
    fill(eng, OUT, 3, 20050, T0 + 101)
    assert roller.advance(T0 + 101) == [roll]
    assert roll.status is RollStatus.FAILED and positions(eng) == (0, 0)
    assert roll.reason == ("in leg R-ESH24-ESM24-in denied: max position 1 ESM24: order would "
                           "take the position to +3; ESH24 holds +0, ESM24 +0")
    assert [k for k in roll_kinds(eng)][-3:] == ["order_initialized", "order_denied",
                                                 "roll_failed"]


def test_a_rejected_in_leg_fails_the_roll(held, venue):
    roller = Roller(held)
    roll = roller.start(ROLL, T0 + 100)
    fill(held, OUT, 3, 20050, T0 + 101)
    roller.advance(T0 + 101)
    held.on_report(v.Rejected(client_order_id=IN, ts_ns=T0 + 102, reason="no such contract"))
    assert roller.advance(T0 + 102) == [roll] and positions(held) == (0, 0)
    assert roll.reason == ("in leg R-ESH24-ESM24-in REJECTED after opening 0 of 3 (no such "
                           "contract); ESH24 holds +0, ESM24 +0")


def test_a_partly_filled_leg_waits_and_an_out_leg_ended_short_rolls_what_it_closed(held, venue):
    roller = Roller(held)
    roll = roller.start(ROLL, T0 + 100)
    fill(held, OUT, 2, 20050, T0 + 101)  # 2 of 3: still working
    assert roller.advance(T0 + 101) == [] and roll.status is RollStatus.CLOSING
    assert IN not in held.book
    held.on_report(v.Canceled(client_order_id=OUT, ts_ns=T0 + 102, reason="session closed"))
    assert roll.status is RollStatus.OPENING
    roller.advance(T0 + 102)
    assert held.book.get(IN).quantity == 2  # as many as the out leg closed
    fill(held, IN, 1, 20100, T0 + 103)
    assert roller.advance(T0 + 103) == [] and roll.status is RollStatus.OPENING
    fill(held, IN, 1, 20100, T0 + 104, n=2)
    assert roller.advance(T0 + 104) == [roll]
    assert roll.status is RollStatus.FAILED and positions(held) == (1, 2)
    assert roll.reason == ("out leg R-ESH24-ESM24-out closed 2 of 3; ESH24 holds +1, ESM24 +2")


def test_an_in_leg_ended_short_says_what_each_contract_holds(held, venue):
    roller = Roller(held)
    roll = roller.start(ROLL, T0 + 100)
    fill(held, OUT, 3, 20050, T0 + 101)
    roller.advance(T0 + 101)
    fill(held, IN, 1, 20100, T0 + 102)
    held.on_report(v.Canceled(client_order_id=IN, ts_ns=T0 + 103, reason="IOC"))
    roller.advance(T0 + 103)
    assert positions(held) == (0, 1)
    assert roll.reason == ("in leg R-ESH24-ESM24-in CANCELED after opening 1 of 3 (IOC); "
                           "ESH24 holds +0, ESM24 +1")


def test_a_restart_between_the_legs_sends_the_missing_leg_once(held, venue):
    roller = Roller(held)
    roller.start(ROLL, T0 + 100)
    fill(held, OUT, 3, 20050, T0 + 101)  # the crash: before the in leg went out
    calls = list(venue.calls)
    again = TradingEngine(held.store, MONTHS, held.risk_config, venue=venue)
    assert again.rolls.get(ROLL.roll_id).status is RollStatus.OPENING
    Roller(again).advance(T0 + 200)
    Roller(again).advance(T0 + 201)
    assert venue.calls == [*calls, ("submit", IN)]
    fill(again, IN, 3, 20100, T0 + 202)
    Roller(again).advance(T0 + 202)
    assert again.rolls.get(ROLL.roll_id).status is RollStatus.COMPLETED
    assert positions(again) == (0, 3)


def test_illegal_roll_events_change_nothing(held):
    roller = Roller(held)
    roller.start(ROLL, T0 + 100)
    before, seq = held.snapshot(), held.store.last_seq()
    with pytest.raises(IllegalRollTransition, match="roll_completed is illegal in state CLOSING"):
        held.record_roll(RollCompleted(ts_ns=T0 + 101, roll_id=ROLL.roll_id, quantity=3))
    # the same start again is the same fact (its event id): kept once
    held.record_roll(RollStarted(ts_ns=T0 + 102, roll_id=ROLL.roll_id, root="ES",
                                 from_symbol="ESH24", to_symbol="ESM24", quantity=3))
    assert held.snapshot() == before and held.store.last_seq() == seq
    fill(held, OUT, 3, 20050, T0 + 103)
    before, seq = held.snapshot(), held.store.last_seq()
    with pytest.raises(IllegalRollTransition, match="completed with \\+3 but the in leg opened 0"):
        held.record_roll(RollCompleted(ts_ns=T0 + 104, roll_id=ROLL.roll_id, quantity=3))
    assert held.snapshot() == before and held.store.last_seq() == seq
    held.record_roll(RollFailed(ts_ns=T0 + 105, roll_id=ROLL.roll_id, reason="an operator's"))
    with pytest.raises(IllegalRollTransition, match="roll_completed is illegal in state FAILED"):
        held.record_roll(RollCompleted(ts_ns=T0 + 106, roll_id=ROLL.roll_id, quantity=3))
    assert roller.advance(T0 + 107) == [] and IN not in held.book
