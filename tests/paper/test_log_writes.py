"""What a paper run writes to its log: a bar with no order and no fill costs no transaction.
Its mark is applied at once and reaches the log with the next append; every append but the
run's last holds an order or risk event, and the log still rebuilds the live state."""

from __future__ import annotations

from foxhunt.env import EnvConfig
from foxhunt.execution import TradingEngine
from foxhunt.paper import load_rule, runner
from foxhunt.paper.runner import FLUSH_MARKS
from foxhunt.portfolio import PriceMarked

from ..backtest.builders import instrument, synth
from .helpers import paper_trader


def test_quiet_bars_are_marked_in_memory_and_logged_with_the_next_append(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "FLUSH_SECONDS", 1e9)  # no flush by the clock on a slow machine
    bars, inst = synth(1500, signal=0.3).bars, instrument()
    trader = paper_trader(bars, inst, load_rule("sma:10,30", bars).decider, (0, 1500),
                          EnvConfig(), url=f"sqlite:///{tmp_path / 'log.sqlite'}")
    batches: list[list] = []
    append = trader.store.append

    def counting(events):
        batches.append(list(events))
        return append(events)

    trader.store.append = counting
    trader.run()
    live = trader.engine
    marks = sum(isinstance(e, PriceMarked) for b in batches for e in b)
    assert marks == 1500  # every bar's close, once
    assert len(batches) < marks / 5, "quiet bars must not each cost a transaction"
    for batch in batches[:-1]:
        only_marks = all(isinstance(e, PriceMarked) for e in batch)
        assert not only_marks or len(batch) >= FLUSH_MARKS, [e.KIND for e in batch]
    again = TradingEngine(trader.store, live.contracts, live.risk_config)
    assert again.snapshot() == live.snapshot() and live.deferred == 0
