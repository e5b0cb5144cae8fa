"""`rebuild_journal`: when the venue's journal is damaged or lost its tail, a resumed paper run
refuses to trade (`ReconciliationError`, `VenueJournalError`); rebuilding the journal from the
event log (the truth for a simulated venue) lets it go on, and it ends with the uninterrupted
run's fills, trades and PnL, every order with the same fate.

The runs trade random actions with trailing stops and session flattens (market, stop and
at-the-close fills), as tests/paper/test_paper_equals_backtest.py does. A run stops after a
bar (the process died there) or inside one (a fill the venue made never reached the log); then
the journal loses its last lines, or one of its lines turns to garbage."""

from __future__ import annotations

import json

import pytest

from foxhunt.env import EnvConfig
from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.execution.sim import SimulatedVenue, VenueJournalError, rebuild_journal
from foxhunt.orders import Contract, OrderRequest, OrderStatus, OrderType, Side
from foxhunt.orders.events import OrderFilled
from foxhunt.paper import ReconciliationError, load_rule
from foxhunt.paper.runner import reconcile
from foxhunt.risk import RiskConfig

from ..backtest.builders import instrument, synth
from ..paper.helpers import paper_trader
from .helpers import CONTRACTS, T0, engine

WINDOW = (50, 700)
STRATEGY = "random:11"
ENV = EnvConfig(flatten_at_session_end=True, stop_atr_multiples=(0.5, 1.5))
CRASH_BAR = 400
MINUTE = 60 * 10**9


class Crash(Exception):
    """The paper process died here."""


@pytest.fixture(scope="module")
def market():
    return synth(760, signal=0.3).bars, instrument()


@pytest.fixture(scope="module")
def clean(market):
    bars, inst = market
    trader = paper_trader(bars, inst, load_rule(STRATEGY, bars).decider, WINDOW, ENV)
    return trader, trader.run()


def trader_on(market, tmp_path):
    bars, inst = market
    return paper_trader(bars, inst, load_rule(STRATEGY, bars).decider, WINDOW, ENV,
                        url=f"sqlite:///{tmp_path / 'log.sqlite'}",
                        journal=tmp_path / "venue.jsonl")


def after_a_bar(trader, bars) -> None:
    def progress(done: int, _total: int) -> None:
        if WINDOW[0] + done - 1 >= CRASH_BAR:
            raise Crash
    trader.progress = progress


def inside_a_bar(trader, bars) -> None:
    """The first fill from CRASH_BAR on is made at the venue and journaled; its append dies."""
    append, due = trader.store.append, int(bars.ts[CRASH_BAR])

    def dying(events):
        if any(isinstance(e, OrderFilled) and e.ts_ns >= due for e in events):
            raise Crash
        return append(events)
    trader.store.append = dying


def cut_fills(path, fills: int) -> None:
    """The journal loses its tail: every line from its `fills`-th last fill on."""
    lines = path.read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if json.loads(line).get("kind") == "Filled"]
    path.write_text("".join(lines[:at[-fills]]))


def garbage_in_the_middle(path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[len(lines) // 2] = '{"op": "report", "n": \x00\x00\x00\n'
    path.write_text("".join(lines))


CASES = {
    "stopped after a bar, tail lost": (after_a_bar, lambda p: cut_fills(p, 1), ReconciliationError),
    "died inside a bar, tail lost": (inside_a_bar, lambda p: cut_fills(p, 2), ReconciliationError),
    "a garbage line in the middle": (after_a_bar, garbage_in_the_middle, VenueJournalError),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_run_whose_journal_is_damaged_refuses_then_goes_on_from_a_rebuilt_one(
        market, clean, tmp_path, case):
    bars, inst = market
    stop, damage, refusal = CASES[case]
    first = trader_on(market, tmp_path)
    stop(first, bars)
    with pytest.raises(Crash):
        first.run()
    first.venue.close()
    first.store.close()
    journal = tmp_path / "venue.jsonl"
    damage(journal)

    with pytest.raises(refusal):
        refused = trader_on(market, tmp_path)
        try:
            refused.run()
        finally:
            refused.venue.close()
            refused.store.close()

    damaged = journal.read_bytes()
    store = SqlEventStore(f"sqlite:///{tmp_path / 'log.sqlite'}")
    kept = rebuild_journal(journal, store, {inst.symbol: Contract.from_instrument(inst)})
    store.close()
    assert kept == tmp_path / "venue.jsonl.damaged-1" and kept.read_bytes() == damaged

    resumed = trader_on(market, tmp_path)
    got = resumed.run()
    resumed.venue.close()
    clean_trader, expected = clean
    assert got.resumed_from is not None and got.reconciled["reports_applied"] == 0
    assert [(f.bar, f.client_order_id, f.quantity, f.price) for f in got.fills] == \
        [(f.bar, f.client_order_id, f.quantity, f.price) for f in expected.fills]
    assert got.pnl == expected.pnl and got.position == 0
    assert resumed.trades(got).records() == clean_trader.trades(expected).records()
    fates = {o.client_order_id: (o.status, o.filled_qty) for o in resumed.engine.book}
    assert fates == {o.client_order_id: (o.status, o.filled_qty) for o in clean_trader.engine.book}
    assert {f.kind for f in got.fills} == {"market", "stop", "close"}


def test_the_rebuilt_venue_is_the_logs_state(tmp_path):
    """Working orders with their terms and trigger state, positions, every report of the log,
    its last mark as the last bar; an order the venue never acknowledged is left for
    reconciliation to send, and new ids go on past the log's."""
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    venue = SimulatedVenue(CONTRACTS, 1.0, journal=tmp_path / "lost.jsonl")
    eng = engine(url, venue=venue)

    def deliver(keep=lambda r: True):
        for r in venue.reports():
            if keep(r):
                eng.on_report(r)

    t = T0 + MINUTE
    eng.mark("ES", 100.0, T0)
    eng.submit(OrderRequest("ES", Side.BUY, 3), T0)
    deliver()
    venue.on_bar("ES", t, 100.0, 100.5, 99.5)
    deliver()
    eng.mark("ES", 100.25, t)
    hit = eng.submit(OrderRequest("ES", Side.SELL, 1, OrderType.STOP, stop_price=99.0), t)
    moved = eng.submit(OrderRequest("ES", Side.SELL, 1, OrderType.STOP, stop_price=98.0), t)
    limit = eng.submit(OrderRequest("ES", Side.BUY, 1, OrderType.LIMIT, limit_price=98.0), t)
    deliver()
    eng.modify(moved.client_order_id, t, stop_price=98.5)
    deliver()
    venue.on_bar("ES", t + MINUTE, 99.5, 99.75, 98.75)  # `hit` triggers and fills
    deliver(keep=lambda r: type(r).__name__ != "Filled")  # the fill never reached the log
    venue.close()
    eng.venue = None  # from here on the venue hears nothing
    eng.cancel(limit.client_order_id, t + MINUTE)
    unsent = eng.submit(OrderRequest("ES", Side.SELL, 1), t + MINUTE)

    assert rebuild_journal(tmp_path / "venue.jsonl", eng.store, CONTRACTS) is None
    rebuilt = SimulatedVenue(CONTRACTS, 1.0, journal=tmp_path / "venue.jsonl")
    assert sorted(rebuilt.working) == sorted(o.client_order_id for o in (hit, moved, limit))
    terms = {cid: (r.triggered, r.stop_ticks, r.leaves) for cid, r in rebuilt._resting.items()}
    assert terms[hit.client_order_id] == (True, 396, 1)
    assert terms[moved.client_order_id] == (False, 394, 1)
    assert rebuilt.positions == {"ES": 3} and rebuilt.last_bar == {"ES": t}
    assert unsent.client_order_id not in rebuilt.known
    assert [type(r).__name__ for r in rebuilt.history] == [
        "Accepted", "Filled", "Accepted", "Accepted", "Accepted", "Updated", "Triggered"]

    folded = TradingEngine(SqlEventStore(url), CONTRACTS, RiskConfig(), venue=rebuilt)
    assert reconcile(folded, rebuilt, "ES") == \
        {"reports_applied": 0, "orders_sent": 1, "requests_sent": 1}
    assert folded.book.get(limit.client_order_id).status is OrderStatus.CANCELED
    rebuilt.on_bar("ES", t + MINUTE, 99.5, 99.75, 98.75)  # the bar the log did not finish
    reports = rebuilt.reports()
    assert [type(r).__name__ for r in reports] == ["Filled", "Filled"]  # unsent, then hit
    for r in reports:
        folded.on_report(r)
    assert folded.account.position("ES") == rebuilt.positions["ES"] == 1
    assert folded.book.get(hit.client_order_id).fill_cost_ticks == 395  # 99.00 less a tick
    ids = [r.fill_id for r in rebuilt.history if type(r).__name__ == "Filled"]
    assert len(set(ids)) == len(ids) == 3
