"""`foxhunt train` and `foxhunt demo`: walk-forward training with a per-fold results table."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from foxhunt.cli.common import (
    OUT_DIR_RULE,
    BarsOpt,
    JsonOpt,
    ProfileOpt,
    emit_json,
    err,
    out,
    resolve_bars,
    rich_table,
    settings_of,
    under_home,
)
from foxhunt.cli.data import instrument_registry, load_sample_into_store, open_store


def register(app: typer.Typer) -> None:
    app.command()(train)
    app.command()(demo)


def progress_bar() -> Progress:
    """A task's bar on stderr with a status line (training's epochs, tuning's trials)."""
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err, transient=False,
    )


def updates_bar() -> Progress:
    """Training's bar on stderr: updates done of the run's, their rate, the time left."""
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} updates"),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("left"),
        TimeRemainingColumn(), TextColumn("{task.fields[status]}"), console=err,
        transient=False,
    )


class RunClock:
    """Updates done and the time left, from each finished epoch's share of the run's updates
    (the first epoch's time includes set-up and compiling, so the first estimate is high)."""

    def __init__(self, budgets: dict[int, Any]):
        self.budgets = budgets
        self.before = {i: sum(b.total_updates for j, b in budgets.items() if j < i)
                       for i in budgets}
        self.total = sum(b.total_updates for b in budgets.values())
        self.start = time.perf_counter()
        self.base: int | None = None  # updates done before this process (a resumed run)

    def tick(self, fold: int, epoch: int) -> tuple[int, float | None, float | None]:
        """After `epoch` of `fold`: the run's updates done, updates a second since the start,
        and seconds left (None until measurable)."""
        done = self.before[fold] + sum(self.budgets[fold].updates[:epoch + 1])
        if self.base is None:
            self.base = done - self.budgets[fold].updates[epoch]
        return self._rated(done)

    def _rated(self, done: int) -> tuple[int, float | None, float | None]:
        """(`done`, this process's updates a second, seconds left at that rate)."""
        spent = time.perf_counter() - self.start
        rate = (done - (self.base or 0)) / spent if spent > 0 else 0.0
        if rate <= 0:
            return done, None, None
        return done, rate, (self.total - done) / rate


class FoldsClock(RunClock):
    """`RunClock` for folds trained at once (`--parallel-folds`): the run's updates done are
    each fold's own, and a fold finished before this process (a resumed run) counts as done
    and not toward the rate."""

    def __init__(self, budgets: dict[int, Any]):
        super().__init__(budgets)
        self.base = 0
        self.progress: dict[int, int] = {}

    def fold_done(self, fold: int) -> None:
        if fold not in self.progress:
            self.base += self.budgets[fold].total_updates
        self.progress[fold] = self.budgets[fold].total_updates

    def tick(self, fold: int, epoch: int) -> tuple[int, float | None, float | None]:
        updates = self.budgets[fold].updates
        if fold not in self.progress:
            self.base += sum(updates[:epoch])
        self.progress[fold] = sum(updates[:epoch + 1])
        return self._rated(sum(self.progress.values()))


def check_parallel_folds(parallel_folds: int) -> None:
    """Below 1 is a one-line error, said before any data is read."""
    from foxhunt.errors import ConfigError

    if parallel_folds < 1:
        raise ConfigError(f"--parallel-folds: {parallel_folds} is not a number of folds at once "
                          "(1 or more)")


def parallel_width(parallel_folds: int, folds: int) -> tuple[int, str | None]:
    """(folds trained at once, a note where `--parallel-folds` asked for more than the run
    has)."""
    check_parallel_folds(parallel_folds)
    if parallel_folds <= folds:
        return parallel_folds, None
    return folds, (f"--parallel-folds {parallel_folds}: the run has {folds} fold"
                   f"{'s' * (folds != 1)}, trained {folds} at once")


def device_note(dev, width: int) -> str | None:
    """Where `width` folds at once train: a GPU each, or the GPUs shared, or the cores split."""
    import torch

    from foxhunt.training.parallel import fold_threads

    if width <= 1:
        return None
    if dev.type == "cuda":
        gpus = torch.cuda.device_count()
        share = "a GPU each" if width <= gpus else f"sharing {gpus} GPU{'s' * (gpus != 1)}"
        return f"parallel folds: {width} at once, {share} (one worker process a fold)"
    return (f"parallel folds: {width} at once on the CPU, {fold_threads(width)} thread"
            f"{'s' * (fold_threads(width) != 1)} each")


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s" if m else f"{s}s"


class PastRates:
    """What earlier runs on this machine took, so a run can say how long it will take before it
    starts: per run shape (device, network, batch, envs, compile), the set-up seconds and the
    seconds an update after set-up, in FOXHUNT_HOME/cache/train_rates.json (the last run's)."""

    def __init__(self, home: Path):
        self.path = home / "cache" / "train_rates.json"

    @staticmethod
    def shape(spec, device) -> str:
        import platform

        import torch

        where = (torch.cuda.get_device_name(device) if device.type == "cuda" else
                 f"cpu {platform.machine()} x{torch.get_num_threads()}")
        train = spec.train
        return json.dumps([where, spec.agent.model_dump(mode="json"),
                           spec.env.window, train.batch_size, train.n_envs,
                           train.performance.compile, train.performance.autocast],
                          sort_keys=True, default=str)

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def estimate(self, spec, device, updates: int) -> float | None:
        """Seconds a run of `updates` updates of this shape should take, or None if unseen."""
        past = self._read().get(self.shape(spec, device))
        return None if past is None else past["setup_s"] + updates * past["update_s"]

    def record(self, spec, device, updates: int, phases: dict[str, Any]) -> None:
        """Keep this run's rates (a run that trained nothing, e.g. a finished resume, keeps
        none)."""
        from foxhunt.fileio import write_text_atomic

        post = phases.get("total_s", 0.0) - phases.get("setup_compile_s", 0.0)
        if updates <= 0 or post <= 0:
            return
        rates = self._read()
        rates[self.shape(spec, device)] = {"setup_s": phases["setup_compile_s"],
                                           "update_s": post / updates}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(json.dumps(rates, indent=1), self.path)


BUDGETS = ("quick", "full")
QUICK_SHARE = 10
"""`--budget quick`: a tenth of each fold's updates (of the profile's cap and of the data's
samples per bar alike), for a first look; `full` the shipped budget; a number N: N updates a
fold."""


def apply_budget(spec, budget: str | None, source: str = "--budget"):
    """`spec` (sized by its profile) with `--budget` applied, and what it did (None: as is)."""
    from foxhunt.errors import ConfigError

    if budget is None or budget == "full":
        return spec, None
    train = spec.train
    if budget == "quick":
        update: dict[str, object] = {"updates_per_fold": max(1, train.updates_per_fold // QUICK_SHARE)}
        if train.samples_per_bar is not None:
            update["samples_per_bar"] = max(1, train.samples_per_bar // QUICK_SHARE)
        why = f"{source} quick: a {QUICK_SHARE}th of each fold's updates"
    elif budget.isdigit() and int(budget) > 0:
        update, why = {"updates_per_fold": int(budget)}, f"{source} {budget}: updates a fold as set"
    else:
        raise ConfigError(f"{source}: {budget!r} is not quick, full or a number of updates a fold")
    return spec.with_overrides({"train": update}, source), why


def run_training(
    ctx: typer.Context, symbol: str, bars: str, *, folds: int | None = None,
    epochs: int | None = None, updates_per_fold: int | None = None, budget: str | None = None,
    profile: str | None = None, device: str | None = None,
    seed: int | None = None, out_dir: Path | None = None, resume: bool = False,
    spec_overrides: dict[str, dict[str, Any]] | None = None, quiet: bool = False,
    parallel_folds: int = 1,
):
    """Resolve settings and profile, load bars, and run the walk-forward trainer;
    `parallel_folds` folds at once (a runtime choice, not in the spec: `parallel.py`)."""
    from foxhunt.data.series import BarSpec
    from foxhunt.devices import resolve_device
    from foxhunt.features.pipeline import FeaturePipeline, fit_to_bars
    from foxhunt.profiles import choose_profile
    from foxhunt.training.parallel import ParallelFolds, rounds
    from foxhunt.training.trainer import WalkForwardTrainer

    resolved = settings_of(ctx)
    settings = resolved.settings
    spec = settings.training_spec()
    updates: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (spec_overrides or {}).items()}
    if folds is not None:
        updates.setdefault("walkforward", {})["folds"] = folds
    for key, value in (("epochs", epochs), ("updates_per_fold", updates_per_fold),
                       ("device", device), ("seed", seed)):
        if value is not None:
            updates.setdefault("train", {})[key] = value
    if updates:
        spec = spec.with_overrides(updates, "command-line options")
    choice = choose_profile(profile)
    fills = spec.profile_fills(choice.profile)
    spec = spec.sized_for(choice.profile)
    spec, budget_note = apply_budget(spec, budget)
    dev = resolve_device(spec.train.device)
    instrument = instrument_registry(ctx).get(symbol)
    with open_store(ctx) as store:
        frame = store.read_bars(symbol, BarSpec.parse(bars))
    features, feature_notes = fit_to_bars(settings.features, frame)
    pipeline = FeaturePipeline(features, instrument.session)
    run_dir = out_dir or (resolved.home / "runs" / f"{symbol}-{bars.replace(':', '')}-{time.strftime('%Y%m%d-%H%M%S')}")
    if not quiet:
        err.print(f"training {symbol} {bars} ({len(frame):,} bars) on {dev} with GPU profile "
                  f"{choice.profile.name} ({choice.reason}) -> {run_dir}\n{choice.describe(fills)}",
                  soft_wrap=True, markup=False, highlight=False)
    # A live bar on a terminal; in a log (stderr redirected) one full line per epoch instead,
    # since a bar there is drawn once, at the end, cut to 80 columns.
    progress = updates_bar() if not quiet and err.is_terminal else None
    task = None
    clock: RunClock | FoldsClock | None = None

    def on_epoch(line: dict[str, Any]) -> None:
        fold, epoch = line["fold"], line["epoch"]
        done, rate, left = clock.tick(fold, epoch)
        speed = "" if rate is None else f"{rate:,.0f} updates/s"
        status = (f"fold {fold + 1}/{len(trainer.folds)} epoch {epoch + 1}/{spec.train.epochs}  "
                  f"val Sharpe {line['val']['sharpe']:+.2f}  loss {line['loss']:.3f}  "
                  f"flat {line['flat']:.0%}")
        if progress is not None:
            progress.update(task, completed=done, status=status, rate=speed)
        else:
            eta = "" if left is None else f"  ~{_duration(left)} left ({speed})"
            err.print(f"[{done:,}/{clock.total:,} updates] {status}  gap {line['gap']:+.2f}  "
                      f"exp {line['experience_ms']:.0f} ms  train {line['training_ms']:.0f} ms  "
                      f"val {line['validation_ms']:.0f} ms{eta}",
                      soft_wrap=True, markup=False, highlight=False)

    from foxhunt.metrics import periods_per_year

    ppy = periods_per_year(BarSpec.parse(bars), instrument.session, frame.ts)

    def on_fold(report) -> None:
        if isinstance(clock, FoldsClock):
            clock.fold_done(report.fold)
        (progress.console if progress is not None else err).print(
            report.verdict, soft_wrap=True, markup=False, highlight=False)

    trainer = WalkForwardTrainer(spec, frame, pipeline, instrument, run_dir, dev,
                                 None if quiet else on_epoch, ppy, None if quiet else on_fold,
                                 opportunity=validation_opportunity(frame, instrument, spec.env, ppy))
    width, width_note = parallel_width(parallel_folds, len(trainer.folds))
    clock = FoldsClock(trainer.budgets) if width > 1 else RunClock(trainer.budgets)
    rates = PastRates(resolved.home)
    if not quiet:
        lines = budget_lines(spec.train, trainer.folds)
        if budget_note:
            lines.append(budget_note)
        if dev.type == "cuda":
            lines.append(trainer.compile_reason)
        if device_note(dev, width):
            lines.append(device_note(dev, width))
        guess = rates.estimate(trainer.spec, dev, clock.total)
        if guess is not None and width > 1:  # the rates are one fold's process at a time
            guess *= rounds(len(trainer.folds), width) / len(trainer.folds)
        lines.append(f"work: {len(trainer.folds)} folds x {spec.train.epochs} epochs, "
                     f"{clock.total:,} updates of {spec.train.batch_size} in all; " + (
                         f"estimate ~{_duration(guess)} (the last run of this shape on this "
                         "machine)" if guess is not None else
                         "the time left shows after the first epoch"))
        notes = [*feature_notes, *trainer.notices, *([width_note] if width_note else [])]
        for line in [*lines, *(f"note: {n}" for n in notes)]:
            err.print(line, soft_wrap=True, markup=False, highlight=False)
    write_source(run_dir, symbol, bars, features, frame,
                 {"name": choice.profile.name, "reason": choice.reason, "filled": fills})
    if progress is not None:
        with progress:
            first = "fold 1" if width == 1 else f"{width} folds at once"
            task = progress.add_task("walk-forward", total=clock.total, rate="",
                                     status=f"{first}: setting up, compiling on CUDA")
            result = trainer.run(resume=resume, parallel=ParallelFolds(width))
    else:
        result = trainer.run(resume=resume, parallel=ParallelFolds(width))
    if not resume:  # a parallel run's phases are fold-seconds: one fold's process's rate
        rates.record(trainer.spec, dev, clock.total, result.phases)
    return result, choice, dev


def budget_lines(train, folds) -> list[str]:
    """Each fold's update budget and why (`TrainConfig.for_fold`), a line per distinct one."""
    by_reason: dict[str, list[str]] = {}
    for fold in folds:
        by_reason.setdefault(train.for_fold(len(fold.train))[1], []).append(str(fold.index))
    return [f"budget: fold{'s' * (len(i) > 1)} {', '.join(i)}: {why}" for why, i in by_reason.items()]


def validation_opportunity(frame, instrument, env_config, ppy) -> RuleOpportunity:
    """For the fold verdict: the best rule of the default grid (SMA crosses, z-score fades) on a
    fold's validation window, chosen there on the CPU with the env's costs."""
    return RuleOpportunity(frame, instrument, env_config, ppy)


class RuleOpportunity:
    """`validation_opportunity` as an object, not a closure, so that a fold worker process
    (`--parallel-folds`) can be sent it."""

    def __init__(self, frame, instrument, env_config, ppy):
        self.frame, self.instrument, self.env_config, self.ppy = frame, instrument, env_config, ppy

    def __call__(self, fold):
        from foxhunt.backtest.rule_search import choose_rule
        from foxhunt.training.verdict import Opportunity

        rule, scores = choose_rule(self.frame, self.instrument, fold.val,
                                   env_config=self.env_config, periods_per_year=self.ppy)
        return Opportunity(rule.label, scores[rule.label], len(fold.val), self.ppy)


def write_source(run_dir: Path, symbol: str, bars: str, features, frame, profile=None) -> None:
    """What the run was trained on, so `foxhunt report RUN_DIR` can rebuild it; what a profile filled."""
    import json

    from foxhunt.fileio import write_text_atomic
    from foxhunt.report.run import SOURCE_FILE

    doc = {"symbol": symbol, "bars": bars, "features": features.model_dump(mode="json"),
           "rows": len(frame), "first_ts": int(frame.ts[0]), "last_ts": int(frame.ts[-1]),
           **({"profile": profile} if profile else {})}
    write_text_atomic(json.dumps(doc, indent=2), run_dir / SOURCE_FILE)


def phase_line(phases: dict[str, Any]) -> str:
    """The run's phase split (`WalkForwardTrainer.phase_split`) as one line."""
    names = (("setup_compile", "setup+compile"), ("experience", "experience"),
             ("updates", "updates"), ("validation", "validation"), ("test", "test"),
             ("other", "other"))
    parts = " | ".join(f"{label} {phases[f'{key}_s']:.1f} s" for key, label in names)
    share = phases["experience_updates_share"]
    tail = "" if share is None else (f"; experience+updates {share:.0%} of the "
                                     f"{phases['post_compile_s']:.1f} s after setup+compile")
    if "wall_s" in phases:  # folds at once: the phases add up the folds' processes
        return (f"phases (summed over {phases['parallel_folds']} folds at once): {parts} | "
                f"total {phases['total_s']:.1f} s{tail} | wall {phases['wall_s']:.1f} s")
    return f"phases: {parts} | total {phases['total_s']:.1f} s{tail}"


def print_fold_table(result) -> None:
    """One row per fold; a fold that deployed flat shows "no edge: flat" and flat's test result."""
    rows = [[r["fold"], r["best_epoch"], f"{r['val_sharpe']:+.2f}",
             "—" if r["val_sr0"] is None else f"{r['val_sr0']:+.2f} ({r['candidates']})",
             "—" if r["deploy_p"] is None else f"{r['deploy_p']:.2f}", r["deployed"],
             f"{r['test_sharpe']:+.2f}", f"{r['test_return']:+.2%}",
             f"{r['test_max_drawdown']:.2%}", r["test_trades"], f"{r['buy_and_hold_sharpe']:+.2f}"]
            for r in result.table()]
    out.print(rich_table(f"walk-forward results ({result.run_dir})",
                         ["fold", "best epoch", "val Sharpe", "to beat (epochs)", "P(beats)",
                          "deployed", "test Sharpe",
                          "test return", "test max DD", "test trades", "buy&hold Sharpe"], rows))
    out.print("Sharpe: per-bar returns, annualised; returns compounded (as `foxhunt backtest` "
              "--run's per-bar figures and the report)", soft_wrap=True, markup=False,
              highlight=False)


def train(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol with stored bars.")],
    bars: BarsOpt = None,
    folds: Annotated[int | None, typer.Option(
        help="Walk-forward folds (default: the config's [walkforward] folds, 3 as shipped).",
        min=1)] = None,
    epochs: Annotated[int | None, typer.Option(
        help="Validation rounds per fold; the fold's budget is split evenly over them (default: "
        "the config's [train] epochs, 20 as shipped).", min=1)] = None,
    updates_per_fold: Annotated[int | None, typer.Option(
        "--updates-per-fold", help="Gradient updates per fold (default: the data-sized budget, "
        "samples_per_bar's share of the fold's training bars, at most the GPU profile's cap: "
        "8,000 on a CPU, 250,000 on an H100).", min=1)] = None,
    budget: Annotated[str, typer.Option(
        help="quick (a tenth of each fold's updates, for a first look), full (the shipped, "
        "data-sized budget) or N updates a fold.")] = "full",
    profile: ProfileOpt = None,
    device: Annotated[str | None, typer.Option(
        help="auto, cpu or cuda (default: the config's [train] device, auto as shipped: CUDA "
        "when available).")] = None,
    seed: Annotated[int | None, typer.Option(
        help="Random seed (default: the config's [train] seed, 0 as shipped).")] = None,
    out_dir: Annotated[str | None, typer.Option(
        "--out", help="Run directory (default: FOXHUNT_HOME/runs/SYMBOL-BARS-YYYYmmdd-HHMMSS). "
        + OUT_DIR_RULE.format(folder="runs"))] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out from its last epoch.")] = False,
    parallel_folds: Annotated[int, typer.Option(
        "--parallel-folds", help="Folds trained at once, each in its own process: on CUDA a "
        "GPU each (in turn, of those visible), on the CPU the cores split between them. Not part "
        "of the run's settings (a run may resume with another); more than the folds trains them "
        "all at once.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Walk-forward train a branching Rainbow DQN; writes a run directory and a per-fold table,
    and ends with the run's phase split (also in phases.json)."""
    if resume and out_dir is None:
        from foxhunt.errors import FoxhuntError

        raise FoxhuntError("--resume needs --out RUN_DIR (the run to continue)")
    if updates_per_fold is not None and budget != "full":
        from foxhunt.errors import FoxhuntError

        raise FoxhuntError("--budget and --updates-per-fold both set the updates a fold: give one")
    check_parallel_folds(parallel_folds)
    bars, out_dir = resolve_bars(ctx, symbol, bars), under_home(ctx, out_dir)
    result, choice, dev = run_training(ctx, symbol, bars, folds=folds, epochs=epochs,
                                       updates_per_fold=updates_per_fold, budget=budget,
                                       profile=profile,
                                       device=device, seed=seed, out_dir=out_dir, resume=resume,
                                       quiet=as_json, parallel_folds=parallel_folds)
    if as_json:
        emit_json("train.run", {"run_dir": str(result.run_dir), "device": str(dev), "profile": choice.profile.name,
                   "folds": [f.__dict__ for f in result.folds], "phases": result.phases,
                   "parallel_folds": min(parallel_folds, len(result.folds))})
    else:
        print_fold_table(result)
        out.print(phase_line(result.phases), soft_wrap=True, markup=False, highlight=False)


DEMO_OVERRIDES = {
    "env": {"window": 16, "episode_len": 128},
    "agent": {"hidden": 128, "atoms": 21},
    "replay": {"capacity": 50_000, "beta_anneal_steps": 2_000},
    "train": {"epochs": 6, "updates_per_fold": 360, "replay_ratio": 7.5, "learning_starts": 1_024,
              "batch_size": 128, "n_envs": 64},
    "walkforward": {"folds": 3, "purge": 16},
}


DEMO_SYNTH = {"symbol": "SYN", "n_bars": 10_000, "seed": 7, "family": "ar",
              "signal_strength": 0.5}
"""The demo's second market: an AR(1) signal planted in the returns, strong enough that the
agent learns it in seconds on a CPU (the learning test's market, tests/training)."""

DEMO_SYNTH_OVERRIDES = {
    "env": {"window": 4, "episode_len": 64},
    "agent": {"hidden": 64, "atoms": 11, "lr": 1e-3},
    "replay": {"capacity": 40_000, "beta_anneal_steps": 1_000},
    "train": {"epochs": 8, "updates_per_fold": 480, "replay_ratio": 15.0, "learning_starts": 512,
              "batch_size": 128, "n_envs": 32, "eval_windows": 16},
    "walkforward": {"folds": 2, "purge": 8},
}


def demo(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The whole path twice: on the bundled real ES data, where the honest answer is to stay
    out, and on a synthetic market with a planted edge, where the agent learns and trades. Each:
    load, features, walk-forward train, backtest every test fold against the baselines, write
    the HTML report."""
    from foxhunt.cli.data import store_synthetic

    rows = load_sample_into_store(ctx)
    if not as_json:
        out.print(rich_table("bundled ES data (E-mini S&P 500 trades, 2013-09-01..03)",
                             ["series", "first (UTC)", "last (UTC)", "rows"],
                             [[r["bars"], r["first"], r["last"], f"{r['rows']:,}"] for r in rows]))
    real = _demo_market(ctx, "ES", "demo", DEMO_OVERRIDES, as_json,
                        "real ES: three days of one-minute bars, where no edge is expected")
    synth = store_synthetic(ctx, **DEMO_SYNTH)
    planted = _demo_market(ctx, DEMO_SYNTH["symbol"], "demo-synthetic", DEMO_SYNTH_OVERRIDES,
                           as_json, f"synthetic {DEMO_SYNTH['symbol']}: {DEMO_SYNTH['n_bars']:,} "
                           f"bars with a planted AR(1) edge (X = {DEMO_SYNTH['signal_strength']}), "
                           "which the agent should find")
    if as_json:
        emit_json("demo", {"data": rows, **real, "synthetic": {"market": synth, **planted}})
        return
    out.print(f"reports: {real['report']} (real ES), {planted['report']} (synthetic, planted edge)")


def _demo_market(ctx: typer.Context, symbol: str, name: str, overrides: dict, as_json: bool,
                 what: str) -> dict[str, Any]:
    """One market of the demo: features, training, backtests of the test folds, the report."""
    from foxhunt.cli.evaluate import _metrics_rows, _print_metrics, load_series
    from foxhunt.cli.features import build_features
    from foxhunt.report import write_report
    from foxhunt.report.run import backtest_run, run_report_data
    from foxhunt.training.verdict import NO_EDGE

    if not as_json:
        out.rule(what)
    _, _, fm = build_features(ctx, symbol, "1min")
    groups = {g: len(idx) for g, idx in fm.groups.items()}
    if not as_json:
        out.print(rich_table(f"features on {symbol} 1min: {len(fm.names)} columns in "
                             f"{len(groups)} groups", ["group", "features"],
                             [[g, n] for g, n in groups.items()]))
    run_dir = settings_of(ctx).home / "runs" / name
    result, _, dev = run_training(ctx, symbol, "1min", out_dir=run_dir, spec_overrides=overrides,
                                  quiet=as_json)
    instrument, frame, ppy = load_series(ctx, symbol, "1min")
    per_fold = backtest_run(run_dir, frame, instrument, device=str(dev), periods_per_year=ppy)
    report = run_dir / "report.html"
    data = run_report_data(run_dir, per_fold, bars=frame)
    write_report({**data, "title": f"foxhunt demo, {what}"}, report)
    backtests = _metrics_rows([r for fold in per_fold for r in fold])
    flat_windows = {tuple(f.windows["test"]) for f in result.folds if f.deployed == "flat"}
    for row in backtests:  # the checkpoint's model, shown for what it is where it stayed undeployed
        if row["policy"] == "agent" and tuple(row["window"]) in flat_windows:
            row["policy"] = f"agent (not deployed: {NO_EDGE})"
    if not as_json:
        print_fold_table(result)
        _print_metrics(f"{symbol} test windows: agent against baselines (same fill model and "
                       "costs)", backtests)
    return {"features": {"names": list(fm.names), "groups": groups}, "run_dir": str(run_dir),
            "folds": result.table(), "backtests": backtests, "report": str(report),
            "what": what}
