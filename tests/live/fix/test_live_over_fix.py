"""`foxhunt live` over FIX is paper trading: a rule and a trained agent trading through the
real gateway against the local exchange in lockstep get the paper run's fills (bar, order,
contracts, price), stops and session flattens included, with the exchange's positions equal
to the log's."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from foxhunt.backtest.strategies import parse_strategy
from foxhunt.env import EnvConfig
from foxhunt.env.market import session_ends
from foxhunt.execution import SqlEventStore
from foxhunt.live.fix.exchange import LocalExchange, Market
from foxhunt.live.fix.gateway import FixVenue
from foxhunt.live.fix.settings import write_session_file
from foxhunt.live.trader import LiveRuleDecider, LiveTrader
from foxhunt.orders import Contract
from foxhunt.paper import load_agent, load_rule

from ...backtest.builders import instrument, synth, write_checkpoint
from ...paper.helpers import OPEN_LIMITS, paper_trader
from .helpers import free_port

STRATEGY = "sma:5,20"
ENV = EnvConfig(flatten_at_session_end=True, stop_atr_multiples=(0.5, 1.5))


def fills(events):
    return [(f.ts_ns, f.client_order_id, f.signed_quantity, f.price_ticks) for f in events]


@pytest.mark.parametrize("policy", ["rule", "agent"])
def test_live_over_fix_is_the_paper_run(policy, tmp_path):
    bars, inst = synth(2400, signal=0.3).bars, instrument()
    starts = np.flatnonzero(session_ends(bars.ts, inst.session)) + 1
    lo, hi = int(starts[2]), int(starts[4])  # two whole sessions after the features' warm-up
    if policy == "rule":
        env = ENV
        live_decider = LiveRuleDecider(parse_strategy(STRATEGY))
        paper_decider = load_rule(STRATEGY, bars).decider
    else:  # a checkpoint's agent, as the walk-forward trainer saves one
        path = write_checkpoint(tmp_path / "agent.pt", bars, inst, fit_until=lo)
        loaded = load_agent(path, inst)
        env = loaded.env.model_copy(update={"flatten_at_session_end": True})
        live_decider, paper_decider = loaded.decider, load_agent(path, inst).decider
    contract = Contract.from_instrument(inst)
    port = free_port()
    exchange = LocalExchange([Market.of(contract, bars.slice(lo, hi), inst.session)],
                             tmp_path / "exchange", port=port, speed=None, lockstep=True,
                             slippage_ticks=env.slippage_ticks)  # fmt: skip
    exchange.start()
    session = write_session_file(tmp_path / "client" / "session.cfg", port=port, reconnect_s=1)
    venue = FixVenue(session, {inst.symbol: contract})
    feed = venue.feed()
    try:
        trader = LiveTrader(bars.slice(0, lo), inst, live_decider,
                            store=SqlEventStore("sqlite://"), venue=venue, feed=feed, env=env,
                            risk=OPEN_LIMITS, journal=tmp_path / "bars.jsonl",
                            starting_cash=Decimal(100_000), stale_after_s=1e9)  # fmt: skip
        live = trader.run()
        venue_position = venue.positions(5).get(inst.symbol, 0)
    finally:
        feed.close()
        venue.shutdown()
        exchange.stop()
    assert live.bars == hi - lo and "ended" in live.ended
    paper = paper_trader(bars, inst, paper_decider, (lo, hi), env)
    result = paper.run()
    assert result.orders > 5, "the case must trade"
    # the live trader does not know the data ends: its decision at the last bar fills at the
    # exchange's end of data, where paper makes none
    last = f"P{hi - 1}"
    got = [f for f in fills(trader._fill_events) if f[1] != last]
    assert got == fills(paper._fill_events)
    assert live.refused_reports == 0 and live.reconciliations[0].ok
    assert venue_position == trader.engine.account.position(inst.symbol)
