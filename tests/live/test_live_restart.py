"""A live trader stopped at any bar and started again ends where an uninterrupted run ends:
the same orders, fills and equity, nothing sent twice. Reconciliation resolves what a crash
left in flight by asking, never by sending again, and a venue that disagrees with the log
stops the account from adding risk until an operator decides."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from foxhunt.backtest.strategies import parse_strategy
from foxhunt.env import EnvConfig
from foxhunt.env.market import session_ends
from foxhunt.execution import SqlEventStore
from foxhunt.live.reconcile import NEVER_REACHED, adopt_venue
from foxhunt.live.trader import LiveRuleDecider, LiveTrader
from foxhunt.orders.enums import Side
from foxhunt.orders.order import OrderRequest
from foxhunt.orders.state import OrderStatus
from foxhunt.portfolio.events import PositionAdopted
from foxhunt.risk.events import TradingState

from ..backtest.builders import instrument, synth
from ..paper.helpers import OPEN_LIMITS
from .loopback import LoopbackExchange

ENV = EnvConfig(flatten_at_session_end=True, stop_atr_multiples=(0.5, 1.5))
STRATEGY = "sma:5,20"


@pytest.fixture(scope="module")
def market():
    bars, inst = synth(1600, signal=0.3).bars, instrument()
    ends = np.flatnonzero(session_ends(bars.ts, inst.session))
    return bars, inst, (int(ends[0]) + 1, int(ends[2]) + 1)


def trader(bars, inst, exchange, tmp_path, *, clock=None, on_mismatch="reduce", **extra):
    lo = exchange_start(exchange)
    kw = extra if clock is None else {"clock": clock, "stale_after_s": 10.0, **extra}
    return LiveTrader(bars.slice(0, lo), inst, LiveRuleDecider(parse_strategy(STRATEGY)),
                      store=SqlEventStore(f"sqlite:///{tmp_path / 'log.db'}"), venue=exchange,
                      feed=exchange, env=ENV, risk=OPEN_LIMITS, journal=tmp_path / "bars.jsonl",
                      starting_cash=Decimal(100_000), on_mismatch=on_mismatch,
                      **({"stale_after_s": 1e9} | kw))  # fmt: skip


def exchange_start(exchange):
    return exchange.first


def new_exchange(bars, inst, window, tmp_path):
    ex = LoopbackExchange(bars, inst, *window, ENV.slippage_ticks, journal=tmp_path / "venue.jsonl")
    ex.first = window[0]
    return ex


def fills(t):
    return [(f.ts_ns, f.client_order_id, f.signed_quantity, f.price_ticks) for f in t._fill_events]


@pytest.fixture(scope="module")
def uninterrupted(market, tmp_path_factory):
    bars, inst, window = market
    tmp = tmp_path_factory.mktemp("whole")
    ex = new_exchange(bars, inst, window, tmp)
    t = trader(bars, inst, ex, tmp)
    result = t.run()
    return fills(t), result.equity, result.orders


@pytest.mark.parametrize("stops", [[1], [37, 38], [120, 400, 401, 700]])
def test_stopping_and_starting_again_changes_nothing(market, uninterrupted, stops, tmp_path):
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    done = 0
    for stop in stops:
        trader(bars, inst, ex, tmp_path).run(max_bars=stop - done)
        done = stop
    last = trader(bars, inst, ex, tmp_path)
    result = last.run()
    assert (fills(last), result.equity, result.orders) == uninterrupted
    assert all(r.ok for r in last.reconciliations)


def test_an_order_that_never_reached_the_venue_is_rejected_and_decided_afresh(
        market, uninterrupted, tmp_path):  # fmt: skip
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    lost = []
    real_submit = ex.submit

    def drop_first_market_order(order):  # the crash between the log and the venue
        if not lost and order.client_order_id.startswith("P"):
            lost.append(order.client_order_id)
            return
        real_submit(order)

    ex.submit = drop_first_market_order
    first = trader(bars, inst, ex, tmp_path)
    first.run(until=lambda: bool(lost))
    ex.submit = real_submit
    again = trader(bars, inst, ex, tmp_path)
    result = again.run()
    order = again.engine.book.get(lost[0])
    assert order.status is OrderStatus.REJECTED and order.reason == NEVER_REACHED
    assert lost[0] not in ex.sim.known
    assert again.reconciliations[0].resolved == {lost[0]: "rejected: never reached the venue"}
    # the bar's step ran again and sent a new order in its place: the run is the uninterrupted
    # one, one order more (the rejected one), under the new order's id
    assert f"{lost[0]}.2" in ex.sim.known
    renamed = [(ts, cid.replace(f"{lost[0]}.2", lost[0]), q, p) for ts, cid, q, p in fills(again)]
    want_fills, want_equity, want_orders = uninterrupted
    assert (renamed, result.equity, result.orders) == (want_fills, want_equity, want_orders + 1)


def test_a_venue_that_disagrees_leaves_the_account_reducing_with_one_line(market, tmp_path):
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    trader(bars, inst, ex, tmp_path).run(max_bars=5)
    ex.sim.positions[inst.symbol] = ex.sim.positions.get(inst.symbol, 0) + 2  # a fill we lost
    t = trader(bars, inst, ex, tmp_path)
    t.run(max_bars=3)
    rec = t.reconciliations[0]
    assert not rec.ok and rec.state == "REDUCING"
    assert "position" in rec.line() and "at the venue" in rec.line()
    assert t.engine.trading_state is TradingState.REDUCING
    assert t.engine.account.position(inst.symbol) != ex.sim.positions[inst.symbol]


def test_an_operator_adopts_the_venues_view_and_trading_goes_on(market, tmp_path):
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    trader(bars, inst, ex, tmp_path).run(max_bars=5)
    ex.sim.positions[inst.symbol] = ex.sim.positions.get(inst.symbol, 0) + 2  # a fill we lost
    t = trader(bars, inst, ex, tmp_path)
    t.run(max_bars=1)
    assert t.engine.trading_state is TradingState.REDUCING
    eng, ts = t.engine, t._now_ts() + 1
    equity = eng.account.equity()
    lines = adopt_venue(eng, ex, inst.symbol, ts_ns=ts, reason="the venue is right")
    assert lines and "(the venue's)" in lines[-1]
    assert eng.account.position(inst.symbol) == ex.sim.positions[inst.symbol]
    assert eng.account.equity() == equity  # booked at the last price: no PnL made up
    adopted = [e for _, e in eng.store.read() if isinstance(e, PositionAdopted)]
    assert [(e.quantity, e.reason) for e in adopted] == [(ex.sim.positions[inst.symbol],
                                                          "the venue is right")]  # fmt: skip
    eng.set_trading_state(TradingState.ACTIVE, ts, "adopted")
    again = trader(bars, inst, ex, tmp_path)
    again.run(max_bars=3)
    assert again.reconciliations[0].ok
    assert again.engine.trading_state is TradingState.ACTIVE


def test_status_requests_the_venue_does_not_answer_are_a_difference(market, tmp_path):
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    first = trader(bars, inst, ex, tmp_path)
    first.run(until=lambda: any(o.is_working for o in first.engine.book) if first.engine else False)
    ex.refuse_status = True
    t = trader(bars, inst, ex, tmp_path, status_timeout_s=0.2)
    t.run(max_bars=1)
    assert any("did not answer" in d for d in t.reconciliations[0].differences)


def test_without_fresh_prices_only_reducing_orders_pass(market, tmp_path):
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    now = [0.0]
    t = trader(bars, inst, ex, tmp_path, clock=lambda: now[0])
    t.run(max_bars=1)
    eng = t.engine
    now[0] = 60.0  # a minute without a bar
    t._between_bars()
    assert inst.symbol in eng.risk.stale
    ts = t._now_ts() + 1
    pos = eng.account.position(inst.symbol)
    adding = eng.submit(OrderRequest(inst.symbol, Side.BUY if pos >= 0 else Side.SELL, 1), ts)
    assert adding.status is OrderStatus.DENIED and "no fresh price" in adding.reason
    if not pos:  # make a position to reduce: fresh again, buy, stale again
        t._last_bar_wall = now[0]
        t._between_bars()
        eng.submit(OrderRequest(inst.symbol, Side.BUY, 2), ts)
        ex.next_bar(0)
        t._deliver()
        now[0] += 60.0
        t._between_bars()
        pos = eng.account.position(inst.symbol)
    assert pos and inst.symbol in eng.risk.stale
    reducing = eng.submit(OrderRequest(inst.symbol, Side.of(-pos), abs(pos)), ts + 1)
    assert reducing.status is OrderStatus.SUBMITTED


def test_a_reconnect_reconciles_before_the_next_bar(market, tmp_path):
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    seen = []

    def drop_after_three():
        seen.append(None)
        if len(seen) == 4:
            ex.reconnected = True
        return len(seen) > 6

    t = trader(bars, inst, ex, tmp_path)
    t.run(until=drop_after_three)
    assert [r.why for r in t.reconciliations] == ["start", "reconnect"]
    assert all(r.ok for r in t.reconciliations)


def test_an_operators_kill_from_another_process_reaches_the_venue_while_trading(market, tmp_path):
    bars, inst, window = market
    ex = new_exchange(bars, inst, window, tmp_path)
    t = trader(bars, inst, ex, tmp_path)
    fired = []

    def kill_once_in_a_position():
        eng = t.engine
        if not fired and eng is not None and eng.account.position(inst.symbol):
            from foxhunt.execution import SqlEventStore as Store
            from foxhunt.execution import TradingEngine

            other = TradingEngine(Store(f"sqlite:///{tmp_path / 'log.db'}"), eng.contracts,
                                  OPEN_LIMITS)  # `foxhunt risk kill` in another terminal
            fired.extend(other.kill(t._now_ts(), "operator"))
            other.store.close()
            return False
        return len(fired) > 0 and t.engine.account.position(inst.symbol) == 0

    t.run(until=kill_once_in_a_position)
    assert fired and t.engine.trading_state is TradingState.HALTED
    flatten = t.engine.book.get(fired[0].client_order_id)
    assert flatten.status is OrderStatus.FILLED
    assert t.engine.account.position(inst.symbol) == 0 == ex.sim.positions[inst.symbol]
    assert t.reconciliations[-1].why == "operator command"
