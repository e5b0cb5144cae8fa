"""Search throughput: trials per hour of `foxhunt tune` at K = 1, 2, 4, 8 trials at once.

The market is the synthetic one `foxhunt data synth --bars 30000` stores (family ar, planted
signal 0.3, seed 0). Each K runs a fresh study of `--trials-per-slot` x K trials (random
sampler, fixed seed, no pruning, so every trial trains its whole budget) over a space whose keys
do not change a trial's cost (learning rate, n-step, priority exponent), on each backend asked
for: `process` (a spawned worker per slot, each with its own learner and CUDA context) and
`thread` (K trials in the driver's process). Trials per hour count the whole wall, worker
start-up included; `trial_s_mean` is the mean time inside a trial.

Budgets: `--budget tiny` (the CPU default: 2 folds' worth of seconds a trial) or `--budget
profile` (the GPU profile's, e.g. h200: 250k updates a fold; `--updates-per-fold` and
`--epochs` override either). Each trial's CPU threads are cores // K (`--threads` to set them).

`--quick` (CI runs it on the CPU, in seconds): the tiny budget cut to one epoch of 16 updates on
two folds of 2,000 bars, K = 1 and 2 on the thread backend, one CPU thread a trial, unless
given.

Prints one JSON document (progress on stderr); `--out FILE` also writes it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import emit, log, resolve_device, run_main

from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.features.config import FeatureConfig
from foxhunt.profiles import choose_profile
from foxhunt.training.config import TrainingSpec
from foxhunt.tune.objective import TrialContext
from foxhunt.tune.space import parse_space
from foxhunt.tune.study import TuneConfig, run_study

SPACE = {"agent": {"lr": {"low": 1e-4, "high": 3e-3, "log": True}},
         "replay": {"n_step": {"low": 1, "high": 5}, "alpha": {"low": 0.2, "high": 0.8}}}
TINY = {
    "env": {"window": 16, "episode_len": 128},
    "agent": {"hidden": 64, "atoms": 11},
    "replay": {"capacity": 20_000, "beta_anneal_steps": 1_000},
    "train": {"epochs": 2, "updates_per_fold": 40, "replay_ratio": 4.0, "learning_starts": 512,
              "batch_size": 64, "n_envs": 32, "eval_windows": 8},
    "walkforward": {"folds": 3, "purge": 32},
}
QUICK_BUDGET = {"train": {"epochs": 1, "updates_per_fold": 16, "eval_windows": 2},
                "walkforward": {"folds": 2}}
"""--quick: the tiny budget cut down further (one epoch a fold, two folds)."""
QUICK = {"bars": 2_000, "ks": [1, 2], "backends": ["thread"], "threads": 1}
FULL = {"bars": 30_000, "ks": [1, 2, 4, 8], "backends": ["process", "thread"], "threads": None}


def base_spec(args: argparse.Namespace) -> TrainingSpec:
    spec = TrainingSpec()
    if args.budget == "tiny":
        spec = spec.with_overrides(TINY, "bench_tune tiny budget")
        if args.quick:
            spec = spec.with_overrides(QUICK_BUDGET, "bench_tune --quick")
    train: dict[str, Any] = {"device": args.device}
    if args.updates_per_fold:
        train["updates_per_fold"] = args.updates_per_fold
    if args.epochs:
        train["epochs"] = args.epochs
    return spec.with_overrides({"train": train}, "bench_tune options")


def measure(args, bars, instrument, backend: str, k: int, work: Path) -> dict[str, Any]:
    root = work / f"{backend}-{k}"
    spec = base_spec(args)
    profile = choose_profile(args.profile).profile
    cores = os.cpu_count() or 1
    threads = args.threads or max(1, cores // k)
    ctx = TrialContext(bars, instrument, FeatureConfig(), spec, profile, None, "sharpe", root,
                       device=args.device, threads=threads if args.device == "cpu" else None)
    trials = args.trials_per_slot * k
    config = TuneConfig(name=f"bench-{backend}-{k}", storage=f"sqlite:///{root}/s.db",
                        trials=trials, sampler="random", parallel=k, backend=backend,
                        pruner="none", seed=0)
    done: list[float] = []
    doc = run_study(config, ctx, parse_space(SPACE, "bench space", "bench"), {"symbol": "SYN"},
                    on_trial=lambda o, _: done.append(o.seconds))
    states = [t["state"] for t in doc["trials"]]
    thr = doc["throughput"]
    row = {"backend": backend, "k": k, "trials": trials, "complete": states.count("complete"),
           "wall_s": thr["wall_s"], "trials_per_hour": thr["trials_per_hour"],
           "trial_s_mean": round(statistics.mean(done), 3) if done else None}
    log(f"{backend} K={k}: {row['trials_per_hour']} trials/h ({trials} trials in "
        f"{row['wall_s']} s, {row['trial_s_mean']} s a trial)")
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--bars", type=int, help="bars of the market (default 30,000; quick 2,000)")
    p.add_argument("--ks", type=int, nargs="+", help="trials at once (default 1 2 4 8; quick 1 2)")
    p.add_argument("--backends", nargs="+", choices=["process", "thread", "ray"],
                   help="default process thread; quick thread")
    p.add_argument("--threads", type=int, help="CPU threads a trial (default cores // K; quick 1)")
    p.add_argument("--quick", action="store_true",
                   help="a few seconds' smoke run (CI): see the module docstring")
    p.add_argument("--trials-per-slot", type=int, default=1, help="trials per K slot")
    p.add_argument("--budget", default=None, choices=["tiny", "profile"],
                   help="tiny (CPU default) or the GPU profile's (CUDA default)")
    p.add_argument("--profile", default=None, help="GPU profile name (default: detected)")
    p.add_argument("--updates-per-fold", type=int, default=None)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    device = resolve_device(args.device)
    args.budget = args.budget or ("tiny" if device.type == "cpu" else "profile")
    market = generate(SynthConfig(n_bars=args.bars, seed=0, signal_strength=0.3))
    instrument = InstrumentRegistry.load().get("SYN")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_tune-") as tmp:
        for backend in args.backends:
            for k in args.ks:
                rows.append(measure(args, market.bars, instrument, backend, k, Path(tmp)))
    base = {r["backend"]: r["trials_per_hour"] for r in rows if r["k"] == min(args.ks)}
    for r in rows:
        one = base.get(r["backend"])
        r["speedup_vs_k1"] = round(r["trials_per_hour"] / one, 2) if one else None
    best = max(rows, key=lambda r: r["trials_per_hour"])
    emit("tune", device, {"quick": args.quick, "bars": args.bars, "budget": args.budget,
                          "config": base_spec(args).model_dump(mode="json", exclude_unset=True),
                          "results": rows,
                          "fastest": {"backend": best["backend"], "k": best["k"]}}, args.out)


if __name__ == "__main__":
    run_main(main, "bench_tune")
