"""What validation and the test window cost per fold, by how their rollout step runs: a probe of
`training.evaluate.Rollouts` on the trainer's own folds (synthetic trend bars, the GPU
profile's network, untrained).

- `judge_*`: validation's rollout (the validation window and the training slice, `eval_windows`
  chunks each), which runs every epoch: eager, graphed, graphed and compiled; the compiled one
  again on the next fold, where it should compile nothing;
- `test_*`: the test window, one continuous episode, graphed: the model alone, and the model
  with flat and buy-and-hold stepped beside it (as the trainer runs it).

For each: the first run (warm-up, compiling and capture: `setup_s` of it is one-off work by
`graphs.SETUP`) and the mean of the next runs. On the CPU every rollout runs eagerly. `--quick`
(CI runs it on the CPU, in seconds): 3,000 bars, 2 folds, one timed run, unless given. Prints
one JSON document.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import torch
from _common import emit, log, resolve_device, run_main, synchronize

from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.profiles import choose_profile
from foxhunt.training.config import TrainingSpec
from foxhunt.training.evaluate import Rollouts, constant_policy, greedy_policy
from foxhunt.training.graphs import SETUP
from foxhunt.training.trainer import FULL_LONG, WalkForwardTrainer


def timed(make, device: torch.device, runs: int) -> dict[str, float]:
    synchronize(device)
    start, setup = time.perf_counter(), SETUP.seconds
    runner = make()
    runner.run()
    synchronize(device)
    first, once = time.perf_counter() - start, SETUP.seconds - setup
    start = time.perf_counter()
    for _ in range(runs):
        runner.run()
    synchronize(device)
    group = runner._groups[0]
    return {"first_s": round(first, 3), "setup_s": round(once, 3),
            "per_run_ms": round(1e3 * (time.perf_counter() - start) / runs, 2),
            "steps": group.steps, "envs": group.env.n_envs}


def fold_cases(trainer: WalkForwardTrainer, fold, device: torch.device,
               runs: int) -> dict[str, tuple[Callable[[], Rollouts], int]]:
    """The fold's rollouts to time (all of them on the first fold, the compiled validation on
    later ones) and how many timed runs each gets."""
    spec, graphs = trainer.spec, device.type == "cuda"
    ctx = trainer.start_fold(fold)
    net = ctx.learner.online.eval()
    f, env, chunks = ctx.fold, spec.env, spec.train.eval_windows
    judge = [f.val, trainer.train_slice(f)]

    def judge_run(graphed: bool, compiled: bool) -> Callable[[], Rollouts]:
        return lambda: Rollouts(greedy_policy(net), ctx.val_market, env, judge, 1e5, chunks,
                                device, graphs=graphed, compile=compiled)

    def test_run(policies: list) -> Callable[[], Rollouts]:
        return lambda: Rollouts(policies, ctx.test_market, env, [f.test] * len(policies), 1e5,
                                1, device, graphs=graphs)

    if fold.index:
        return {"judge_compiled": (judge_run(graphs, graphs), runs)}
    return {
        "judge_eager": (judge_run(False, False), 1),
        "judge_graphed": (judge_run(graphs, False), runs),
        "judge_compiled": (judge_run(graphs, graphs), runs),
        "test_model_graphed": (test_run([greedy_policy(net)]), 1),
        "test_with_baselines_graphed": (test_run(
            [greedy_policy(net), constant_policy((0, 0, 0)), constant_policy(FULL_LONG)]), 1),
    }


FULL = {"bars": 30_000, "folds": 3, "runs": 3}
QUICK = {"bars": 3_000, "folds": 2, "runs": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--bars", type=int, help="synthetic bars (default 30,000; quick 3,000)")
    parser.add_argument("--folds", type=int, help="walk-forward folds (default 3; quick 2)")
    parser.add_argument("--runs", type=int, help="timed runs after the first (default 3; quick 1)")
    parser.add_argument("--quick", action="store_true", help="small sizes (CI, seconds)")
    parser.add_argument("--out", metavar="FILE.json")
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    device = resolve_device(args.device)
    instrument = InstrumentRegistry.load().get("SYN")
    bars = generate(SynthConfig(n_bars=args.bars, seed=7, family="trend")).bars
    profile = choose_profile(None).profile
    spec = TrainingSpec().sized_for(profile).with_overrides(
        {"walkforward": {"folds": args.folds}}, "probe_rollouts")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="probe_rollouts-") as run_dir:
        trainer = WalkForwardTrainer(spec, bars, FeaturePipeline(FeatureConfig(),
                                                                 instrument.session),
                                     instrument, run_dir, device)
        for fold in trainer.folds[:2]:
            for name, (make, runs) in fold_cases(trainer, fold, device, args.runs).items():
                results[f"fold{fold.index}.{name}"] = timed(make, device, runs)
                log(f"fold {fold.index} {name}: {results[f'fold{fold.index}.{name}']}")
    emit("probe_rollouts", device, {"quick": args.quick, "profile": profile.name,
                                    "bars": args.bars, "results": results}, args.out)


if __name__ == "__main__":
    run_main(main, "probe_rollouts")
