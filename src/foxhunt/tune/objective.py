"""One trial of a study: walk-forward training scored on validation alone.

A trial trains the walk-forward folds of its configuration with
`WalkForwardTrainer(..., scope="validation")`: every fold's bars end at its validation window's
last bar, its test window is never built, and no test figure exists to be read. The trial's
score is the mean over folds of a metric of each fold's chosen model on validation
(`METRICS`; default the annualised Sharpe). It also returns that model's per-bar validation
returns with their decision bars: the deflated Sharpe ratio and PBO are computed from them.

Each epoch the running score (the mean over the folds begun so far of each fold's best epoch's
metric) is handed to `prune(step, value)`, which reports it to the study and says whether the
pruner stops the trial.

`run_trial` runs in the driver's thread, in a worker process (`process_trial`, with the study's
shared context installed once per process by `init_process`) or in a Ray task (`ray_trial`).
"""

from __future__ import annotations

import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.errors import FoxhuntError
from foxhunt.features.config import FeatureConfig
from foxhunt.profiles import GpuProfile
from foxhunt.training.config import TrainingSpec
from foxhunt.training.trainer import WalkForwardTrainer
from foxhunt.tune.space import apply

METRICS = ("sharpe", "psr", "return", "pnl")
"""Validation figures a study may maximise (each fold's `val` summary; None, as the PSR of a
flat policy, counts as 0)."""

COMPLETE, PRUNED, FAILED = "complete", "pruned", "failed"

Prune = Callable[[int, float], bool]
"""(step, running score) -> whether to stop the trial."""


class TrialPrunedSignal(Exception):
    """Raised from the epoch callback to stop a trial the pruner gave up on."""


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a study shares: sent once to each worker process or Ray node."""

    bars: Bars
    instrument: Instrument
    features: FeatureConfig
    base: TrainingSpec  # the study's settings, not yet sized by the profile
    profile: GpuProfile
    periods_per_year: float | None
    metric: str
    root: Path  # the study directory; trial k runs in root/trials/k
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads per worker (None: leave torch's)
    storage_url: str | None = None
    study_name: str = ""
    pruner: str = "median"
    startup_trials: int = 5


@dataclass(frozen=True)
class TrialTask:
    number: int
    trial_id: int
    params: dict[str, Any]


@dataclass
class TrialOutcome:
    number: int
    state: str  # COMPLETE, PRUNED or FAILED
    value: float | None
    seconds: float
    folds: list[dict[str, Any]] = field(default_factory=list)  # fold, best_epoch, val summary
    bars: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # decision bars
    returns: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per-bar validation returns
    error: str | None = None
    last_step: int | None = None


def trial_dir(root: Path, number: int) -> Path:
    return Path(root) / "trials" / f"{number:04d}"


class ValidationTrainer(WalkForwardTrainer):
    """The walk-forward trainer under scope `validation` that keeps, per fold, the chosen
    model's validation rollout (the last `judge` of a fold is the one after the best epoch's
    weights are restored)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, scope="validation", **kwargs)
        self.chosen: dict[int, Any] = {}

    def judge(self, ctx):
        val, seen = super().judge(ctx)
        self.chosen[ctx.fold.index] = val
        return val, seen


def metric_value(summary: dict[str, Any], metric: str) -> float:
    value = summary.get(metric)
    return 0.0 if value is None else float(value)


def run_trial(ctx: TrialContext, task: TrialTask, prune: Prune | None = None) -> TrialOutcome:
    """Train and score one configuration on validation. Errors in the configuration or the
    training end the trial as FAILED with the error's one line, never the study."""
    import torch

    from foxhunt.devices import resolve_device
    from foxhunt.features.pipeline import FeaturePipeline

    began = time.perf_counter()
    if ctx.threads:
        torch.set_num_threads(ctx.threads)
    run_dir = trial_dir(ctx.root, task.number)
    best: dict[int, tuple[float, float]] = {}  # fold -> (best val Sharpe, its metric)
    last_step: list[int] = []

    def on_epoch(line: dict[str, Any]) -> None:
        fold, sharpe = line["fold"], float(line["val"]["sharpe"])
        if fold not in best or sharpe > best[fold][0]:
            best[fold] = (sharpe, metric_value(line["val"], ctx.metric))
        step = fold * trainer.spec.train.epochs + line["epoch"]
        last_step[:] = [step]
        score = float(np.mean([m for _, m in best.values()]))
        if prune is not None and prune(step, score):
            raise TrialPrunedSignal(step)

    try:
        spec = apply(ctx.base, task.params, f"trial {task.number}").sized_for(ctx.profile)
        trainer = ValidationTrainer(spec, ctx.bars, FeaturePipeline(ctx.features, ctx.instrument.session),
                                    ctx.instrument, run_dir, resolve_device(ctx.device), on_epoch,
                                    ctx.periods_per_year)
        result = trainer.run()
    except TrialPrunedSignal:
        return TrialOutcome(task.number, PRUNED, None, time.perf_counter() - began,
                            last_step=last_step[0] if last_step else None)
    except FoxhuntError as exc:
        return TrialOutcome(task.number, FAILED, None, time.perf_counter() - began,
                            error=str(exc))
    except Exception as exc:  # noqa: BLE001 (a crash in one configuration must not end the study)
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return TrialOutcome(task.number, FAILED, None, time.perf_counter() - began,
                            error=f"{type(exc).__name__}: {exc} ({Path(where.filename).name}:"
                                  f"{where.lineno})")
    finally:
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # weights: not needed after
    folds = [{"fold": f.fold, "best_epoch": f.best_epoch, "val": f.val, "verdict": f.verdict}
             for f in result.folds]
    value = float(np.mean([metric_value(f.val, ctx.metric) for f in result.folds]))
    capital = trainer.spec.train.capital
    chosen = [trainer.chosen[f.fold] for f in result.folds]
    bars = np.concatenate([w.bar for w in chosen]).astype(np.int64)
    returns = np.concatenate([w.pnl for w in chosen]).astype(np.float64) / capital
    return TrialOutcome(task.number, COMPLETE, value, time.perf_counter() - began, folds,
                        bars, returns, last_step=last_step[0] if last_step else None)


# -- pruning from a worker ---------------------------------------------------------------------


def make_pruner(name: str, startup_trials: int = 5):
    import optuna

    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "median":
        # A trial is judged from its second epoch on, against the median of finished trials
        # at the same step, once `startup_trials` have finished.
        return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=1)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1)
    raise FoxhuntError(f"pruner {name!r}: use median, hyperband or none")


def storage_prune(ctx: TrialContext, trial_id: int, study: Any = None) -> Prune | None:
    """Report a trial's running score to the study's storage and ask its pruner; `study` is the
    driver's own (thread backend) or, in a worker, loaded from `ctx.storage_url`."""
    if ctx.pruner == "none":
        return None
    if study is None:
        if ctx.storage_url is None:
            return None
        import optuna

        from foxhunt.tune.storage import open_storage

        study = optuna.load_study(study_name=ctx.study_name, storage=open_storage(ctx.storage_url),
                                  sampler=optuna.samplers.RandomSampler(),
                                  pruner=make_pruner(ctx.pruner, ctx.startup_trials))

    def prune(step: int, value: float) -> bool:
        study._storage.set_trial_intermediate_value(trial_id, step, value)
        return bool(study.pruner.prune(study, study._storage.get_trial(trial_id)))

    return prune


_CONTEXT: TrialContext | None = None


def init_process(ctx: TrialContext) -> None:
    """Worker-process initialiser: keep the study's shared context for every task."""
    global _CONTEXT
    _CONTEXT = ctx


def process_trial(task: TrialTask) -> TrialOutcome:
    assert _CONTEXT is not None, "init_process was not run in this worker"
    return run_trial(_CONTEXT, task, storage_prune(_CONTEXT, task.trial_id))


def ray_trial(ctx: TrialContext, task: TrialTask, gpu_fraction: float) -> TrialOutcome:
    """A trial as a Ray task: on a GPU share below 1 the process's CUDA memory is capped to
    it (Ray's fractional GPUs are bookkeeping only)."""
    if ctx.device != "cpu" and 0 < gpu_fraction < 1:
        import torch

        if torch.cuda.is_available():
            torch.cuda.set_per_process_memory_fraction(gpu_fraction)
    return run_trial(ctx, task, storage_prune(ctx, task.trial_id))
