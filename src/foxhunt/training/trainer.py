"""Walk-forward training: for each fold, epochs of (collect K env steps, U updates, validate).

The fold's learner is `[agent] kind`'s (`learners.start_learner`: the DQN's or PQN's); the
trainer asks of it only what `learners.FoldLearner` and `FoldSteps` say: an epoch of its
budget, the epoch's metrics, the policy network to judge, and its resume state.

A fold's budget is `[train] updates_per_fold` updates (the profile's a cap on what its training
window asks for: `TrainConfig.for_fold`) and the transitions `replay_ratio` asks for, split
evenly over `epochs` (`TrainConfig.budget`).

Per fold the normaliser is fitted on the training window, the market handed to each phase ends
at the last bar that phase may see, and the model with the best validation Sharpe is kept. The
fold deploys it only if its validation returns beat, with probability `[walkforward]
deploy_min_psr`, the Sharpe the best of its epochs would show without skill (`deploy_rule`
"deflated"; `verdict.deploy_test`), else it deploys flat (`verdict.deploy_decision`); the test
window is evaluated once, with what was deployed, for the report. Nothing reads the test window
before that, and nothing from fold k reaches fold k+1 (`fold_state.FOLD_BOUNDARY`).

Every epoch the greedy policy is also rolled out on the last `len(val)` bars of the training
window (`train_eval` in run.jsonl), the same metric as validation's on bars it trained on, so
that memorising shows as a gap between the two.

Run directory: `spec.json`, `run.jsonl` (one diagnostics line per epoch; identical for the same
seed on CPU), `timings.jsonl` (phase timings per epoch), `phases.json` (the run's phase split:
`PHASES`), `folds.json` (the per-fold table), `checkpoints/fold{k}.pt` (best model, deployed or
not) and `checkpoints/fold{k}_last.pt` (resume point).

Every fold's training env gets its market from the window's first observation to its last bar,
indexed from there, so that rolling folds (equal windows) hand the compiled steps tensors of
equal shapes and envs of equal bounds: folds 2..k reuse what fold 1 compiled.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.devices import resolve_device
from foxhunt.env.market import MarketTensors
from foxhunt.env.observation import ObservationSpec
from foxhunt.errors import CheckpointError, ConfigError
from foxhunt.features.mirror import FeatureMirror
from foxhunt.features.pipeline import FeatureMatrix, FeaturePipeline
from foxhunt.fileio import write_text_atomic
from foxhunt.metrics import sharpe, sharpe_above_probability
from foxhunt.training.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from foxhunt.training.config import TrainingSpec
from foxhunt.training.evaluate import (
    Rollouts,
    WindowResult,
    constant_policy,
    greedy_policy,
    market_window,
)
from foxhunt.training.graphs import SETUP
from foxhunt.training.learners import FoldLearner, FoldSteps, start_learner
from foxhunt.training.tracking import RunTracker
from foxhunt.training.verdict import (
    COLLAPSED_FLAT,
    NO_EDGE,
    Opportunity,
    deploy_decision,
    deploy_test,
    fold_verdict,
    health_notes,
)
from foxhunt.training.walkforward import Fold, WalkForwardSplit, Window, fit_episode_len

FULL_LONG = (1, 2, 0)  # direction long, size 3/3, no stop: buy-and-hold through the env
SCOPES = ("test", "validation")
"""How far a run reaches: `test` trains, selects and then rolls out each fold's test window once
(`foxhunt train`); `validation` stops every fold at its validation window's last bar, so that
a search (`foxhunt tune`) scores trials on validation alone: each fold's bars end there, the
test window is never built, and its report has no test results."""
PHASES = ("setup_compile", "experience", "updates", "validation", "test")
"""Where a run's wall time goes (`phases.json`): fold setup (features, market, learner) with
every compilation, graph warm-up and capture (`graphs.SETUP`); collecting; updating; validating
(the epoch's metrics read and the greedy rollouts of validation and the training slice); the
test window's rollouts. `other` is the rest of the wall (checkpoints, logs)."""


RESUME_EVERY_S = 60.0
"""Seconds of training a crash may lose: the resume point (weights, target, optimiser, the best
state: ~70 MB on the H200 profile) is saved after an epoch only once this long has passed since
the last save, and after each fold's last epoch. Saved every epoch it cost ~0.15 s an epoch
on the H200, 5% of a 250k-update run's wall."""


def market_head(market: MarketTensors, stop: int) -> MarketTensors:
    """The market up to bar `stop` (exclusive) as views: later bars do not exist for its user."""
    return market_window(market, 0, stop)


@dataclass
class FoldReport:
    fold: int
    windows: dict[str, list[int]]
    best_epoch: int
    val: dict[str, Any]
    test: dict[str, Any] | None  # None under scope `validation`
    baselines: dict[str, dict[str, Any]]
    checkpoint: str
    deployed: str  # "agent" or "flat": what `test` is the result of
    reason: str  # the deploy decision, from validation only
    train_eval: dict[str, Any]  # the chosen model on the training slice
    gap_p: float | None  # P(its true Sharpe on the training slice > on validation)
    verdict: str
    health: list[str] = field(default_factory=list)  # `verdict.health_notes` of its epochs
    undeployed_test: dict[str, Any] | None = None
    """Where the fold deployed flat: what the chosen model would have done on the test window,
    for research only (the deploy decision never sees it); None where the agent was deployed
    (`test` is then its result)."""
    deploy: dict[str, Any] | None = None  # the deploy rule's figures (`verdict.DeployTest.doc`)

    def row(self) -> dict[str, Any]:
        test, held = self.test or {}, self.baselines.get("buy_and_hold", {})
        deploy = self.deploy or {}
        return {"fold": self.fold, "best_epoch": self.best_epoch,
                "val_sharpe": self.val["sharpe"], "val_psr": self.val["psr"],
                "candidates": deploy.get("candidates"), "val_sr0": deploy.get("sr0"),
                "deploy_p": deploy.get("p"),
                "deployed": "agent" if self.deployed == "agent" else NO_EDGE,
                "test_sharpe": test.get("sharpe"),
                "test_return": test.get("return"), "test_max_drawdown": test.get("max_drawdown"),
                "test_trades": test.get("trades"),
                "buy_and_hold_sharpe": held.get("sharpe")}


@dataclass
class RunResult:
    run_dir: Path
    folds: list[FoldReport] = field(default_factory=list)
    phases: dict[str, Any] = field(default_factory=dict)  # `phase_split`, as in phases.json

    def table(self) -> list[dict[str, Any]]:
        return [f.row() for f in self.folds]


@dataclass
class FoldContext:
    fold: Fold
    features: FeatureMatrix
    learner: FoldLearner  # of `[agent] kind` (`learners.start_learner`)
    steps: FoldSteps  # what runs the learner's steps (for the DQN compiled, graphed on CUDA)
    val_market: MarketTensors
    test_market: MarketTensors | None  # None under scope `validation`
    best_state: dict[str, torch.Tensor] | None = None
    best_sharpe: float = float("-inf")
    best_epoch: int = -1
    start_epoch: int = 0
    epochs: list[dict[str, Any]] = field(default_factory=list)  # its run.jsonl lines
    rollouts: dict[tuple[Any, ...], Rollouts] = field(default_factory=dict)  # see `_rollouts`
    test_baselines: dict[str, WindowResult] | None = None  # stepped beside the model's test
    saved_at: float = field(default_factory=time.perf_counter)  # the resume point's last save


def _write_json(path: Path, doc: Any) -> None:
    write_text_atomic(json.dumps(doc, indent=2), path)


class FoldRunner(Protocol):
    """Trains a run's pending folds some other way than one after another in this process
    (`parallel.ParallelFolds`), recording each through `WalkForwardTrainer._fold_recorded`."""

    width: int

    def run(self, trainer: WalkForwardTrainer, result: RunResult, done: dict[int, FoldReport],
            pending: list[Fold], resume: bool, began: float) -> None: ...


class WalkForwardTrainer:
    def __init__(
        self,
        spec: TrainingSpec,
        bars: Bars,
        pipeline: FeaturePipeline,
        instrument: Instrument,
        run_dir: Path,
        device: torch.device | None = None,
        on_epoch: Callable[[dict[str, Any]], None] | None = None,
        periods_per_year: float | None = None,
        on_fold: Callable[[FoldReport], None] | None = None,
        scope: str = "test",
        opportunity: Callable[[Fold], Opportunity | None] | None = None,
    ):
        if scope not in SCOPES:
            raise ConfigError(f"WalkForwardTrainer: scope {scope!r} is not one of {', '.join(SCOPES)}")
        self.scope = scope
        # What a fold that collapses to flat missed: asked only then (a rule search costs a
        # backtest of the validation window), and handed the fold, whose validation window
        # is all it may read.
        self.opportunity = opportunity
        self.bars, self.pipeline, self.instrument = bars, pipeline, instrument
        self.device = device or resolve_device(spec.train.device)
        self.run_dir = Path(run_dir)
        self.on_epoch, self.on_fold = on_epoch, on_fold
        self.periods_per_year = periods_per_year
        self.observation = ObservationSpec.of(spec.env, pipeline)
        # Validation and test windows need a step per evaluation chunk; the training window
        # needs episodes, whose length is fitted to it below.
        self.split = WalkForwardSplit(spec.walkforward, len(bars),
                                      first=self.observation.first_decision(),
                                      min_window=spec.train.eval_windows + 1)
        shortest = min(len(f.train) for f in self.split.folds())
        episode_len, notice = fit_episode_len(spec.env.episode_len, shortest)
        self.notices = [notice] if notice else []
        if episode_len != spec.env.episode_len:
            env = spec.env.model_copy(update={"episode_len": episode_len})
            spec = spec.model_copy(update={"env": env})
        fold_train = {f.index: spec.train.for_fold(len(f.train))[0] for f in self.split.folds()}
        self.budgets = {i: train.budget() for i, train in fold_train.items()}
        perf, self.compile_reason = spec.train.performance.resolved(
            sum(b.total_updates for b in self.budgets.values()))
        if perf != spec.train.performance:
            spec = spec.model_copy(update={"train": spec.train.model_copy(
                update={"performance": perf})})
            fold_train = {i: t.model_copy(update={"performance": perf})
                          for i, t in fold_train.items()}
        self.spec, self.fold_train = spec, fold_train  # compile changes no budget
        cuda = self.device.type == "cuda"
        # Validation runs every epoch: its rollout step is graphed, and compiled with the
        # collect steps (compile = true). The test window is rolled out once per fold: graphed.
        self.rollout_graphs = cuda and perf.cuda_graphs
        self.rollout_compile = cuda and perf.compiles_everything
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.tracker = RunTracker.off()  # `run` opens one (tracking.py)

    @property
    def folds(self) -> list[Fold]:
        return self.split.folds()

    @property
    def total_epochs(self) -> int:
        return len(self.folds) * self.spec.train.epochs

    def run(self, resume: bool = False, parallel: FoldRunner | None = None) -> RunResult:
        """Train every fold not finished yet, in fold order; `parallel` (a
        `parallel.ParallelFolds`) trains several at once in worker processes, a runtime
        choice that is not in spec.json: the run directory comes out as one fold at a time
        writes it."""
        (self.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        spec_doc = self.spec.model_dump(mode="json")
        spec_file = self.run_dir / "spec.json"
        if resume and spec_file.exists() and json.loads(spec_file.read_text()) != spec_doc:
            raise ConfigError(f"{spec_file}: the run was started with other settings; "
                              "resume with the same config or use a new --out")
        if not resume:
            for name in ("run.jsonl", "timings.jsonl", "folds.json", "phases.json"):
                (self.run_dir / name).unlink(missing_ok=True)
        _write_json(spec_file, spec_doc)
        result = RunResult(self.run_dir)
        done = self._finished_folds() if resume else {}
        began = time.perf_counter()
        self.phases = dict.fromkeys(PHASES, 0.0)
        pending = [f for f in self.folds if f.index not in done]
        with RunTracker(self.run_dir, spec_doc, resume) as self.tracker:
            if parallel is not None and min(parallel.width, len(pending)) > 1:
                parallel.run(self, result, done, pending, resume, began)
            else:
                for fold in self.folds:
                    report = done[fold.index] if fold.index in done else self._run_fold(fold, resume)
                    self._fold_recorded(result, report,
                                        self.phase_split(time.perf_counter() - began))
        self.tracker = RunTracker.off()
        return result

    def _fold_recorded(self, result: RunResult, report: FoldReport,
                       phases: dict[str, Any]) -> None:
        """`report` joins the run's folds (in fold order) and folds.json, phases.json takes
        `phases`, then the tracker and `on_fold` hear of it."""
        result.folds = sorted([*result.folds, report], key=lambda f: f.fold)
        _write_json(self.run_dir / "folds.json", [asdict_report(f) for f in result.folds])
        result.phases = phases
        _write_json(self.run_dir / "phases.json", result.phases)
        self.tracker.fold_done(report)
        if self.on_fold:
            self.on_fold(report)

    def phase_split(self, total: float) -> dict[str, Any]:
        """`PHASES` in seconds, `other` (the rest of `total`), `total`, and the share of the
        wall after setup and compilation spent collecting and updating."""
        doc: dict[str, Any] = {f"{k}_s": round(v, 3) for k, v in self.phases.items()}
        doc["other_s"] = round(total - sum(self.phases.values()), 3)
        doc["total_s"] = round(total, 3)
        post = total - self.phases["setup_compile"]
        work = self.phases["experience"] + self.phases["updates"]
        doc["post_compile_s"] = round(post, 3)
        doc["experience_updates_share"] = round(work / post, 4) if post > 0 else None
        return doc

    @contextmanager
    def _timed(self, phase: str, lap: dict[str, float] | None = None) -> Iterator[None]:
        """Time a phase (the device synchronised at both ends): setup work inside it
        (`graphs.SETUP`) counts as setup_compile, the rest as `phase`; `lap` gets both, in
        milliseconds, for timings.jsonl."""
        _sync(self.device)
        start, setup = time.perf_counter(), SETUP.seconds
        try:
            yield
        finally:
            _sync(self.device)
            once = SETUP.seconds - setup
            work = time.perf_counter() - start - once
            self.phases[phase] += work
            self.phases["setup_compile"] += once
            if lap is not None:
                lap[phase] = lap.get(phase, 0.0) + 1e3 * work
                lap["setup_compile"] = lap.get("setup_compile", 0.0) + 1e3 * once

    def _run_fold(self, fold: Fold, resume: bool) -> FoldReport:
        """One fold from its boundary to its report. Its learner (replay, captured graphs,
        device tensors) is released on return, before the next fold builds its own."""
        with self.tracker.fold(fold.index):
            with self._timed("setup_compile"):
                ctx = self.start_fold(fold)
                if resume:
                    self._resume(ctx)
            return self.train_fold(ctx)

    def fold_seed(self, fold: Fold) -> int:
        return self.spec.train.seed * 1_000_003 + fold.index

    def start_fold(self, fold: Fold) -> FoldContext:
        """Apply FOLD_BOUNDARY: refit the normaliser, rebuild the market, fresh learner. The
        learner's market is the training window from its first observation on, indexed from
        there (`learner_window`). Under scope `validation` the bars end with the validation
        window."""
        bars = self.bars if self.scope == "test" else self.bars.slice(0, fold.val.stop)
        features = self.pipeline.transform(bars, fit_until=fold.train.stop)
        market = MarketTensors.from_bars(bars, features.values.copy(), self.instrument, self.spec.env,
                                         self.device)
        base, window = self.learner_window(fold)
        mirror = (FeatureMirror.of(self.pipeline.specs, features.normaliser)
                  if self.spec.agent.mirror else None)
        spec = self.spec.model_copy(update={"train": self.fold_train[fold.index]})
        learner, steps = start_learner(spec, market_window(market, base, fold.train.stop), window,
                                       features.groups, self.device, self.fold_seed(fold), mirror)
        return FoldContext(fold, features, learner, steps,
                           market_head(market, fold.val.stop),
                           market_head(market, fold.test.stop) if self.scope == "test" else None)

    def learner_window(self, fold: Fold) -> tuple[int, Window]:
        """(first bar of the learner's market, the training window indexed from it): the
        market starts at the first bar an observation in the window reads, so every rolling
        fold's learner has a market of the same length and an env of the same bounds, and its
        compiled steps are fold 1's (their guards hold on shapes and those bounds)."""
        base = self.observation.reads_from(fold.train.start)
        return base, Window(fold.train.start - base, fold.train.stop - base)

    @staticmethod
    def train_slice(fold: Fold) -> Window:
        """The last `len(val)` bars of the training window: bars the policy trained on, as many
        as validation judges it on."""
        return Window(max(fold.train.start, fold.train.stop - len(fold.val)), fold.train.stop)

    def evaluate(self, ctx: FoldContext, market: MarketTensors, window: Window,
                 chunks: int | None = None) -> WindowResult:
        """Greedy rollout; validation uses `eval_windows` parallel chunks for speed, the final
        test report one continuous episode (`chunks=1`), as a backtest would."""
        return self.evaluate_windows(ctx, market, [window], chunks)[0]

    def evaluate_windows(self, ctx: FoldContext, market: MarketTensors, windows: list[Window],
                         chunks: int | None = None) -> list[WindowResult]:
        """`evaluate` of several windows of `market` at once, their chunks stepped together.
        The test window's one rollout steps flat and buy-and-hold beside the model, in the
        same env (`ctx.test_baselines`), where they cost no extra steps."""
        net = ctx.learner.policy_net
        chunks = chunks or self.spec.train.eval_windows
        net.eval()
        try:
            if market is ctx.test_market and windows == [ctx.fold.test] and chunks == 1:
                runner = self._rollouts(ctx, market, windows * 3, 1,
                                        lambda: [greedy_policy(net), *_baseline_policies()])
                agent, flat, held = runner.run()
                ctx.test_baselines = {"flat": flat, "buy_and_hold": held}
                return [agent]
            runner = self._rollouts(ctx, market, windows, chunks, lambda: greedy_policy(net))
            return runner.run()
        finally:
            net.train()

    def _rollouts(self, ctx: FoldContext, market: MarketTensors, windows: list[Window],
                  chunks: int, policy: Callable[[], Any]) -> Rollouts:
        """The fold's `Rollouts` of these windows, built on first use and run again after:
        validation's every epoch (on CUDA graphed and, with [train.performance] compile,
        compiled), the test window's once (graphed)."""
        key = (id(market), tuple(windows), chunks, policy.__qualname__)
        if key not in ctx.rollouts:
            validating = market is ctx.val_market
            ctx.rollouts[key] = Rollouts(
                policy(), market, self.spec.env, windows, self.spec.train.capital, chunks,
                self.device, self.periods_per_year, graphs=self.rollout_graphs,
                compile=self.rollout_compile and validating)
        return ctx.rollouts[key]

    @property
    def first_candidate(self) -> int:
        """The first epoch a fold's model may be chosen from (`choose_from_last`)."""
        epochs = self.spec.train.epochs
        return epochs - max(1, math.ceil(epochs * self.spec.walkforward.choose_from_last))

    def confirm_from(self, fold: Fold) -> int | None:
        """Under deploy_rule `confirm`, the first validation bar kept from the choice of epoch
        to confirm it; else None (the choice and the rule read all of validation)."""
        wf = self.spec.walkforward
        if wf.deploy_rule != "confirm":
            return None
        return fold.val.stop - max(1, round(len(fold.val) * wf.deploy_confirm_share))

    def selection_sharpe(self, fold: Fold, val: WindowResult) -> float:
        """What the epochs are chosen by: the validation Sharpe, on the bars before the
        confirmation slice where there is one."""
        cut = self.confirm_from(fold)
        if cut is None:
            return val.sharpe
        return sharpe(val.pnl[val.bar < cut] / self.spec.train.capital, val.periods_per_year)

    def judge(self, ctx: FoldContext) -> tuple[WindowResult, WindowResult]:
        """The greedy policy on validation and on the training slice, in one rollout."""
        val, seen = self.evaluate_windows(ctx, ctx.val_market,
                                          [ctx.fold.val, self.train_slice(ctx.fold)])
        return val, seen

    def train_fold(self, ctx: FoldContext) -> FoldReport:
        t, learner, fold = self.spec.train, ctx.learner, ctx.fold
        (self.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        for epoch in range(ctx.start_epoch, t.epochs):
            lap: dict[str, float] = {}
            ctx.steps.train_epoch(self.budgets[fold.index], epoch,
                                  lambda phase, lap=lap: self._timed(phase, lap))
            with self._timed("validation", lap):
                metrics = learner.read_metrics()
                val, seen = self.judge(ctx)
            score = self.selection_sharpe(fold, val)
            best = epoch >= self.first_candidate and score > ctx.best_sharpe
            if best:
                ctx.best_sharpe, ctx.best_epoch = score, epoch
                ctx.best_state = {k: v.detach().clone()
                                  for k, v in learner.policy_net.state_dict().items()}
            line = {
                "fold": fold.index, "epoch": epoch, "transitions": learner.transitions,
                **{k: v for k, v in metrics.update.items()}, **metrics.collect,
                "action_mix": metrics.action_mix, "val": val.summary(),
                "train_eval": seen.summary(), "gap": seen.sharpe - val.sharpe,
                "gap_p": _gap_p(seen, val), "best": best,
                **({} if score == val.sharpe else {"select_sharpe": score}),
            }
            timing = {"fold": fold.index, "epoch": epoch, "experience_ms": lap["experience"],
                      "training_ms": lap["updates"], "validation_ms": lap["validation"],
                      # compiling, graph warm-ups and captures in this epoch's phases (the
                      # three times above are without it)
                      "compile_ms": lap["setup_compile"],
                      # How the hot path ran: a compiler failure falls back to eager (with one
                      # warning) and shows here as much as in the times.
                      "compiled": ctx.steps.compiled, "cuda_graphs": ctx.steps.captured}
            ctx.epochs.append(line)
            self._log_epoch(line, timing)
            if epoch == t.epochs - 1 or time.perf_counter() - ctx.saved_at >= RESUME_EVERY_S:
                self._save_last(ctx, epoch)
                ctx.saved_at = time.perf_counter()
            if self.on_epoch:
                self.on_epoch({**line, **timing})
        return self._finish_fold(ctx)

    def _finish_fold(self, ctx: FoldContext) -> FoldReport:
        """Decide the deployment on validation, then roll out the test window once with it."""
        learner, fold = ctx.learner, ctx.fold
        if ctx.best_state is not None:
            learner.policy_net.load_state_dict(ctx.best_state)
        with self._timed("validation"):
            val, seen = self.judge(ctx)
        wf = self.spec.walkforward
        min_psr = wf.deploy_min_psr
        candidates = [e["val"].get("sr", 0.0) for e in ctx.epochs  # older logs lack "sr"
                      if e["epoch"] >= self.first_candidate]
        cut = self.confirm_from(fold)
        returns = val.pnl if cut is None else val.pnl[val.bar >= cut]
        tested = deploy_test(returns / self.spec.train.capital, candidates, wf.deploy_rule)
        deployed, reason = deploy_decision(tested, min_psr, val.periods_per_year)
        test, baselines, agent_test = self._test(ctx, deployed)
        path = save_checkpoint(
            self.run_dir / "checkpoints" / f"fold{fold.index}.pt", learner.policy_net,
            self.spec.model_dump(mode="json"),
            {"fold": fold.index, "best_epoch": ctx.best_epoch, "deployed": deployed,
             "normaliser": _normaliser_doc(ctx.features),
             "feature_names": list(ctx.features.names), "feature_groups": ctx.features.groups,
             "feature_config": self.pipeline.config.model_dump(mode="json"),
             "observation": asdict(self.observation),
             "windows": _windows(fold), "symbol": self.instrument.symbol},
        )
        gap_p = _gap_p(seen, val)
        health = health_notes(ctx.epochs)
        missed = None
        if self.opportunity is not None and val.summary()["flat"] >= COLLAPSED_FLAT:
            missed = self.opportunity(fold)
        return FoldReport(fold.index, _windows(fold), ctx.best_epoch, val.summary(), test,
                          baselines, str(path), deployed, reason, seen.summary(), gap_p,
                          fold_verdict(fold.index, deployed, val.summary(), seen.summary(), gap_p,
                                       min_psr, health, missed), health,
                          None if deployed == "agent" else agent_test,
                          tested.doc(val.periods_per_year))

    def _test(self, ctx: FoldContext, deployed: str) -> tuple[dict[str, Any] | None,
                                                             dict[str, dict[str, Any]],
                                                             dict[str, Any] | None]:
        """(what was deployed on the test window, the baselines there, the chosen model there),
        from one rollout of the test window; (None, {}, None) under scope `validation`."""
        if ctx.test_market is None:
            return None, {}, None
        with self._timed("test"):
            ctx.test_baselines = None
            agent_test = self.evaluate(ctx, ctx.test_market, ctx.fold.test, chunks=1).summary()
            if ctx.test_baselines is None:  # the model was evaluated by an override
                flat, held = self._rollouts(ctx, ctx.test_market, [ctx.fold.test] * 2, 1,
                                            _baseline_policies).run()
                ctx.test_baselines = {"flat": flat, "buy_and_hold": held}
            baselines = {k: v.summary() for k, v in ctx.test_baselines.items()}
        test = agent_test if deployed == "agent" else dict(baselines["flat"])
        return test, baselines, agent_test

    # -- persistence ------------------------------------------------------------------------

    def _log_epoch(self, line: dict[str, Any], timing: dict[str, Any]) -> None:
        """An epoch's run.jsonl and timings.jsonl lines, and the tracker's view of them."""
        self._append("run.jsonl", line)
        self._append("timings.jsonl", timing)
        self.tracker.epoch(line, timing)

    def _append(self, name: str, doc: dict[str, Any]) -> None:
        with open(self.run_dir / name, "a") as fh:
            fh.write(json.dumps(doc) + "\n")

    def _save_last(self, ctx: FoldContext, epoch: int) -> None:
        learner = ctx.learner
        save_checkpoint(
            self.run_dir / "checkpoints" / f"fold{ctx.fold.index}_last.pt", learner.online,
            self.spec.model_dump(mode="json"),
            {"epoch": epoch, "best_epoch": ctx.best_epoch, "best_sharpe": ctx.best_sharpe,
             "best_state": None if ctx.best_state is None
             else {k: v.cpu() for k, v in ctx.best_state.items()},
             **learner.resume_state()},
        )

    def _resume(self, ctx: FoldContext) -> None:
        """Continue a fold from its last saved epoch: the learner's weights and its
        `resume_state` (the DQN's target and optimiser; its replay is not persisted and refills
        from the restored policy), and the selection. A fold with no resume point starts again,
        its logged epochs dropped."""
        path = self.run_dir / "checkpoints" / f"fold{ctx.fold.index}_last.pt"
        if not path.exists():
            self._truncate_logs(ctx.fold.index, -1)
            return
        learner = ctx.learner
        payload = load_checkpoint(path, learner.online)
        extra = payload["extra"]
        learner.restore(extra)  # the run's settings are checked equal in `run`
        if extra["best_state"] is not None:
            ctx.best_state = {k: v.to(self.device) for k, v in extra["best_state"].items()}
        ctx.best_sharpe, ctx.best_epoch = extra["best_sharpe"], extra["best_epoch"]
        ctx.start_epoch = extra["epoch"] + 1
        self._truncate_logs(ctx.fold.index, extra["epoch"])
        ctx.epochs = self._logged_epochs(ctx.fold.index)  # the health checks read them too

    def _logged_epochs(self, fold: int) -> list[dict[str, Any]]:
        """The fold's run.jsonl lines as they stand."""
        run_log = self.run_dir / "run.jsonl"
        if not run_log.exists():
            return []
        return [doc for doc in map(json.loads, run_log.read_text().splitlines())
                if doc["fold"] == fold]

    def _truncate_logs(self, fold: int, last_epoch: int) -> None:
        """Drop log lines of the interrupted fold written after its last checkpointed epoch."""
        for name in ("run.jsonl", "timings.jsonl"):
            path = self.run_dir / name
            if not path.exists():
                continue
            keep = [ln for ln in path.read_text().splitlines()
                    if ln and not (json.loads(ln)["fold"] == fold and json.loads(ln)["epoch"] > last_epoch)]
            path.write_text("".join(ln + "\n" for ln in keep))

    def _finished_folds(self) -> dict[int, FoldReport]:
        path = self.run_dir / "folds.json"
        if not path.exists():
            return {}
        out = {}
        for doc in json.loads(path.read_text()):
            try:
                read_checkpoint(Path(doc["checkpoint"]))
            except CheckpointError:
                continue
            out[doc["fold"]] = FoldReport(**doc)
        return out


def _baseline_policies() -> list[Any]:
    """Flat and buy-and-hold through the env, each on its own copy of the test window."""
    return [constant_policy((0, 0, 0)), constant_policy(FULL_LONG)]


def asdict_report(report: FoldReport) -> dict[str, Any]:
    return dict(report.__dict__)


def _windows(fold: Fold) -> dict[str, list[int]]:
    return {name: [w.start, w.stop] for name, w in (("train", fold.train), ("val", fold.val),
                                                    ("test", fold.test))}


def _normaliser_doc(features: FeatureMatrix) -> dict[str, Any] | None:
    norm = features.normaliser
    if norm is None:
        return None
    return {"mean": [float(x) for x in norm.mean], "std": [float(x) for x in norm.std]}


def _gap_p(seen: WindowResult, val: WindowResult) -> float | None:
    if seen.estimate is None or val.estimate is None:
        return None
    return sharpe_above_probability(seen.estimate, val.estimate)


def _sync(device: torch.device) -> None:
    """Phase timings need the device to finish; one sync per phase, outside the hot loops."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
