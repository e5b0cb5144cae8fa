"""Crash recovery: a paper run killed with SIGKILL at random moments, at least 20 times, and
restarted each time on the same log and venue journal, ends with the same trades and PnL as an
uninterrupted run; no order is lost, none reaches the venue twice.

The paper process is a fork of the test process (a fresh interpreter would spend ~2 s importing
torch per restart); SIGKILL gives it no chance to clean up, as `kill -9` would not. Random
actions trade every few bars with stops, so kills land between the venue and the log, between
the log's append and the send, inside bars and between them.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time

import pytest

from foxhunt.env import EnvConfig
from foxhunt.execution import SqlEventStore
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.paper import load_rule
from foxhunt.paper.runner import OrderFilled

from ..backtest.builders import instrument, synth
from .helpers import paper_trader

WINDOW = (100, 780)
STRATEGY = "random:3"
KILLS = 20


@pytest.fixture(scope="module")
def market():
    return synth(800, signal=0.3).bars, instrument()


def _child(bars, inst, folder, url) -> None:
    trader = paper_trader(bars, inst, load_rule(STRATEGY, bars).decider, WINDOW, EnvConfig(),
                          url=url, journal=folder / "venue.jsonl")
    trader.run()
    os._exit(0)


def test_kill_9_at_random_moments_loses_and_doubles_nothing(market, tmp_path, log_url):
    """On a SQLite file and on PostgreSQL."""
    bars, inst = market
    clean = paper_trader(bars, inst, load_rule(STRATEGY, bars).decider, WINDOW, EnvConfig())
    expected = clean.run()
    ctx = multiprocessing.get_context("fork")
    rng = random.Random(7)
    kills = runs = 0
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, "the crash loop did not finish"
        proc = ctx.Process(target=_child, args=(bars, inst, tmp_path, log_url))
        proc.start()
        runs += 1
        if kills < KILLS:
            time.sleep(rng.uniform(0.0, 0.04))
            if proc.exitcode is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
        proc.join(60)
        assert proc.exitcode is not None, "the paper process hung"
        if proc.exitcode == 0:
            break
        assert proc.exitcode == -signal.SIGKILL, f"the paper process failed ({proc.exitcode})"
    assert kills >= KILLS

    # the finished run, as a fresh process would see it
    final = paper_trader(bars, inst, load_rule(STRATEGY, bars).decider, WINDOW, EnvConfig(),
                         url=log_url, journal=tmp_path / "venue.jsonl")
    got = final.run()
    assert got.pnl == expected.pnl and got.position == 0
    assert [(f.bar, f.client_order_id, f.quantity, f.price) for f in got.fills] == \
        [(f.bar, f.client_order_id, f.quantity, f.price) for f in expected.fills]
    assert final.trades(got).records() == clean.trades(expected).records()

    # 0 lost: every order of the clean run is in the log, with the same fate; 0 doubled: the
    # venue accepted each id once, and filled each once at most
    log = {o.client_order_id: (o.status, o.filled_qty) for o in final.engine.book}
    assert log == {o.client_order_id: (o.status, o.filled_qty) for o in clean.engine.book}
    venue = SimulatedVenue(final.venue.contracts, journal=tmp_path / "venue.jsonl")
    accepted = [r.client_order_id for r in venue.history if type(r).__name__ == "Accepted"]
    sent = {o.client_order_id for o in clean.engine.book if str(o.status) != "DENIED"}
    assert len(accepted) == len(set(accepted)) and set(accepted) == sent, sent ^ set(accepted)
    fills = [e for _, e in SqlEventStore(log_url).read()
             if isinstance(e, OrderFilled)]
    assert len(fills) == len({f.client_order_id for f in fills}) == len(expected.fills)
