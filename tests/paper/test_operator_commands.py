"""An operator's command beside a trader that keeps appending: the command is made again on the
log as it has become, never lost to the race for the next sequence number."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

from foxhunt.cli import main
from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.execution.store import (
    DuplicateEventError,
    LogBusyError,
    SeqTakenError,
    default_log_url,
)
from foxhunt.orders import Contract
from foxhunt.paper.accounts import operator_command
from foxhunt.risk import RiskConfig


def test_a_halt_lands_while_another_writer_appends_marks(isolated_home, capsys):
    main(["data", "synth", "--symbol", "SYN", "--bars", "200", "--seed", "1", "--json"])
    main(["paper", "SYN", "--bars", "1min", "--strategy", "buy-and-hold", "--account", "a",
          "--json", "--to", "2024-01-02T15:00:00Z"])
    capsys.readouterr()
    from foxhunt.data.instruments import InstrumentRegistry

    reg = InstrumentRegistry.load(isolated_home / "instruments.toml")
    contracts = {s: Contract.from_instrument(reg.get(s)) for s in reg.symbols}
    url = default_log_url("a", isolated_home)
    writer = TradingEngine(SqlEventStore(url), contracts, RiskConfig())
    stop = threading.Event()
    marks = []

    def trade() -> None:
        ts = 1_704_300_000_000_000_000
        while not stop.is_set():
            ts += 60_000_000_000
            try:
                writer.mark("SYN", Decimal("4000.25"), ts)
                marks.append(ts)
                time.sleep(0.005)  # a fast trader: a bar every 5 ms
            except (SeqTakenError, DuplicateEventError, LogBusyError):  # the operator was first
                writer.follow()  # apply what it wrote; syncing the store alone would skip it

    thread = threading.Thread(target=trade)
    thread.start()
    try:
        for _ in range(1000):
            if len(marks) >= 5:
                break
            time.sleep(0.01)
        for action in ("halt", "resume", "reduce", "resume", "halt"):
            doc = operator_command(isolated_home, "a", None, contracts, action, action, "a test")
            assert doc.reason == action
        before = len(marks)
        for _ in range(1000):
            if len(marks) >= before + 5:
                break
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(10)
        writer.store.close()
    assert len(marks) >= before + 5  # the trader went on
    assert writer.trading_state.name == "HALTED"  # and folded the operator's commands
