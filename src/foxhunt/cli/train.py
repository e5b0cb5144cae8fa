"""`foxhunt train` and `foxhunt demo`: walk-forward training with a per-fold results table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from foxhunt.cli.common import JsonOpt, emit_json, err, out, rich_table, settings_of
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


def run_training(
    ctx: typer.Context, symbol: str, bars: str, *, folds: int | None = None,
    epochs: int | None = None, updates_per_fold: int | None = None,
    profile: str | None = None, device: str | None = None,
    seed: int | None = None, out_dir: Path | None = None, resume: bool = False,
    spec_overrides: dict[str, dict[str, Any]] | None = None, quiet: bool = False,
):
    """Resolve settings and profile, load bars, and run the walk-forward trainer."""
    from foxhunt.data.series import BarSpec
    from foxhunt.devices import resolve_device
    from foxhunt.features.pipeline import FeaturePipeline
    from foxhunt.profiles import choose_profile
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
    dev = resolve_device(spec.train.device)
    instrument = instrument_registry(ctx).get(symbol)
    with open_store(ctx) as store:
        frame = store.read_bars(symbol, BarSpec.parse(bars))
    pipeline = FeaturePipeline(settings.features, instrument.session)
    run_dir = out_dir or (resolved.home / "runs" / f"{symbol}-{bars.replace(':', '')}-{time.strftime('%Y%m%d-%H%M%S')}")
    if not quiet:
        err.print(f"training {symbol} {bars} ({len(frame):,} bars) on {dev} with GPU profile "
                  f"{choice.profile.name} ({choice.reason}) -> {run_dir}\n{choice.describe(fills)}",
                  soft_wrap=True, markup=False, highlight=False)
    # A live bar on a terminal; in a log (stderr redirected) one full line per epoch instead,
    # since a bar there is drawn once, at the end, cut to 80 columns.
    progress = progress_bar() if not quiet and err.is_terminal else None
    task = None

    def on_epoch(line: dict[str, Any]) -> None:
        done = line["fold"] * spec.train.epochs + line["epoch"] + 1  # where a resumed run is too
        status = (f"fold {line['fold']} epoch {line['epoch']}  val Sharpe {line['val']['sharpe']:+.2f}  "
                  f"gap {line['gap']:+.2f}  loss {line['loss']:.3f}  flat {line['flat']:.0%}  "
                  f"exp {line['experience_ms']:.0f} ms  train {line['training_ms']:.0f} ms  "
                  f"val {line['validation_ms']:.0f} ms")
        if progress is not None:
            progress.update(task, completed=done, status=status)
        else:
            err.print(f"[{done}/{trainer.total_epochs}] {status}", soft_wrap=True, markup=False)

    from foxhunt.metrics import periods_per_year

    ppy = periods_per_year(BarSpec.parse(bars), instrument.session, frame.ts)

    def on_fold(report) -> None:
        (progress.console if progress is not None else err).print(
            report.verdict, soft_wrap=True, markup=False, highlight=False)

    trainer = WalkForwardTrainer(spec, frame, pipeline, instrument, run_dir, dev,
                                 None if quiet else on_epoch, ppy, None if quiet else on_fold,
                                 opportunity=validation_opportunity(frame, instrument, spec.env, ppy))
    if not quiet:
        lines = budget_lines(spec.train, trainer.folds)
        if dev.type == "cuda":
            lines.append(trainer.compile_reason)
        for line in [*lines, *(f"note: {n}" for n in trainer.notices)]:
            err.print(line, soft_wrap=True, markup=False, highlight=False)
    write_source(run_dir, symbol, bars, settings.features, frame,
                 {"name": choice.profile.name, "reason": choice.reason, "filled": fills})
    if progress is not None:
        with progress:
            task = progress.add_task("walk-forward", total=trainer.total_epochs, status="starting")
            result = trainer.run(resume=resume)
    else:
        result = trainer.run(resume=resume)
    return result, choice, dev


def budget_lines(train, folds) -> list[str]:
    """Each fold's update budget and why (`TrainConfig.for_fold`), a line per distinct one."""
    by_reason: dict[str, list[str]] = {}
    for fold in folds:
        by_reason.setdefault(train.for_fold(len(fold.train))[1], []).append(str(fold.index))
    return [f"budget: fold{'s' * (len(i) > 1)} {', '.join(i)}: {why}" for why, i in by_reason.items()]


def validation_opportunity(frame, instrument, env_config, ppy):
    """For the fold verdict: the best rule of the default grid (SMA crosses, z-score fades) on a
    fold's validation window, chosen there on the CPU with the env's costs."""
    from foxhunt.backtest.rule_search import choose_rule
    from foxhunt.training.verdict import Opportunity

    def best_rule(fold) -> Opportunity:
        rule, scores = choose_rule(frame, instrument, fold.val, env_config=env_config,
                                   periods_per_year=ppy)
        return Opportunity(rule.label, scores[rule.label], len(fold.val), ppy)

    return best_rule


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


def train(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol with stored bars.")],
    bars: Annotated[str, typer.Option("--bars", help="Bar series, e.g. 1min.")] = "1min",
    folds: Annotated[int | None, typer.Option(help="Walk-forward folds.", min=1)] = None,
    epochs: Annotated[int | None, typer.Option(
        help="Validation rounds per fold; the fold's budget is split evenly over them.",
        min=1)] = None,
    updates_per_fold: Annotated[int | None, typer.Option(
        "--updates-per-fold", help="Gradient updates per fold (default: the GPU profile's).",
        min=1)] = None,
    profile: Annotated[str | None, typer.Option(help="GPU profile name or TOML path.")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda.")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Run directory.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out from its last epoch.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Walk-forward train a branching Rainbow DQN; writes a run directory and a per-fold table,
    and ends with the run's phase split (also in phases.json)."""
    if resume and out_dir is None:
        from foxhunt.errors import FoxhuntError

        raise FoxhuntError("--resume needs --out RUN_DIR (the run to continue)")
    result, choice, dev = run_training(ctx, symbol, bars, folds=folds, epochs=epochs,
                                       updates_per_fold=updates_per_fold, profile=profile,
                                       device=device, seed=seed, out_dir=out_dir, resume=resume,
                                       quiet=as_json)
    if as_json:
        emit_json("train.run", {"run_dir": str(result.run_dir), "device": str(dev), "profile": choice.profile.name,
                   "folds": [f.__dict__ for f in result.folds], "phases": result.phases})
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


def demo(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The whole path on the bundled real ES data: load, features, walk-forward train, backtest
    every test fold against the baselines, write the HTML report."""
    from foxhunt.cli.evaluate import _metrics_rows, _print_metrics, load_series
    from foxhunt.cli.features import build_features
    from foxhunt.report import write_report
    from foxhunt.report.run import backtest_run, run_report_data
    from foxhunt.training.verdict import NO_EDGE

    rows = load_sample_into_store(ctx)
    if not as_json:
        out.print(rich_table("bundled ES data (E-mini S&P 500 trades, 2013-09-01..03)",
                             ["series", "first (UTC)", "last (UTC)", "rows"],
                             [[r["bars"], r["first"], r["last"], f"{r['rows']:,}"] for r in rows]))
    _, _, fm = build_features(ctx, "ES", "1min")
    groups = {g: len(idx) for g, idx in fm.groups.items()}
    if not as_json:
        out.print(rich_table(f"features on ES 1min: {len(fm.names)} columns in {len(groups)} groups",
                             ["group", "features"], [[g, n] for g, n in groups.items()]))
    run_dir = settings_of(ctx).home / "runs" / "demo"
    result, _, dev = run_training(ctx, "ES", "1min", out_dir=run_dir, spec_overrides=DEMO_OVERRIDES,
                                  quiet=as_json)
    instrument, frame, ppy = load_series(ctx, "ES", "1min")
    per_fold = backtest_run(run_dir, frame, instrument, device=str(dev), periods_per_year=ppy)
    report = run_dir / "report.html"
    write_report(run_report_data(run_dir, per_fold), report)
    backtests = _metrics_rows([r for fold in per_fold for r in fold])
    flat_windows = {tuple(f.windows["test"]) for f in result.folds if f.deployed == "flat"}
    for row in backtests:  # the checkpoint's model, shown for what it is where it stayed undeployed
        if row["policy"] == "agent" and tuple(row["window"]) in flat_windows:
            row["policy"] = f"agent (not deployed: {NO_EDGE})"
    if as_json:
        emit_json("demo", {"data": rows, "features": {"names": list(fm.names), "groups": groups},
                   "run_dir": str(run_dir), "folds": result.table(), "backtests": backtests,
                   "report": str(report)})
        return
    print_fold_table(result)
    _print_metrics("test windows: agent against baselines (same fill model and costs)", backtests)
    out.print(f"report: {report}")
