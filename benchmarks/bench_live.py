"""Live trading over FIX on loopback: tick-to-order latency, and sustained orders per second.

The venue is the local exchange (`LocalExchange`, a QuickFIX acceptor) on 127.0.0.1 and a free
port, in a process of its own, as `foxhunt venue` runs beside `foxhunt live` (`--exchange
thread` runs it inside the benchmark's process, as the tests wire it: its Python threads then
share the trader's GIL). The trader's side is the real one: `FixVenue` (a QuickFIX initiator,
its report journal: a fill fsync'd, an acceptance flushed), `FixMarketData` on the same
session, `TradingEngine` (risk checks, the event log) and, for the latency, `LiveTrader`'s
per-bar loop.

1. tick to order: the exchange plays synthetic bars in lockstep (`speed=None, lockstep=True`:
   the next bar as soon as the trader said it is done with the last) to a `LiveTrader`. The
   exchange's `on_wire` hook stamps (`time.perf_counter_ns`, one clock for both ends) the
   moment bar t's market data message is handed to QuickFIX to send, and the moment the
   NewOrderSingle decided on bar t (ClOrdID `P<t>`) enters the exchange's `fromApp`; a
   sample is the difference, for every bar whose decision sent an order, after a warm-up.
   Between the two: FIX to the trader (whose gateway journals, fsync'd, the fill reports the
   exchange sends ahead of the bar), the feed's queue, the bar's reports applied (a durable
   log append each), the check for an operator's command, the bar journal, the features, the
   mark, the decision, the risk check, the durable append of the order, FIX back.
   Policies: `random:7` (every branch uniform at every bar: an order on ~2 bars in 3) and the
   CPU-sized agent (the shipped network under the CPU profile, 'default': hidden 128, 11
   atoms, window 1, the 22 default features; random weights, saved as the trainer saves a
   checkpoint and loaded with `foxhunt.paper.load_agent`, its compiled forward; see
   AGENT_SEED for its env's size fractions). Each on the
   live default event log, a SQLite file (WAL, synchronous=FULL: one fsync per order); the
   rule also on an in-memory log (the same path without the fsync). Targets, on the SQLite
   file: p99 <= 1 ms with the rule, <= 2 ms with the agent.
2. orders per second: a `TradingEngine` on a SQLite file (WAL, synchronous=FULL, as the
   default account log) with a `FixVenue` to the exchange submits N limit orders far from
   the market (alternately buy and sell, so they rest and net out), applying the reports as
   they come between submits, as fast as it goes; the clock stops when the engine has applied
   every order's Accepted and the log holds them. Per order: a risk check, one durable append
   (the order, carrying the reports applied since the last one: they are applied deferred, as
   the live loop applies them, each already in the gateway's journal), the gateway's journal
   (an acceptance is flushed, not fsync'd: a status request restores it after a power cut),
   the exchange's journal (group commit: one fdatasync for the orders that arrived while
   the last one ran, each acknowledged after it). Risk limits:
   `THROUGHPUT_LIMITS` (max_order_rate and max_orders_per_day raised to 10^9: the shipped 10
   a second and 1,000 a day would deny all but the first orders). Target >= 2,000 orders/s.
   Again with group commit (`TradingEngine.submit_many`, `--group` orders a transaction, every
   order in the log before it is sent), and on an in-memory log (no target): what the same path
   runs at without the log's fsync.

`breakdown` (full mode; `--breakdown` in quick) runs the rule on the SQLite file once more
with a timestamp at each step of a bar in the trader's process (feed message in -> handed to
the loop -> decision -> risk check -> log append -> order handed to QuickFIX), and the
throughput once more under cProfile: where the time goes.

Prints one JSON document on stdout (`--out FILE` also writes it), a table on stderr; targets
are reported as `target_met`, never as the exit status. `--quick` (CI runs it, < 30 s on 2
cores): 200 orders timed a latency run (after 20 of warm-up), 300 orders of throughput.

    .venv/bin/python benchmarks/bench_live.py --out results.json
    .venv/bin/python benchmarks/bench_live.py --quick
    .venv/bin/python benchmarks/bench_live.py --exchange thread
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import multiprocessing as mp
import os
import pstats
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import emit, log, run_main
from bench_risk import percentiles

from foxhunt.agents.dqn import BranchingQNetwork
from foxhunt.backtest.strategies import parse_strategy
from foxhunt.config import load_settings
from foxhunt.data.instruments import Instrument, InstrumentRegistry
from foxhunt.data.series import Bars
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.env import EnvConfig
from foxhunt.env.observation import ObservationSpec
from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.features import FeatureConfig, FeaturePipeline
from foxhunt.live.fix.exchange import LocalExchange, Market
from foxhunt.live.fix.gateway import FixVenue
from foxhunt.live.fix.settings import write_session_file
from foxhunt.live.trader import LiveRuleDecider, LiveTrader
from foxhunt.orders import Contract, OrderRequest, OrderType, Side
from foxhunt.orders.events import OrderAccepted
from foxhunt.paper import load_agent
from foxhunt.profiles import shipped_profiles
from foxhunt.risk import RiskConfig
from foxhunt.training.checkpoint import save_checkpoint

RULE = "random:7"
AGENT_SEED = 9
AGENT_SIZES = (1 / 3, 2 / 3, 1.0)
"""The random agent: its network initialised from this seed (as the trainer initialises one),
its env the shipped one but for these size fractions (bench_oms's workload: every branch of
the action moves the target, not only the direction), so that it trades: the most active of
16 seeds with and without them on this market, an order on ~1 bar in 30, 0.2% of its
decisions near ties that torch decides (with the shipped direction-only sizes the most active
seed traded on 1 bar in 55; weights scaled up traded more, but saturated the C51 heads: a
fifth of the decisions went to torch, ~0.5 ms each)."""
BARS_PER_DECISION = {"rule": 2.0, "agent": 60.0}
"""The exchange's window, in bars per order wanted (the rule sends an order on ~2 bars in 3,
the agent on ~1 in 40 over a long window); the trader stops once it sent the orders wanted."""
SEED = 3
HISTORY = 600
"""Stored bars before the first live one: the agent's features warm up on them (and its
checkpoint's normaliser is fitted on them)."""
FULL = {"decisions": 1000, "warmup": 50, "orders": 5000}
QUICK = {"decisions": 200, "warmup": 20, "orders": 300}
BREAKDOWN_DECISIONS = 500
QUICK_SKIPS = {"skipped": "--quick runs no breakdown and no profile (--breakdown runs them)"}
TARGETS_US = {"rule": 1000, "agent": 2000}
ORDERS_TARGET = 2000
GROUP = 10
"""The group-commit throughput run's orders a transaction (`TradingEngine.submit_many`)."""

OPEN_LIMITS = RiskConfig(
    max_order_qty=1000, max_position=1000, max_gross_notional=0, max_order_rate=1000,
    max_orders_per_day=1_000_000, price_collar_pct=1000, daily_loss_limit=0, max_drawdown=0,
)  # fmt: skip
"""The trader's limits (tests/paper/helpers.py's): none binds, every decision is sent."""
THROUGHPUT_LIMITS = OPEN_LIMITS.model_copy(update={"max_order_rate": 10**9,
                                                   "max_orders_per_day": 10**9,
                                                   "max_position": 10**6})  # fmt: skip
"""The throughput's: all N orders are stamped within microseconds of each other."""


# -- the market, the policies ----------------------------------------------------------------


def market(n_bars: int) -> tuple[Bars, Instrument, Contract]:
    bars = generate(SynthConfig(n_bars=n_bars, seed=SEED, signal_strength=0.0)).bars
    inst = InstrumentRegistry.load().get("SYN")
    return bars, inst, Contract.from_instrument(inst)


def agent_checkpoint(path: Path, bars: Bars, inst: Instrument) -> Path:
    """The CPU-sized agent (the shipped defaults under the CPU profile), randomly initialised and
    saved as the walk-forward trainer saves one (tests/backtest/builders.py's
    `write_checkpoint`), its normaliser fitted on the history."""
    with tempfile.TemporaryDirectory() as home:  # no config.toml: the shipped defaults alone
        spec = load_settings(home=Path(home)).settings.training_spec()
    spec = spec.sized_for(shipped_profiles()["default"])
    spec = spec.model_copy(update={"env": spec.env.model_copy(
        update={"size_fractions": AGENT_SIZES})})
    pipeline = FeaturePipeline(FeatureConfig(), inst.session)
    matrix = pipeline.transform(bars, fit_until=HISTORY)
    obs = ObservationSpec.of(spec.env, pipeline)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(AGENT_SEED)
        net = BranchingQNetwork(obs.size, spec.agent, matrix.groups, obs.window, obs.pos_dim)
    norm = matrix.normaliser
    extra = {"fold": 0, "normaliser": {"mean": norm.mean.tolist(), "std": norm.std.tolist()},
             "feature_names": list(matrix.names), "feature_groups": matrix.groups,
             "symbol": inst.symbol, "feature_config": pipeline.config.model_dump(mode="json"),
             "observation": asdict(obs)}  # fmt: skip
    return save_checkpoint(path, net, spec.model_dump(mode="json"), extra)


def policy(kind: str, bars: Bars, inst: Instrument, folder: Path) -> tuple[Any, EnvConfig, dict]:
    """(decider, env, description) of the rule or the agent."""
    if kind == "rule":
        decider = LiveRuleDecider(parse_strategy(RULE))
        return decider, EnvConfig(), {"policy": RULE, "env": "shipped EnvConfig()"}
    t = time.perf_counter()
    loaded = load_agent(agent_checkpoint(folder / "agent.pt", bars, inst), inst)
    decider, obs = loaded.decider, loaded.decider.observation
    assert loaded.env is not None
    return decider, loaded.env, {
        "policy": "CPU-sized agent (shipped defaults, CPU profile 'default'; random weights, "
                  f"seed {AGENT_SEED}; size fractions {[round(f, 3) for f in AGENT_SIZES]})",
        "window": obs.window, "features": obs.n_features, "observation": obs.size,
        "parameters": sum(p.numel() for p in decider.network.parameters()),
        "compiled_forward": decider.fast is not None,
        "setup_s": round(time.perf_counter() - t, 3)}  # fmt: skip


# -- the exchange, in its own process or in this one -----------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _open_exchange(spec: dict[str, Any], on_wire: Callable[[str, str, int], None] | None
                   ) -> LocalExchange:  # fmt: skip
    bars, inst, contract = market(spec["n_bars"])
    lo, hi = spec["window"]
    ex = LocalExchange([Market.of(contract, bars.slice(lo, hi), inst.session)], spec["state"],
                       port=spec["port"], speed=None, lockstep=spec["lockstep"],
                       start=spec["start"], on_wire=on_wire)  # fmt: skip
    ex.start()
    return ex


class Stamps:
    """The exchange's wire stamps: bar key -> ns its market data left, ClOrdID -> ns it came."""

    def __init__(self) -> None:
        self.md: dict[str, int] = {}
        self.orders: dict[str, int] = {}

    def __call__(self, kind: str, key: str, ns: int) -> None:
        (self.md if kind == "md" else self.orders).setdefault(key, ns)


def _exchange_server(conn: Any) -> None:
    """The child process: opens an exchange per ("open", spec), answers "ready"; on "close"
    stops it and answers its stamps; ends on None."""
    ex, stamps = None, Stamps()
    while True:
        msg = conn.recv()
        if msg is None:
            return
        what, spec = msg
        if what == "open":
            stamps = Stamps()
            try:
                ex = _open_exchange(spec, stamps if spec["stamp"] else None)
            except Exception as exc:  # noqa: BLE001 - the parent reports it, in one line
                conn.send(f"{type(exc).__name__}: {exc}")
                continue
            conn.send("ready")
        elif what == "close" and ex is not None:
            ex.stop()
            conn.send({"md": stamps.md, "orders": stamps.orders, "received": ex.orders,
                       "bars_played": ex.bars_played})  # fmt: skip
            ex = None


class Exchange:
    """One exchange at a time, in a child process (`process`) or on this one's threads."""

    def __init__(self, where: str):
        self.where = where
        self._ex: LocalExchange | None = None
        self._stamps = Stamps()
        if where == "process":
            ctx = mp.get_context("spawn")
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(target=_exchange_server, args=(child,), daemon=True,
                                     name="bench-live-exchange")  # fmt: skip
            self._proc.start()

    def open(self, spec: dict[str, Any]) -> None:
        if self.where == "process":
            self._conn.send(("open", spec))
            if not self._conn.poll(60):
                raise RuntimeError("the exchange process did not start within 60 s")
            answer = self._conn.recv()
            if answer != "ready":
                raise RuntimeError(f"the exchange process: {answer}")
        else:
            self._stamps = Stamps()
            self._ex = _open_exchange(spec, self._stamps if spec["stamp"] else None)

    def close(self) -> dict[str, Any]:
        if self.where == "process":
            self._conn.send(("close", {}))
            return self._conn.recv()
        ex, self._ex = self._ex, None
        assert ex is not None
        ex.stop()
        return {"md": self._stamps.md, "orders": self._stamps.orders, "received": ex.orders,
                "bars_played": ex.bars_played}  # fmt: skip

    def shutdown(self) -> None:
        if self.where == "process":
            self._conn.send(None)
            self._proc.join(10)


def session_file(folder: Path, port: int) -> Path:
    return write_session_file(folder / "client" / "session.cfg", port=port, reconnect_s=1)


# -- statistics ------------------------------------------------------------------------------


def percentiles_us(ns: list[int]) -> dict[str, float]:
    """bench_risk's nearest-rank p50, p90, p99 and max, and the mean, in microseconds."""
    return {**{k: round(v, 1) for k, v in percentiles(ns).items()},
            "mean_us": round(sum(ns) / len(ns) / 1000, 1)}


def load_1m() -> float:
    return round(os.getloadavg()[0], 2)


# -- 1. tick to order ------------------------------------------------------------------------


LOG_LABELS = {"memory": "in-memory SQLite (no fsync)",
              "file": "SQLite file, WAL, synchronous=FULL (the live default)"}  # fmt: skip


def run_trader(exchange: Exchange, kind: str, log_kind: str, orders: int, folder: Path,
               instrument_trader: Callable[[LiveTrader], None] | None = None
               ) -> tuple[LiveTrader, dict, dict]:  # fmt: skip
    """A LiveTrader on lockstep bars until it sent `orders` orders (or the window ended);
    (trader, what ran, the exchange's stamps)."""
    folder.mkdir(parents=True)
    n_live = int(orders * BARS_PER_DECISION[kind]) + 10
    n_bars = HISTORY + n_live
    bars, inst, contract = market(n_bars)
    decider, env, described = policy(kind, bars, inst, folder)
    port = free_port()
    exchange.open({"n_bars": n_bars, "window": (HISTORY, n_bars), "state": str(folder / "ex"),
                   "port": port, "lockstep": True, "start": "subscribe", "stamp": True})
    url = "sqlite://" if log_kind == "memory" else f"sqlite:///{folder / 'live.sqlite'}"
    venue = FixVenue(session_file(folder, port), {inst.symbol: contract})
    feed = venue.feed()
    try:
        trader = LiveTrader(bars.slice(0, HISTORY), inst, decider, store=SqlEventStore(url),
                            venue=venue, feed=feed, env=env, risk=OPEN_LIMITS,
                            journal=folder / "bars.jsonl", starting_cash=Decimal(100_000),
                            stale_after_s=1e9)  # fmt: skip
        if instrument_trader is not None:
            instrument_trader(trader)
        t = time.perf_counter()
        book = lambda: trader.engine.book
        # stop once the orders are sent and filled (a working market order at the end would
        # hold the trader's settling for a second)
        result = trader.run(until=lambda: len(book()) >= orders
                            and not book().working(inst.symbol))
        wall = time.perf_counter() - t
    finally:
        feed.close()
        venue.shutdown()
        stamps = exchange.close()
    if result.refused_reports or result.denied:
        raise RuntimeError(f"{result.denied} orders denied, {result.refused_reports} reports "
                           "refused: the run is not the path measured")
    described.update(bars=result.bars, orders=result.orders, fills=result.fills,
                     wall_s=round(wall, 3), bars_per_s=round(result.bars / wall, 1),
                     ended=result.ended)  # fmt: skip
    if hasattr(decider, "torch_calls"):  # the agent: decisions its compiled forward left to
        described["decisions_by_torch"] = decider.torch_calls  # torch (near ties)
    return trader, described, stamps


def latency_samples(stamps: dict, bars_ts: np.ndarray, symbol: str) -> list[tuple[int, int]]:
    """(t, ns) for every P<t> order: its arrival less bar t's market data departure."""
    out = []
    for cid, arrived in stamps["orders"].items():
        if not cid.startswith("P"):
            continue
        t = int(cid[1:])
        sent = stamps["md"].get(f"{symbol}:{int(bars_ts[t])}")
        if sent is not None:
            out.append((t, arrived - sent))
    return sorted(out)


def tick_to_order(exchange: Exchange, kind: str, log_kind: str, decisions: int, warmup: int,
                  folder: Path) -> dict[str, Any]:  # fmt: skip
    load_before = load_1m()
    trader, described, stamps = run_trader(exchange, kind, log_kind, warmup + decisions, folder)
    samples = latency_samples(stamps, trader.market.ts, trader.symbol)
    timed = [ns for _, ns in samples[warmup:]]
    if not timed:
        raise RuntimeError(f"{kind}: no order after the {warmup}-order warm-up in "
                           f"{described['bars']} bars")
    out: dict[str, Any] = {**described, "event_log": LOG_LABELS[log_kind],
                           "decisions_timed": len(timed), "warmup_orders": min(warmup,
                                                                               len(samples)),
                           **percentiles_us(timed)}  # fmt: skip
    if log_kind == "file":
        target = TARGETS_US[kind]
        out.update(target=f"p99 <= {target / 1000:g} ms", target_met=out["p99_us"] <= target)
    out["load_avg_1m"] = {"before": load_before, "after": load_1m()}
    return out


# -- 2. orders per second --------------------------------------------------------------------


T0 = 1_709_647_200 * 1_000_000_000


def throughput(exchange: Exchange, n: int, folder: Path, log_kind: str = "file",
               warmup: int = 20, profile: cProfile.Profile | None = None, group: int = 1
               ) -> dict[str, Any]:  # fmt: skip
    folder.mkdir(parents=True)
    bars, inst, contract = market(HISTORY + 10)
    port = free_port()
    exchange.open({"n_bars": len(bars), "window": (HISTORY, len(bars)),
                   "state": str(folder / "ex"), "port": port, "lockstep": False,
                   "start": "told", "stamp": True})  # fmt: skip
    sym = inst.symbol
    venue = FixVenue(session_file(folder, port), {sym: contract})
    store = SqlEventStore("sqlite://" if log_kind == "memory"
                          else f"sqlite:///{folder / 'orders.sqlite'}")
    load_before = load_1m()
    journaled: list[int] = []  # when the gateway's journal write of each report ended
    append = venue._append

    def append_timed(rec: dict, sync: bool) -> None:
        append(rec, sync)
        if "kind" in rec:
            journaled.append(time.perf_counter_ns())

    venue._append = append_timed
    try:
        venue.connect(10)
        eng = TradingEngine.open(store, {sym: contract}, THROUGHPUT_LIMITS, venue=venue,
                                 starting_cash=Decimal(10_000_000), ts_ns=T0)  # fmt: skip
        mark = float(bars.close[HISTORY - 1])
        eng.mark(sym, mark, T0)
        below = contract.price(contract.to_ticks(mark * 0.9))
        above = contract.price(contract.to_ticks(mark * 1.1))
        accepted = 0
        sent_at: dict[str, int] = {}
        acked: list[int] = []
        clock = itertools.count(T0 + 1)  # the orders' timestamps (ns), one apart

        def deliver() -> None:
            nonlocal accepted
            for r in venue.reports():  # deferred: the next order's transaction carries them
                if isinstance(eng.on_report(r, defer=True), OrderAccepted):
                    accepted += 1
                    if r.client_order_id in sent_at:
                        acked.append(time.perf_counter_ns() - sent_at[r.client_order_id])

        def request(i: int, tag: str) -> OrderRequest:
            buy = i % 2 == 0
            cid = f"{tag}{i}"
            sent_at[cid] = time.perf_counter_ns()
            return OrderRequest(sym, Side.BUY if buy else Side.SELL, 1, OrderType.LIMIT,
                                limit_price=below if buy else above, client_order_id=cid)

        def submit(i: int, tag: str, end: int) -> None:
            if group == 1:
                eng.submit(request(i, tag), next(clock))
            else:
                eng.submit_many([request(j, tag) for j in range(i, min(i + group, end))],
                                next(clock))  # fmt: skip
            deliver()

        def until_accepted(total: int, timeout_s: float = 120) -> None:
            deadline = time.monotonic() + timeout_s
            while accepted < total:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{accepted} of {total} orders accepted after "
                                       f"{timeout_s:g} s")
                time.sleep(0.0001)
                deliver()

        for i in range(0, warmup, group):  # the session, the caches and the log's pages warm
            submit(i, "W", warmup)
        until_accepted(warmup)
        eng.flush()
        acked.clear()
        sent_at.clear()
        journaled.clear()
        if profile is not None:
            profile.enable()
        t0_ns = time.perf_counter_ns()
        t = time.perf_counter()
        for i in range(0, n, group):
            submit(i, "L", n)
        submitted = time.perf_counter() - t
        until_accepted(warmup + n)
        eng.flush()  # the last acknowledgements in the log too
        wall = time.perf_counter() - t
        if profile is not None:
            profile.disable()
        denied = sum(o.status.name == "DENIED" for o in eng.book)
    finally:
        venue.shutdown()
        store.close()
        got = exchange.close()
    rate = n / wall
    arrived = [ns for cid, ns in got["orders"].items() if cid.startswith("L")]
    at_s = lambda ns: round((ns - t0_ns) / 1e9, 3)
    return {"orders": n, "orders_a_transaction": group, "warmup_orders": warmup,
            "seconds": round(wall, 3),
            "orders_per_s": round(rate), "submit_loop_s": round(submitted, 3),
            "submits_per_s": round(n / submitted),
            "last_done_at_s": {"submitted (the OMS loop)": round(submitted, 3),
                               "arrived at the exchange": at_s(max(arrived)),
                               "Accepted journaled by the gateway": at_s(max(journaled)),
                               "Accepted applied by the engine": round(wall, 3)},
            "submit_to_accepted_applied": percentiles_us(acked),
            "denied": denied, "exchange_received": got["received"],
            "event_log": LOG_LABELS[log_kind], "risk_limits": "THROUGHPUT_LIMITS: "
            "max_order_rate and max_orders_per_day 10^9, max_position 10^6 (else the shipped "
            "limits)", "load_avg_1m": {"before": load_before, "after": load_1m()},
            **({"target": f">= {ORDERS_TARGET:,} orders/s", "target_met": rate >= ORDERS_TARGET}
               if log_kind == "file" else {})}  # fmt: skip


# -- where the time goes ---------------------------------------------------------------------


STEPS = [
    ("FIX in: exchange send -> bar queued by the gateway (fills ahead of it too)", "md",
     "queued"),
    ("  of which the gateway's journal fsync of those reports", None, None),
    ("the loop has the bar (next_bar returns)", "queued", "bar"),
    ("apply the reports that came (fills: one durable log append each)", "bar", "delivered"),
    ("operator-command check (a log query), staleness", "delivered", "on_bar"),
    ("bar journal write, market columns", "on_bar", "observe"),
    ("features (decider.observe)", "observe", "observed"),
    ("mark (deferred), the mirror takes the bar's fills", "observed", "decide"),
    ("decision (position features, policy, decode)", "decide", "decided"),
    ("OMS submit up to the risk check (the order's event)", "decided", "risk"),
    ("risk check", "risk", "risk_done"),
    ("the order's events applied (book, account, risk)", "risk_done", "append"),
    ("log append of the order (one durable transaction)", "append", "appended"),
    ("venue.submit: encode, journal note, until QuickFIX send", "appended", "send"),
    ("FIX out: QuickFIX send -> the exchange's fromApp", "send", "order"),
]
"""The steps of a bar, in order: (label, from stamp, to stamp); stamps the trader's process
takes, but "md" and "order", the exchange's."""
_NEEDED = ("md", "queued", "bar", "delivered", "on_bar", "observe", "observed", "decide",
           "decided", "risk", "risk_done", "append", "appended", "send", "order")


class _Stamps:
    """perf_counter_ns stamps by bar: `at(name)` for the bar being handled, the first only."""

    def __init__(self) -> None:
        self.t: int | None = None
        self.marks: dict[int, dict[str, int]] = {}
        self.queued: dict[int, int] = {}  # bar close ts -> when the gateway queued it
        self.fsyncs: list[tuple[int, int]] = []  # the gateway's journal fsyncs (start, end)

    def at(self, name: str) -> None:
        if self.t is not None:
            self.marks.setdefault(self.t, {}).setdefault(name, time.perf_counter_ns())

    def has(self, name: str) -> bool:
        return self.t is not None and name in self.marks.get(self.t, {})

    def wrap(self, owner: Any, attr: str, before: str | None, after: str | None,
             when: Callable[[], bool] = lambda: True) -> None:  # fmt: skip
        call = getattr(owner, attr)

        def wrapper(*a: Any, **kw: Any) -> Any:
            on = when()
            if on and before is not None:
                self.at(before)
            try:
                return call(*a, **kw)
            finally:
                if on and after is not None:
                    self.at(after)

        setattr(owner, attr, wrapper)


def _instrument(st: _Stamps, trader: LiveTrader) -> None:
    """Stamp a bar's steps in `trader` (wrappers on its feed, venue, engine and decider)."""
    feed, venue, now = trader.feed, trader.venue, time.perf_counter_ns
    offer, next_bar, append = feed._offer, feed.next_bar, venue._append

    def offer_stamped(bar: Any) -> None:
        st.queued[bar.ts_ns] = now()
        offer(bar)

    def next_bar_stamped(timeout_s: float) -> Any:
        bar = next_bar(timeout_s)
        if bar is not None:
            st.t = trader.market.n  # the index the bar gets
            st.marks[st.t] = {"bar": now(), "queued": st.queued.get(bar.ts_ns, 0)}
        return bar

    def append_timed(rec: dict, sync: bool) -> None:
        t0 = now()
        append(rec, sync)
        if sync:
            st.fsyncs.append((t0, now()))

    feed._offer, feed.next_bar, venue._append = offer_stamped, next_bar_stamped, append_timed
    st.wrap(trader, "_deliver", None, "delivered", lambda: not st.has("delivered"))
    st.wrap(trader, "_on_bar", "on_bar", None)
    st.wrap(trader.decider, "observe", "observe", "observed", lambda: st.has("on_bar"))
    st.wrap(trader, "_decide", "decide", "decided")
    send = venue._send

    def send_stamped(message: Any, what: str) -> None:
        if what.startswith("order P"):
            st.at("send")
        send(message, what)

    venue._send = send_stamped
    open_log = trader._open

    def open_and_wrap() -> None:  # the engine exists once the run has opened the log
        open_log()
        eng = trader.engine
        assert eng is not None
        st.wrap(eng.risk, "check_order", "risk", "risk_done")
        st.wrap(eng.store, "append", "append", "appended",
                lambda: st.has("risk_done") and not st.has("appended"))

    trader._open = open_and_wrap


def breakdown(exchange: Exchange, decisions: int, warmup: int, folder: Path) -> dict[str, Any]:
    """The rule on the SQLite file again, with a perf_counter_ns stamp at each step of a bar in
    the trader's process; per step, the median and p99 over the bars that sent an order."""
    st = _Stamps()
    trader, described, stamps = run_trader(exchange, "rule", "file", warmup + decisions, folder,
                                           lambda tr: _instrument(st, tr))
    symbol, bars_ts = trader.symbol, trader.market.ts
    per_step: dict[str, list[int]] = {label: [] for label, _, _ in STEPS}
    totals = []
    fsync_label = STEPS[1][0]
    for t, total in latency_samples(stamps, bars_ts, symbol)[warmup:]:
        m = dict(st.marks.get(t, {}))
        m["md"] = stamps["md"][f"{symbol}:{int(bars_ts[t])}"]
        m["order"] = stamps["orders"][f"P{t}"]
        if not all(m.get(k) for k in _NEEDED):
            continue
        totals.append(total)
        for label, a, b in STEPS:
            if a is not None:
                per_step[label].append(m[b] - m[a])
        per_step[fsync_label].append(sum(min(e, m["queued"]) - max(s, m["md"])
                                         for s, e in st.fsyncs
                                         if e > m["md"] and s < m["queued"]))  # fmt: skip
    if not totals:
        return {"error": "no bar had every stamp"}
    rows = {label: {"p50_us": round(float(np.median(v)) / 1000, 1),
                    "p99_us": round(float(np.percentile(v, 99)) / 1000, 1),
                    "mean_us": round(float(np.mean(v)) / 1000, 1)}
            for label, v in per_step.items()}  # fmt: skip
    return {"policy": RULE, "event_log": LOG_LABELS["file"], "bars": described["bars"],
            "orders_timed": len(totals), "tick_to_order": percentiles_us(totals),
            "steps_us": rows,
            "note": "stamps taken in the trader's process (~1 us each), 'md' and 'order' in the "
                    "exchange's; the steps follow each other, so their means add up to the "
                    "tick-to-order mean (the p50s and p99s do not add)"}


def host_probe(folder: Path, n: int = 200) -> dict[str, Any]:
    """What this shared host gives at the time of the run, to read the other figures against:
    one durable append on the logs' disk (a 100-byte line appended and fsync'd, as the gateway's
    report journal does; and fdatasync'd, as the simulated venue's journal does), and the CPU's
    pace (the best of 5 runs of a fixed pure-Python loop: higher when other guests take the
    host's cores, whatever this VM's load average says)."""
    out: dict[str, Any] = {"appends": n, "folder": "the benchmark's temporary folder"}
    for name, sync in (("fsync", os.fsync), ("fdatasync", getattr(os, "fdatasync", os.fsync))):
        ns = []
        with open(folder / f"{name}.jsonl", "ab") as fh:
            for _ in range(n):
                t = time.perf_counter_ns()
                fh.write(b"x" * 99 + b"\n")
                fh.flush()
                sync(fh.fileno())
                ns.append(time.perf_counter_ns() - t)
        out[f"append_{name}"] = percentiles_us(ns)
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        runs.append(time.perf_counter() - t)
    out["python_loop_1e6_ms"] = round(min(runs) * 1e3, 1)
    return out


def profile_throughput(exchange: Exchange, n: int, folder: Path, top: int = 18) -> dict:
    prof = cProfile.Profile()
    result = throughput(exchange, n, folder, profile=prof)
    s = io.StringIO()
    stats = pstats.Stats(prof, stream=s)
    rows = []
    for (file, line, name), (_, calls, tt, ct, _) in sorted(
            stats.stats.items(), key=lambda kv: -kv[1][3])[:top]:  # fmt: skip
        rows.append({"function": f"{Path(file).name}:{line}:{name}", "calls": calls,
                     "own_us_per_order": round(tt / n * 1e6, 1),
                     "cumulative_us_per_order": round(ct / n * 1e6, 1)})
    return {"orders": n, "orders_per_s_under_cprofile": result["orders_per_s"],
            "top_cumulative": rows}


# -- main ------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    return {"quickfix": metadata.version("quickfix-ssl"), "sqlite": sqlite3.sqlite_version}


def table(doc: dict[str, Any]) -> str:
    """The figures as a table for people (stderr)."""
    met = lambda r: "" if "target_met" not in r else ("yes" if r["target_met"] else "NO")
    head = f"{'figure':<52} {'n':>6} {'p50':>9} {'p99':>9} {'max':>9}  {'target':<18} met"
    lines = [head, "-" * len(head)]
    for key, r in doc["tick_to_order"].items():
        lines.append(f"{'tick to order, ' + key:<52} {r['decisions_timed']:>6} "
                     f"{r['p50_us']:>7.0f}us {r['p99_us']:>7.0f}us {r['max_us']:>7.0f}us  "
                     f"{r.get('target', ''):<18} {met(r)}")
    for key, what in (("orders_per_s", "SQLite file log"),
                      ("orders_per_s_group_commit", "file log, group commit"),
                      ("orders_per_s_memory_log", "in-memory log")):
        r = doc[key]
        lines.append(f"{'orders/s: risk, ' + what + ', FIX, acknowledged':<52} {r['orders']:>6} "
                     f"{r['orders_per_s']:>9,}/s {'':>20}  {r.get('target', ''):<18} {met(r)}")
    host = doc["host_probe"]
    for name, f in host.items():
        if name.startswith("append_"):
            lines.append(f"{'disk: a 100-byte ' + name.replace('_', ' + '):<52} "
                         f"{host['appends']:>6} {f['p50_us']:>7.0f}us {f['p99_us']:>7.0f}us "
                         f"{f['max_us']:>7.0f}us")
    lines.append(f"{'CPU pace: a 10^6-iteration Python loop, best of 5':<52} {5:>6} "
                 f"{host['python_loop_1e6_ms']:>7.1f}ms")
    b = doc.get("breakdown")
    if b and "steps_us" in b:
        lines += ["", (f"where a bar's tick to order goes ({b['policy']}, {b['event_log']}; "
                      f"{b['orders_timed']} orders): mean / p50 / p99 us")]
        for label, v in b["steps_us"].items():
            lines.append(f"  {label:<84} {v['mean_us']:>7.1f} {v['p50_us']:>7.1f} "
                         f"{v['p99_us']:>7.1f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, help="orders timed a latency run (default "
                    f"{FULL['decisions']:,}; quick {QUICK['decisions']})")
    ap.add_argument("--warmup", type=int, help="orders left out at the start of each latency "
                    f"run (default {FULL['warmup']}; quick {QUICK['warmup']})")
    ap.add_argument("--orders", type=int, help="orders of the throughput run (default "
                    f"{FULL['orders']:,}; quick {QUICK['orders']})")
    ap.add_argument("--exchange", choices=("process", "thread"), default="process",
                    help="the local exchange in a process of its own (default) or on threads "
                         "of this one (sharing its GIL)")
    ap.add_argument("--breakdown", action="store_true", help="the per-step breakdown and the "
                    "throughput profile in quick mode too (full mode always runs them)")
    ap.add_argument("--group", type=int, default=GROUP, help="orders a `submit_many` puts in "
                    f"one transaction, the group-commit throughput run (default {GROUP})")
    ap.add_argument("--out", help="also write the JSON document to this file")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK['decisions']} orders timed a "
                    f"latency run, {QUICK['orders']} orders of throughput (CI)")
    args = ap.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.decisions < 1 or args.orders < 1 or args.warmup < 0 or args.group < 1:
        ap.error("--decisions, --orders and --group must be >= 1, --warmup >= 0")
    torch.set_num_threads(1)
    exchange = Exchange(args.exchange)
    try:
        with tempfile.TemporaryDirectory(prefix="foxhunt-bench-live-") as tmp:
            folder = Path(tmp)
            results: dict[str, Any] = {
                "quick": args.quick,
                "versions": versions(),
                "exchange": f"LocalExchange on 127.0.0.1, "
                            f"{'its own process' if args.exchange == 'process' else 'threads of the benchmark process'}",
                "tick_to_order": {},
            }
            for kind, log_kind in (("rule", "file"), ("rule", "memory"), ("agent", "file")):
                key = f"{kind}, {log_kind} log"
                log(f"tick to order: {key}, {args.decisions:,} orders")
                results["tick_to_order"][key] = tick_to_order(
                    exchange, kind, log_kind, args.decisions, args.warmup,
                    folder / f"{kind}-{log_kind}")
            results["host_probe"] = host_probe(folder)
            log(f"orders per second: {args.orders:,} orders")
            results["orders_per_s"] = throughput(exchange, args.orders, folder / "throughput")
            log(f"orders per second, groups of {args.group} orders: {args.orders:,} orders")
            results["orders_per_s_group_commit"] = throughput(
                exchange, args.orders, folder / "throughput-group", group=args.group)
            log(f"orders per second, in-memory log: {args.orders:,} orders")
            results["orders_per_s_memory_log"] = throughput(exchange, args.orders,
                                                            folder / "throughput-memory", "memory")
            if args.breakdown or not args.quick:
                n = min(args.decisions, BREAKDOWN_DECISIONS)
                log(f"breakdown: the rule on the SQLite file, {n} orders")
                results["breakdown"] = breakdown(exchange, n, args.warmup, folder / "breakdown")
                log("throughput under cProfile")
                results["throughput_profile"] = profile_throughput(
                    exchange, min(args.orders, 2000), folder / "profile")
            else:
                results["breakdown"] = results["throughput_profile"] = QUICK_SKIPS
    finally:
        exchange.shutdown()
    print(table(results), file=sys.stderr)
    emit("bench_live", torch.device("cpu"), results, args.out)


if __name__ == "__main__":
    run_main(main, "bench_live")
