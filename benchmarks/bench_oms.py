"""OMS and paper-trading speed (issue 22, point 8).

1. risk check: `RiskEngine.check_order` per order (bench_risk's case). Target p99 <= 50 us.
2. durable submit: `TradingEngine.submit` until its events are committed, on a SQLite WAL file
   (synchronous=FULL) and on PostgreSQL: by default a throwaway local server (tests/pg.py's, with
   fsync and synchronous_commit on, over its unix socket) when the binaries are installed;
   --pg-url URL uses an existing database, --pg-url none skips it. Target p99 <= 2 ms on SQLite.
3. paper replay: bars/s of `PaperTrader` over synthetic ES-grid bars at --speed max with an
   agent (a randomly initialised Rainbow network) on incrementally computed features, on an
   in-memory log and on a SQLite file. `--agent cpu` (the default): the CPU-sized agent, hidden
   64, 11 atoms, window 8; target >= 20k. `--agent h200`: the policy the H200 profile trains,
   the shipped [agent] and [env] defaults sized by the h200 GPU profile
   (`TrainingSpec.sized_for`: hidden 512, 51 atoms, window 32); no target. Either is timed on
   this machine's CPU, as the paper trader runs it (its compiled forward, or torch on a near
   tie). `setup_s` is the agent's load (checkpoint, compiled kernels: a cache read after the
   first run) and the trader's construction, outside the timed replay. `breakdown` (in memory,
   once more, with a timer around each part) says where a bar's time goes.

Prints one JSON document; targets are reported as `target_met`, never as the exit status.
`--quick` (CI runs it, in seconds): 2,000 checks, 20 submits, 600 bars, and no PostgreSQL
server unless --pg-url names one.

    .venv/bin/python benchmarks/bench_oms.py
    .venv/bin/python benchmarks/bench_oms.py --bars 3000 --pg-url postgresql+psycopg://...
    .venv/bin/python benchmarks/bench_oms.py --agent h200 --pg-url none
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import torch
from _run import run_main
from bench_risk import bench_check, bench_submit

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.config import load_settings
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.env import EnvConfig
from foxhunt.env.vector_env import POS_STATE
from foxhunt.execution import SqlEventStore
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.features import FeatureConfig, FeaturePipeline
from foxhunt.orders import Contract
from foxhunt.paper import PaperTrader, load_agent
from foxhunt.profiles import shipped_profiles
from foxhunt.risk import RiskConfig
from foxhunt.training.checkpoint import save_checkpoint
from foxhunt.training.config import TrainingSpec

OPEN = RiskConfig(max_order_qty=1000, max_position=1000, max_gross_notional=0,
                  max_order_rate=10**6, max_orders_per_day=10**9, price_collar_pct=1000,
                  daily_loss_limit=0, max_drawdown=0)  # fmt: skip


WORKLOAD_FEATURES = FeatureConfig(groups=["returns", "volatility", "volume", "trend", "time"],
                                  trend_windows=[8, 32, 128])
"""The replay's workload stays the one first recorded (38 features, all 27 actions live), so its
figures compare across dates; the shipped defaults since 2026-12-05 are lighter (22 features,
direction-only actions: fewer orders a run)."""
WORKLOAD_ACTIONS = {"size_fractions": (1 / 3, 2 / 3, 1.0), "stop_atr_multiples": (1.0, 3.0)}


def agent_spec(agent: str, folder: Path) -> TrainingSpec:
    """The training spec whose network the replay runs (see the module docstring)."""
    if agent == "cpu":
        return TrainingSpec(env=EnvConfig(window=8, **WORKLOAD_ACTIONS),
                            agent=AgentConfig(hidden=64, atoms=11))
    # the shipped defaults alone: `folder` (a fresh temporary directory) as FOXHUNT_HOME has
    # no config.toml
    shipped = load_settings(home=folder).settings.training_spec()
    shipped = shipped.model_copy(update={"env": shipped.env.model_copy(update=WORKLOAD_ACTIONS)})
    return shipped.sized_for(shipped_profiles()[agent])


def agent_checkpoint(folder: Path, bars, inst, agent: str) -> Path:
    spec = agent_spec(agent, folder)
    window = spec.env.window
    matrix = FeaturePipeline(WORKLOAD_FEATURES, inst.session).transform(bars,
                                                                         fit_until=len(bars) // 2)
    torch.manual_seed(0)
    net = BranchingQNetwork(window * matrix.n_features + len(POS_STATE), spec.agent,
                            matrix.groups, window, len(POS_STATE))
    norm = matrix.normaliser
    extra = {"fold": 0, "normaliser": {"mean": norm.mean.tolist(), "std": norm.std.tolist()},
             "feature_names": list(matrix.names), "feature_groups": matrix.groups,
             "feature_config": WORKLOAD_FEATURES.model_dump(mode="json")}  # as the trainer saves
    return save_checkpoint(folder / "agent.pt", net, spec.model_dump(mode="json"), extra)


def paper_trader(n_bars: int, url: str, folder: Path, agent: str,
                 journal: Path | None = None) -> PaperTrader:
    bars = generate(SynthConfig(n_bars=n_bars, seed=3, signal_strength=0.3)).bars
    inst = InstrumentRegistry.load().get("SYN")
    checkpoint = agent_checkpoint(folder, bars, inst, agent)
    loaded = load_agent(checkpoint, inst, WORKLOAD_FEATURES)
    venue = SimulatedVenue({"SYN": Contract.from_instrument(inst)}, loaded.env.slippage_ticks,
                           journal=journal)
    return PaperTrader(bars, inst, loaded.decider, (0, n_bars), store=SqlEventStore(url),
                       venue=venue, env=loaded.env, risk=OPEN, starting_cash=Decimal(100_000))


def bench_paper(n_bars: int, url: str, folder: Path, agent: str,
                journal: Path | None = None) -> dict:
    t = time.perf_counter()
    trader = paper_trader(n_bars, url, folder, agent, journal)
    setup = time.perf_counter() - t
    t = time.perf_counter()
    result = trader.run()
    wall = time.perf_counter() - t
    decider = trader.decider
    return {"bars": n_bars, "seconds": round(wall, 3), "bars_per_s": round(n_bars / wall),
            "orders": result.orders, "fills": len(result.fills),
            "compiled_forward": decider.fast is not None,
            "decisions_by_torch": decider.torch_calls, "setup_s": round(setup, 3),
            "target_met": n_bars / wall >= 20_000 if agent == "cpu" else None}


def describe_agent(agent: str, folder: Path) -> dict:
    """The replayed network's sizes (random weights: the speed does not depend on them)."""
    spec = agent_spec(agent, folder)
    a, window = spec.agent, spec.env.window
    n_features = FeaturePipeline(WORKLOAD_FEATURES).n_features
    inputs = window * n_features + len(POS_STATE)
    net = BranchingQNetwork(inputs, a, None, window, len(POS_STATE))
    return {"name": agent, "sized_by": "cpu" if agent == "cpu" else f"GPU profile {agent}",
            "hidden": a.hidden, "trunk_layers": a.trunk_layers, "atoms": a.atoms,
            "head": a.head, "dueling": a.dueling, "noisy": a.noisy,
            "branches": list(a.branches), "window": window, "features": n_features,
            "inputs": inputs, "parameters": sum(p.numel() for p in net.parameters()),
            "timed_on": "CPU (one torch thread)"}


BREAKDOWN = [
    ("observation: incremental features, window shift", "decider", "observe"),
    ("  of which the feature row (compiled)", "features", "push"),
    ("decision: position features, policy, decode", "trader", "_decide"),
    ("  of which the policy forward (compiled)", "forward", "act"),
    ("orders and stops at a decision (appends, venue calls, reports)", "trader", "_act"),
    ("mark (logged with the next append)", "engine", "mark"),
    ("venue: working orders meet the bar", "venue", "on_bar"),
    ("venue reports to order events (all, incl. those in orders and stops)", "trader",
     "_deliver"),
    ("mirror takes the bar's fills", "trader", "_bar_fills"),
    ("log appends (all, each inside one of the lines above)", "store", "append"),
]
"""Timed parts of a paper bar: (label, owner, method); a line "of which" is inside the one
above it."""


def paper_breakdown(n_bars: int, folder: Path, agent: str) -> dict:
    """us a bar inside each part of the in-memory replay (each timer adds ~0.2 us a call)."""
    trader = paper_trader(n_bars, "sqlite://", folder, agent)
    spent = dict.fromkeys([label for label, _, _ in BREAKDOWN], 0.0)

    def timed(label: str, owner: object, name: str) -> None:
        call = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - t

        setattr(owner, name, wrapper)

    open_log = trader._open

    def open_and_time():  # the engine exists once the run has opened the log
        opened = open_log()
        d = trader.decider
        owners = {"decider": d, "features": d.features, "forward": d.fast, "trader": trader,
                  "engine": trader.engine, "venue": trader.venue, "store": trader.store}
        for label, owner, name in BREAKDOWN:
            timed(label, owners[owner], name)
        return opened

    trader._open = open_and_time
    t = time.perf_counter()
    trader.run()
    wall = time.perf_counter() - t
    out = {label: round(v / n_bars * 1e6, 1) for label, v in spent.items()}
    out["a bar in all (timers included)"] = round(wall / n_bars * 1e6, 1)
    return out


FULL = {"orders": 20_000, "submits": 500, "bars": 5000}
QUICK = {"orders": 2_000, "submits": 20, "bars": 600}
"""--quick's sizes (600 bars: the replay's checkpoint fits its normaliser on the first half,
which must hold the features' 256-bar warm-up)."""
QUICK_NO_POSTGRES = {"skipped": "--quick starts no PostgreSQL server (--pg-url URL or auto for "
                                "one)"}


def bench_postgres(pg_url: str, n: int) -> dict | None:
    """Durable submits on PostgreSQL: `pg_url`, or a local server started for the run."""
    if pg_url == "none":
        return None
    if pg_url != "auto":
        return {"url": pg_url, **bench_submit(pg_url, n)}
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg import PostgresServer, find_bin_dir

    if find_bin_dir() is None:
        return {"skipped": "no PostgreSQL binaries (apt-get install postgresql)"}
    with PostgresServer(fsync=True) as server:
        result = bench_submit(server.create_database(), n)
    return {"server": f"local, {server.bin_dir.parent.name}, unix socket, fsync on", **result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, help="risk checks to time (default 20,000)")
    ap.add_argument("--submits", type=int, help="durable submits to time per log (default 500)")
    ap.add_argument("--bars", type=int, help="bars of the paper replay (default 5,000)")
    ap.add_argument("--agent", choices=("cpu", "h200"), default="cpu",
                    help="the replay's policy: cpu, the CPU-sized agent (hidden 64, window 8); "
                         "h200, the shipped agent sized by the h200 GPU profile (hidden 512, "
                         "51 atoms, window 32), timed on this CPU")
    ap.add_argument("--pg-url",
                    help="PostgreSQL URL for the durable submit; auto (the default): a local "
                         "throwaway server; none: skip")
    ap.add_argument("--quick", action="store_true",
                    help=f"few checks, submits and bars ({QUICK['orders']:,}, "
                         f"{QUICK['submits']}, {QUICK['bars']}), no PostgreSQL unless "
                         "--pg-url names one (CI)")
    args = ap.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if min(args.orders, args.submits, args.bars) < 1:
        ap.error("--orders, --submits and --bars must be >= 1")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sqlite = bench_submit(f"sqlite:///{tmp}/log.sqlite", args.submits)
        sqlite["target_met"] = sqlite["p99_us"] <= 2000
        doc = {
            "benchmark": "oms",
            "quick": args.quick,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
            "risk_check": bench_check(args.orders),
            "submit_durable_sqlite": sqlite,
            "submit_durable_postgresql": QUICK_NO_POSTGRES if args.quick and not args.pg_url
            else bench_postgres(args.pg_url or "auto", args.submits),
            "agent": describe_agent(args.agent, folder),
            "paper_replay_memory_log": bench_paper(args.bars, "sqlite://", folder, args.agent),
            "paper_replay_sqlite_file": bench_paper(args.bars, f"sqlite:///{tmp}/paper.sqlite",
                                                    folder, args.agent),
            "paper_replay_sqlite_file_and_venue_journal": bench_paper(
                args.bars, f"sqlite:///{tmp}/journaled.sqlite", folder, args.agent,
                journal=folder / "venue.jsonl"),  # what `foxhunt paper` runs
            "paper_breakdown_us_per_bar": paper_breakdown(args.bars, folder, args.agent),
        }  # fmt: skip
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    run_main(main, "bench_oms")
