"""Live trading is paper trading with a venue outside: over the same bars, the live loop (a
feed that publishes each bar at its close, a venue that fills on its own) makes the same
decisions and gets the same fills and PnL as the paper run, for a rule and for an agent."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from foxhunt.backtest.strategies import parse_strategy
from foxhunt.env import EnvConfig
from foxhunt.env.market import session_ends
from foxhunt.execution import SqlEventStore
from foxhunt.live.trader import LiveRuleDecider, LiveTrader
from foxhunt.paper import load_agent, load_rule

from ..backtest.builders import instrument, synth, write_checkpoint
from ..paper.helpers import OPEN_LIMITS, paper_trader
from .loopback import LoopbackExchange

N = 1200


@pytest.fixture(scope="module")
def market():
    bars, inst = synth(N * 2, signal=0.3).bars, instrument()
    ends = np.flatnonzero(session_ends(bars.ts, inst.session))
    return bars, inst, ends + 1  # each session's first bar


def live_run(bars, inst, decider, env, window, tmp_path, name):
    lo, hi = window
    exchange = LoopbackExchange(bars, inst, lo, hi, env.slippage_ticks)
    trader = LiveTrader(bars.slice(0, lo), inst, decider, store=SqlEventStore("sqlite://"),
                        venue=exchange, feed=exchange, env=env, risk=OPEN_LIMITS,
                        journal=tmp_path / f"{name}.bars", starting_cash=Decimal(100_000),
                        stale_after_s=1e9)  # fmt: skip
    return trader, trader.run()


def fills_of(events):
    return [(f.ts_ns, f.client_order_id, f.signed_quantity, f.price_ticks) for f in events]


def check_same(paper_trader_, live_trader, live):
    paper = paper_trader_.run()
    assert paper.orders > 5, "the case must trade"
    assert fills_of(live_trader._fill_events) == fills_of(paper_trader_._fill_events)
    assert live.equity == paper.equity
    assert live.position == paper.position == 0
    assert live.refused_reports == 0 and live.reconciliations[0].ok


@pytest.mark.parametrize("strategy", ["sma:10,30", "zfade:40,1.5"])
def test_a_rule_live_is_its_paper_run(market, strategy, tmp_path):
    bars, inst, starts = market
    window = int(starts[0]), int(starts[2])  # two whole sessions
    env = EnvConfig(flatten_at_session_end=True, stop_atr_multiples=(0.5, 1.5))
    paper = paper_trader(bars, inst, load_rule(strategy, bars).decider, window, env)
    trader, live = live_run(bars, inst, LiveRuleDecider(parse_strategy(strategy)), env, window,
                            tmp_path, strategy)  # fmt: skip
    assert live.bars == window[1] - window[0] and live.ended
    check_same(paper, trader, live)


def test_an_agent_live_is_its_paper_run(market, tmp_path):
    bars, inst, starts = market
    window = int(starts[2]), int(starts[4])  # after the features' warm-up
    path = write_checkpoint(tmp_path / "agent.pt", bars, inst, fit_until=window[0])
    paper_policy = load_agent(path, inst)
    env = paper_policy.env.model_copy(update={"flatten_at_session_end": True})
    paper = paper_trader(bars, inst, paper_policy.decider, window, env)
    trader, live = live_run(bars, inst, load_agent(path, inst).decider, env, window, tmp_path,
                            "agent")  # fmt: skip
    check_same(paper, trader, live)
