"""Backtest benchmark: batched greedy evaluation of a network, and the SMA baseline against a peer.

1. greedy: a hidden-512 `BranchingQNetwork` (random weights, saved and loaded as a walk-forward
   checkpoint, features rebuilt with its normaliser) evaluated greedily over 5 windows of 32,000
   bars each, batched in one lock-step env (`foxhunt.backtest.Backtester`; on CUDA the step is
   compiled and captured as CUDA graphs). `first_run_s` includes compilation and capture;
   `wall_s` is a second run in the same process (compiled kernels reused, graph re-captured),
   what a per-epoch evaluation costs. Target on the H200: `wall_s` <= 2.5 s (the original system:
   25 s). Setup (features for 161k bars, checkpoint load) is reported apart.
2. sma: the SMA-cross baseline (10/30, long/short, no costs) on the CPU over a ~1M-bar synthetic
   series, end to end (market upload, signal table, fills, trades, metrics); target >= 1M bars/s.
   The same rules run in backtesting.py (the `peers` extra) on the series' first `--peer-bars`
   bars (it steps a Python loop per bar, so the full series would take minutes); its bars/s is
   those bars over its run time, the ratio is foxhunt's bars/s over the peer's, and both trade
   lists on those bars are compared (entry/exit bar, side, contracts, prices).

Targets are reported as `target_met` (null at `--quick` sizes, which they do not apply to) and
never change the exit status. Prints one JSON document on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from _common import emit, kernel_profile, log, resolve_device, synchronize

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.backtest import Backtester, Job, SmaCross, checkpoint_policy
from foxhunt.backtest.peer import backtesting_available, sma_cross_trades
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.env import EnvConfig
from foxhunt.env.vector_env import POS_STATE
from foxhunt.features import FeatureConfig, FeaturePipeline
from foxhunt.training.checkpoint import save_checkpoint
from foxhunt.training.config import TrainingSpec

SEED = 0
GREEDY_TARGET_S = 2.5
SMA_TARGET_BARS_PER_S = 1_000_000
SIZES = {
    "full": {"name": "full", "bars_per_window": 32_000, "windows": 5, "hidden": 512,
             "sma_bars": 1_000_000, "peer_bars": 100_000},
    "quick": {"name": "quick", "bars_per_window": 1_000, "windows": 5, "hidden": 64,
              "sma_bars": 100_000, "peer_bars": 20_000},
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
    net = BranchingQNetwork(spec.env.window * matrix.n_features + len(POS_STATE), spec.agent,
                            matrix.groups, spec.env.window, len(POS_STATE))
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


def sma(sizes: dict, repeats: int) -> dict:
    n, peer_n = sizes["sma_bars"], sizes["peer_bars"]
    inst = InstrumentRegistry.load().get("SYN")
    log(f"sma: {n:,}-bar synthetic series")
    bars = generate(SynthConfig(n_bars=n, seed=SEED + 1)).bars
    strategy = SmaCross(10, 30)

    def ours(b) -> tuple[float, object]:
        start = time.perf_counter()
        tester = Backtester(b, inst, EnvConfig(), costs=False, device="cpu")
        result = tester.run([Job("sma", strategy, (0, len(b)))])[0]
        return time.perf_counter() - start, result

    ours(bars.slice(0, min(n, 10_000)))
    times = []
    for i in range(repeats):
        seconds, result = ours(bars)
        times.append(seconds)
        log(f"sma: foxhunt run {i + 1}/{repeats}: {seconds:.3f} s, {len(result.trades):,} trades")
    median = statistics.median(times)
    out = {
        "bars": n, "fast": strategy.fast, "slow": strategy.slow, "device": "cpu",
        "torch_threads": torch.get_num_threads(), "repeats": repeats,
        "foxhunt_s": [round(t, 4) for t in times], "foxhunt_median_s": round(median, 4),
        "foxhunt_bars_per_s": round(n / median), "trades": len(result.trades),
        "target_bars_per_s": SMA_TARGET_BARS_PER_S,
        "target_met": n / median >= SMA_TARGET_BARS_PER_S if sizes["name"] == "full" else None,
    }
    if not backtesting_available():
        out["peer"] = {"name": "backtesting.py", "available": False,
                       "note": "not installed: pip install -e '.[peers]'"}
        return out
    import backtesting

    head = bars.slice(0, min(peer_n, n))
    log(f"sma: backtesting.py on the first {len(head):,} bars")
    peer, peer_s = sma_cross_trades(head, strategy.fast, strategy.slow, contracts=3)
    _, mine = ours(head)
    closed = mine.trades["exit_reason"] == "signal"
    t = {k: v[closed] for k, v in mine.trades.columns.items()}
    same = len(t["side"]) == len(peer["side"]) and all(
        np.array_equal(a, peer[k]) for k, a in (
            ("side", np.where(t["side"] == "long", 1, -1)), ("contracts", t["contracts"]),
            ("entry_bar", t["entry_bar"]), ("exit_bar", t["exit_bar"]),
            ("entry_price", t["entry_price"]), ("exit_price", t["exit_price"])))
    peer_rate = len(head) / peer_s
    out["peer"] = {
        "name": "backtesting.py", "version": backtesting.__version__, "available": True,
        "bars": len(head), "seconds": round(peer_s, 3), "bars_per_s": round(peer_rate),
        "note": f"run on the first {len(head):,} bars; bars/s = those bars / its run time",
    }
    out["ratio"] = round(n / median / peer_rate, 1)
    out["trades_compared"] = len(peer["side"])
    out["trades_equal"] = bool(same)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="device of the greedy evaluation (the SMA part always runs on CPU)")
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke test)")
    parser.add_argument("--out", metavar="FILE.json", help="also write the JSON document here")
    parser.add_argument("--peer-bars", type=int, metavar="N",
                        help="bars backtesting.py runs on (default 100,000; quick 20,000)")
    parser.add_argument("--skip-greedy", action="store_true", help="only the SMA part")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    sizes = dict(SIZES["quick" if args.quick else "full"])
    if args.peer_bars:
        sizes["peer_bars"] = args.peer_bars
    results: dict = {}
    if not args.skip_greedy:
        with tempfile.TemporaryDirectory() as tmp:
            results["greedy"] = greedy(sizes, device, Path(tmp))
    results["sma"] = sma(sizes, repeats=3)
    emit("backtest", device, results, args.out)


if __name__ == "__main__":
    main()
