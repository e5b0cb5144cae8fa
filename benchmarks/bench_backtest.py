"""Backtest benchmark: batched greedy evaluation of a network, and the SMA baseline against peers.

1. greedy: a hidden-512 `BranchingQNetwork` (random weights, saved and loaded as a walk-forward
   checkpoint, features rebuilt with its normaliser) evaluated greedily over 5 windows of 32,000
   bars each, batched in one lock-step env (`foxhunt.backtest.Backtester`; on CUDA the step is
   compiled and captured as CUDA graphs). `first_run_s` includes compilation and capture;
   `wall_s` is a second run in the same process (compiled kernels reused, graph re-captured),
   what a per-epoch evaluation costs. Target on the H200: `wall_s` <= 2.5 s (the original system:
   25 s). Setup (features for 161k bars, checkpoint load) is reported apart.
2. sma: the SMA-cross baseline (10/30, long/short, 3 contracts, no costs) on the CPU over a
   1M-bar synthetic series, end to end (bars in; signal table, fills, trades, equity curve and
   every metric out); target >= 1M bars/s. The same rules run in vectorbt (the `bench` extra),
   with each engine it has here (Numba always, Rust with `vectorbt-rust`): the means from
   `vbt.MA`, signals decided at a bar's close and filled at the next bar's open
   (`Portfolio.from_signals` with the signals shifted one bar and `price=open`), then its trade
   records, equity curve, total return, Sharpe and max drawdown (`foxhunt.backtest.peer`).
   - Same trades: foxhunt's trades closed by a signal against vectorbt's closed trades, count,
     side, size, entry/exit bar and price, exactly (`trades` per engine: `equal`, else both
     counts, the rows differing per column and the first differing row of each side). The
     position still open at the end is left out (each engine closes it its own way).
   - Speed: every engine runs in a fresh process of its own, `--rounds` rounds (each runs every
     engine once in turn), `--repeats` timed runs per process after a warm-up on 10,000 bars
     (vectorbt compiles there). In one process each library's frees decide whether the other's
     large arrays come back from the heap or as fresh pages (page faults, reported per run),
     which then sets the time more than the engines do. `bars_per_s` is the bars over the
     median run; `ratio` is foxhunt's over the fastest engine's (`target_met`: foxhunt >=
     vectorbt). `simulation_ratio` compares the simulations alone: foxhunt's direct path
     (targets, fills, per-bar records from the signal table) against `from_signals`.
   backtesting.py (the `peers` extra) runs the same rules on the series' first `--peer-bars`
   bars (it steps a Python loop per bar, so the full series would take minutes), in this
   process; its bars/s is those bars over its run time, and its trades are compared the same
   way.

   A stderr summary closes the run, e.g. (2-core VM):

       sma summary: 1,000,000 bars on AMD EPYC (2 cores), foxhunt 11.15M bars/s (...)
       sma summary: vectorbt 1.2.0 (numba) 1.87M bars/s whole run, 5.11M bars/s from_signals
       alone; the same 38,374 trades
       sma summary: foxhunt / fastest vectorbt (rust) = 4.375x whole run (foxhunt >= vectorbt:
       True); simulation alone: foxhunt 57.47M bars/s, 3.213x the fastest from_signals

`--quick` (CI runs it on the CPU, in seconds): small sizes, one round of one timed run, and
vectorbt left out (its kernels take longer to compile than the rest of the run).

Targets are reported as `target_met` (null at `--quick` sizes, which they do not apply to) and
never change the exit status. Prints one JSON document on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _common import emit, kernel_profile, log, resolve_device, run_main, synchronize

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.backtest import Backtester, Job, SmaCross, checkpoint_policy
from foxhunt.backtest.peer import (
    backtesting_available,
    compare_trades,
    signal_trades,
    sma_cross_trades,
    vectorbt_available,
    vectorbt_engines,
    vectorbt_sma_cross,
)
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.env import EnvConfig
from foxhunt.env.observation import ObservationSpec
from foxhunt.features import FeatureConfig, FeaturePipeline
from foxhunt.training.checkpoint import save_checkpoint
from foxhunt.training.config import TrainingSpec

SEED = 0
GREEDY_TARGET_S = 2.5
SMA_TARGET_BARS_PER_S = 1_000_000
SIZES = {
    "full": {"name": "full", "bars_per_window": 32_000, "windows": 5, "hidden": 512,
             "sma_bars": 1_000_000, "peer_bars": 100_000},
    "quick": {"name": "quick", "bars_per_window": 300, "windows": 5, "hidden": 64,
              "sma_bars": 100_000, "peer_bars": 5_000},
}


def greedy(sizes: dict, device: torch.device, workdir: Path) -> dict:
    per, count, hidden = sizes["bars_per_window"], sizes["windows"], sizes["hidden"]
    inst = InstrumentRegistry.load().get("SYN")
    pipeline = FeaturePipeline(FeatureConfig(), inst.session)
    first = pipeline.warmup + 64
    market = generate(SynthConfig(n_bars=first + per * count + 1, seed=SEED, signal_strength=0.2))
    bars = market.bars
    spec = TrainingSpec(env=EnvConfig(window=32), agent=AgentConfig(hidden=hidden, atoms=51))
    log(f"greedy: features for {len(bars):,} bars, hidden-{hidden} checkpoint")
    t0 = time.perf_counter()
    matrix = pipeline.transform(bars, fit_until=first + per)
    torch.manual_seed(SEED)
    obs = ObservationSpec.of(spec.env, pipeline)
    net = BranchingQNetwork(obs.size, spec.agent, matrix.groups, obs.window, obs.pos_dim)
    norm = matrix.normaliser
    path = save_checkpoint(
        workdir / "fold0.pt", net, spec.model_dump(mode="json"),
        {"normaliser": {"mean": norm.mean.tolist(), "std": norm.std.tolist()},
         "feature_names": list(matrix.names), "feature_groups": matrix.groups, "symbol": "SYN"},
    )
    policy = checkpoint_policy(path, bars, inst, device)
    tester = Backtester(bars, inst, policy.env_config, device=device)
    setup_s = time.perf_counter() - t0
    windows = [(first + i * per, first + (i + 1) * per) for i in range(count)]
    jobs = [Job("agent", policy, w) for w in windows]

    def run() -> tuple[float, list]:
        synchronize(device)
        start = time.perf_counter()
        results = tester.run(jobs)
        synchronize(device)
        return time.perf_counter() - start, results

    log(f"greedy: {count} windows x {per:,} bars on {device} (first run compiles and captures)")
    first_s, _ = run()
    log(f"greedy: first run {first_s:.2f} s; timing a second run")
    wall_s, results = run()
    steps = per - 1
    engine = results[0].engine
    profile = kernel_profile(lambda: tester.run(jobs), 1, device)
    if profile:
        profile["kernels_per_step"] = round(profile["kernels_per_step"] / engine["steps"], 1)
        profile["kernel_ms_per_step"] = round(profile["kernel_ms_per_step"] / engine["steps"], 4)
        profile.pop("top_kernels")
    return {
        "bars_per_window": per, "windows": count, "hidden": hidden, "atoms": 51,
        "obs_dim": net.obs_dim, "n_envs": engine["n_envs"], "steps": engine["steps"],
        "graphs": engine["graphs"], "compiled": engine["compiled"],
        "setup_s": round(setup_s, 3), "first_run_s": round(first_s, 3), "wall_s": round(wall_s, 3),
        "lockstep_s": engine["lockstep_s"], "profile": profile,
        "per_step_us": round(wall_s / steps * 1e6, 1),
        "bars_per_s": round(per * count / wall_s),
        "trades": int(sum(len(r.trades) for r in results)),
        "target_s": GREEDY_TARGET_S,
        "target_met": wall_s <= GREEDY_TARGET_S if sizes["name"] == "full" else None,
    }


ENGINES = ("foxhunt", "vectorbt-numba", "vectorbt-rust")
"""What `--worker` runs: foxhunt's CPU backtest or vectorbt with one of its engines."""
WORKER_TIMEOUT_S = 900
"""A worker process past this is stuck (a full-size one takes well under a minute)."""


def sma_bars(n: int):
    """The SMA benchmark's series: the same bars in every process (seeded)."""
    return generate(SynthConfig(n_bars=n, seed=SEED + 1)).bars


def sma_worker(engine: str, n: int, repeats: int, trades_file: Path) -> dict:
    """One engine in this process: a warm-up on 10,000 bars (vectorbt compiles its kernels
    there), then `repeats` timed runs over the `n` bars, each with its wall time and the minor
    page faults it took; the last run's trades closed by a signal go to `trades_file`."""
    import resource

    import numpy as np

    bars = sma_bars(n)
    strategy = SmaCross(10, 30)
    contracts = EnvConfig().max_contracts  # SmaCross trades its full size: every contract
    inst = InstrumentRegistry.load().get("SYN")

    simulated: list[float] = []
    if engine == "foxhunt":  # time the simulation alone too: the direct path (see sma)
        direct = Backtester._direct

        def timed(self, *args):
            start = time.perf_counter()
            out = direct(self, *args)
            simulated.append(time.perf_counter() - start)
            return out

        Backtester._direct = timed

    def run(b) -> tuple[float, float, dict]:
        if engine == "foxhunt":
            start = time.perf_counter()
            tester = Backtester(b, inst, EnvConfig(), costs=False, device="cpu")
            result = tester.run([Job("sma", strategy, (0, len(b)))])[0]
            return time.perf_counter() - start, simulated[-1], signal_trades(result.trades)
        peer = vectorbt_sma_cross(b, strategy.fast, strategy.slow, contracts,
                                  engine=engine.removeprefix("vectorbt-"))
        return peer.seconds, peer.simulate_seconds, peer.trades

    run(bars.slice(0, min(n, 10_000)))
    seconds, simulate, faults = [], [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        s, sim, trades = run(bars)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        seconds.append(round(s, 4))
        simulate.append(round(sim, 4))
    np.savez(trades_file, **trades)
    return {"engine": engine, "seconds": seconds, "simulate_s": simulate,
            "page_faults": faults, "torch_threads": torch.get_num_threads()}


def _spawn(engine: str, n: int, repeats: int, trades_file: Path,
           threads: int | None = None) -> dict:
    """`sma_worker` in a fresh process of its own (see `sma`)."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", engine, "--worker-bars",
           str(n), "--repeats", str(repeats), "--worker-trades", str(trades_file)]
    if threads:
        cmd += ["--threads", str(threads)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"error: bench_backtest: sma worker {engine} ran past "
                         f"{WORKER_TIMEOUT_S} s on {n:,} bars") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"error: bench_backtest: sma worker {engine} failed (exit "
                         f"{done.returncode}): {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def sma(sizes: dict, repeats: int, rounds: int, vectorbt: bool, workdir: Path,
        threads: int | None = None) -> dict:
    """foxhunt and vectorbt (each installed engine) on the same bars and rules, each engine in a
    fresh process of its own, `rounds` rounds that run every engine once in turn (so a change
    of load hits them alike), `repeats` timed runs per process after a warm-up.

    Why processes: in one process each library's frees decide whether the other's large
    arrays come back from the heap or as fresh pages from the OS, and those page faults, not
    the engines, then set the time (measured on the 2-core VM: foxhunt 0.08 s with no faults,
    0.3-1.3 s with 20,000-40,000 after vectorbt in the same process; vectorbt's Rust engine
    0.09 s against 0.29 s likewise). A process per engine is how each is used alone."""
    import numpy as np

    n = sizes["sma_bars"]
    engines = ["foxhunt"]
    if vectorbt and vectorbt_available():
        engines += [f"vectorbt-{e}" for e in vectorbt_engines()]
    runs: dict[str, list[dict]] = {e: [] for e in engines}
    for r in range(rounds):
        for engine in engines:
            out = _spawn(engine, n, repeats, workdir / f"{engine}.npz", threads)
            runs[engine].append(out)
            log(f"sma: round {r + 1}/{rounds} {engine}: {out['seconds']} s (simulation "
                f"{out['simulate_s']} s), page faults {out['page_faults']}")
    trades = {e: dict(np.load(workdir / f"{e}.npz")) for e in engines}
    fox = [t for run in runs["foxhunt"] for t in run["seconds"]]
    fox_sim = [t for run in runs["foxhunt"] for t in run["simulate_s"]]
    median = statistics.median(fox)
    rate = n / median
    out = {
        "bars": n, "fast": 10, "slow": 30, "contracts": EnvConfig().max_contracts,
        "costs": False, "device": "cpu", "torch_threads": runs["foxhunt"][0]["torch_threads"],
        "cpu": _cpu_name(), "cpu_count": os.cpu_count(), "rounds": rounds, "repeats": repeats,
        "foxhunt_s": fox, "foxhunt_median_s": round(median, 4), "foxhunt_bars_per_s": round(rate),
        "foxhunt_simulate_s": fox_sim,
        "foxhunt_simulate_bars_per_s": round(n / statistics.median(fox_sim)),
        "foxhunt_page_faults": [f for run in runs["foxhunt"] for f in run["page_faults"]],
        "signal_trades": len(trades["foxhunt"]["side"]),
        "target_bars_per_s": SMA_TARGET_BARS_PER_S,
        "target_met": rate >= SMA_TARGET_BARS_PER_S if sizes["name"] == "full" else None,
    }
    if len(engines) > 1:
        out["vectorbt"] = _vectorbt_summary(runs, trades, n, rate,
                                            out["foxhunt_simulate_bars_per_s"])
    else:
        skipped = "skipped (--quick)" if sizes["name"] == "quick" else "skipped (--no-vectorbt)"
        out["vectorbt"] = {"available": False, "note": skipped if not vectorbt
                           else "not installed: pip install -e '.[bench]'"}
    return out


def _vectorbt_summary(runs: dict[str, list[dict]], trades: dict, n: int, rate: float,
                      sim_rate: float) -> dict:
    """Per engine: median seconds and bars/s of the whole run and of `from_signals` alone, and
    its trades against foxhunt's (closed by a signal; see foxhunt.backtest.peer); then the
    fastest engine and foxhunt's ratios to it, whole run to whole run and simulation to
    simulation."""
    from importlib.metadata import version

    engines = {}
    for engine, rs in runs.items():
        if engine == "foxhunt":
            continue
        seconds = [t for r in rs for t in r["seconds"]]
        simulate = [t for r in rs for t in r["simulate_s"]]
        med, sim = statistics.median(seconds), statistics.median(simulate)
        engines[engine.removeprefix("vectorbt-")] = {
            "seconds": seconds, "median_s": round(med, 4), "bars_per_s": round(n / med),
            "from_signals_median_s": round(sim, 4), "from_signals_bars_per_s": round(n / sim),
            "page_faults": [f for r in rs for f in r["page_faults"]],
            "trades": compare_trades(trades["foxhunt"], trades[engine]),
        }
    fastest = max(engines, key=lambda e: engines[e]["bars_per_s"])
    best = engines[fastest]
    return {
        "available": True, "version": version("vectorbt"), "engines": engines,
        "fastest_engine": fastest,
        "ratio": round(rate / best["bars_per_s"], 3),
        "simulation_ratio": round(sim_rate / max(e["from_signals_bars_per_s"]
                                                 for e in engines.values()), 3),
        "target_met": rate >= best["bars_per_s"],
        "trades_equal": all(e["trades"]["equal"] for e in engines.values()),
        "note": "ratio: whole runs (bars in; trades, equity curve and metrics out), each engine "
                "in a process of its own, against the fastest engine; simulation_ratio: "
                "foxhunt's direct path (targets, fills, per-bar records) against the fastest "
                "from_signals (orders, fills, records), each without its inputs and outputs",
    }


def _backtesting_py(sizes: dict, rate: float) -> dict:
    """backtesting.py on the series' first `peer_bars` bars, in this process, against foxhunt
    on the same bars (its trades; the speed ratio uses foxhunt's full-series rate)."""
    if not backtesting_available():
        return {"name": "backtesting.py", "available": False,
                "note": "not installed: pip install -e '.[peers]'"}
    import backtesting

    head = sma_bars(sizes["sma_bars"]).slice(0, sizes["peer_bars"])
    strategy, contracts = SmaCross(10, 30), EnvConfig().max_contracts
    log(f"sma: backtesting.py on the first {len(head):,} bars")
    peer, peer_s = sma_cross_trades(head, strategy.fast, strategy.slow, contracts=contracts)
    inst = InstrumentRegistry.load().get("SYN")
    mine = Backtester(head, inst, EnvConfig(), costs=False, device="cpu").run(
        [Job("sma", strategy, (0, len(head)))])[0]
    peer_rate = len(head) / peer_s
    return {
        "name": "backtesting.py", "version": backtesting.__version__, "available": True,
        "bars": len(head), "seconds": round(peer_s, 3), "bars_per_s": round(peer_rate),
        "ratio": round(rate / peer_rate, 1),
        "trades": compare_trades(signal_trades(mine.trades), peer),
        "note": f"run on the first {len(head):,} bars; bars/s = those bars / its run time",
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _summary(sma_out: dict) -> None:
    """The SMA comparison in a few lines on stderr."""
    def m(rate: float) -> str:
        return f"{rate / 1e6:.2f}M bars/s"

    log(f"sma summary: {sma_out['bars']:,} bars on {sma_out['cpu']} ({sma_out['cpu_count']} "
        f"cores), foxhunt {m(sma_out['foxhunt_bars_per_s'])} "
        f"(median {sma_out['foxhunt_median_s']} s over {len(sma_out['foxhunt_s'])} runs in "
        f"{sma_out['rounds']} processes)")
    v = sma_out["vectorbt"]
    if v["available"]:
        for engine, e in v["engines"].items():
            t = e["trades"]
            same = (f"the same {t['foxhunt_trades']:,} trades" if t["equal"] else
                    f"TRADES DIFFER: {t}")
            log(f"sma summary: vectorbt {v['version']} ({engine}) {m(e['bars_per_s'])} whole run, "
                f"{m(e['from_signals_bars_per_s'])} from_signals alone; {same}")
        log(f"sma summary: foxhunt / fastest vectorbt ({v['fastest_engine']}) = {v['ratio']}x "
            f"whole run (foxhunt >= vectorbt: {v['target_met']}); simulation alone: foxhunt "
            f"{m(sma_out['foxhunt_simulate_bars_per_s'])}, {v['simulation_ratio']}x the fastest "
            "from_signals")
    else:
        log(f"sma summary: vectorbt {v['note']}")
    p = sma_out["peer"]
    if p["available"]:
        log(f"sma summary: backtesting.py {m(p['bars_per_s'])} on {p['bars']:,} bars, ratio "
            f"{p['ratio']}x; trades equal: {p['trades']['equal']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="device of the greedy evaluation (the SMA part always runs on CPU)")
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke test)")
    parser.add_argument("--out", metavar="FILE.json", help="also write the JSON document here")
    parser.add_argument("--peer-bars", type=int, metavar="N",
                        help="bars backtesting.py runs on (default 100,000; quick 5,000)")
    parser.add_argument("--skip-greedy", action="store_true", help="only the SMA part")
    parser.add_argument("--no-vectorbt", action="store_true",
                        help="leave vectorbt out (--quick leaves it out)")
    parser.add_argument("--rounds", type=int, metavar="N",
                        help="SMA rounds, each running every engine in a fresh process (default "
                        "3; quick 1)")
    parser.add_argument("--repeats", type=int, metavar="N",
                        help="timed SMA runs per engine process (default 3; quick 1)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch threads of the foxhunt SMA process (default: torch's own)")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--worker-bars", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker-trades", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.repeats = args.repeats or (1 if args.quick else 3)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.worker:
        import json

        print(json.dumps(sma_worker(args.worker, args.worker_bars, args.repeats,
                                    args.worker_trades)), flush=True)
        return
    device = resolve_device(args.device)
    sizes = dict(SIZES["quick" if args.quick else "full"])
    if args.peer_bars:
        sizes["peer_bars"] = args.peer_bars
    results: dict = {"quick": args.quick}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_greedy:
            results["greedy"] = greedy(sizes, device, Path(tmp))
        results["sma"] = sma(sizes, args.repeats, args.rounds,
                             not (args.no_vectorbt or args.quick), Path(tmp), args.threads)
    results["sma"]["peer"] = _backtesting_py(sizes, results["sma"]["foxhunt_bars_per_s"])
    _summary(results["sma"])
    emit("backtest", device, results, args.out)


if __name__ == "__main__":
    run_main(main, "bench_backtest")
