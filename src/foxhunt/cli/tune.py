"""`foxhunt tune`: search training settings on walk-forward validation, then test the choice once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from foxhunt.cli.common import (
    OUT_DIR_RULE,
    BarsOpt,
    JsonOpt,
    emit_json,
    err,
    out,
    resolve_bars,
    rich_table,
    settings_of,
    under_home,
)
from foxhunt.errors import FoxhuntError

TUNE_HELP = ("Search training settings (Optuna; PSO by default) scored on walk-forward "
             "validation only; report the deflated Sharpe ratio and PBO of the choice, write it "
             "as best.toml, then roll out the test windows once, for it alone.")


def register(app: typer.Typer) -> None:
    app.command(help=TUNE_HELP)(tune)


SamplerOpt = Annotated[str, typer.Option(help="pso (particle swarm), tpe, cmaes or random.")]


def _need_optuna(backend: str) -> None:
    """The extras the options need, checked before anything runs: one line naming the extra."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise FoxhuntError("foxhunt tune needs Optuna: pip install 'foxhunt[tune]'") from None
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise FoxhuntError("--backend ray needs Ray: pip install 'foxhunt[ray]'") from None


def _num(v: Any, fmt: str = "+.3f") -> str:
    return "—" if v is None else format(v, fmt)


def tune(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol with stored bars.")],
    bars: BarsOpt = None,
    space: Annotated[Path | None, typer.Option(
        "--space", help="Search space TOML (default: the shipped tune_space.toml).")] = None,
    trials: Annotated[int, typer.Option(help="Trials the study holds when done (a resumed "
                                         "study runs the rest).", min=1)] = 50,
    sampler: SamplerOpt = "pso",
    parallel: Annotated[int, typer.Option(help="Trials at once.", min=1)] = 1,
    backend: Annotated[str, typer.Option(
        help="process (a worker process per trial slot), thread, or ray (Ray tasks).")] = "process",
    storage: Annotated[str | None, typer.Option(
        help="Optuna storage URL (default: SQLite in FOXHUNT_HOME/studies; PostgreSQL works).")] = None,
    study: Annotated[str | None, typer.Option(
        "--study", help="Study name (default: SYMBOL-BARS-SAMPLER).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the study from its storage.")] = False,
    metric: Annotated[str, typer.Option(
        help="Validation figure maximised, mean over folds: sharpe, psr, return or pnl.")] = "sharpe",
    pruner: Annotated[str, typer.Option(help="median, hyperband or none.")] = "median",
    particles: Annotated[int, typer.Option(help="PSO swarm size.", min=2)] = 8,
    seed: Annotated[int, typer.Option(help="The sampler's seed.", min=0)] = 0,
    folds: Annotated[int | None, typer.Option(
        help="Walk-forward folds (default: the config's [walkforward] folds).", min=1)] = None,
    epochs: Annotated[int | None, typer.Option(
        help="Validation rounds per fold (default: the config's [train] epochs).",
        min=1)] = None,
    updates_per_fold: Annotated[int | None, typer.Option(
        "--updates-per-fold", help="Gradient updates per fold (default: the config's [train] "
        "updates_per_fold, else the GPU profile's).", min=1)] = None,
    profile: Annotated[str | None, typer.Option(
        help="GPU profile name or TOML path (default: $FOXHUNT_GPU_PROFILE, else the profile "
        "matching the CUDA device, else default, the CPU's).")] = None,
    device: Annotated[str | None, typer.Option(
        help="auto, cpu or cuda (default: the config's [train] device).")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="Ray cluster to join (default: start a local one).")] = None,
    gpus_per_trial: Annotated[float | None, typer.Option(
        "--gpus-per-trial", help="Ray: GPU share per trial (default: 1/parallel on CUDA, "
        "none on the CPU).")] = None,
    final: Annotated[bool, typer.Option(
        "--final/--no-final", help="Train the best configuration once more and roll out the "
        "test windows (the only time they are read).")] = True,
    out_dir: Annotated[str | None, typer.Option(
        "--out", help="Study directory (default: FOXHUNT_HOME/studies/STUDY, STUDY the study's "
        "name). "
        + OUT_DIR_RULE.format(folder="studies"))] = None,
    as_json: JsonOpt = False,
) -> None:
    # the help is TUNE_HELP (one paragraph, so --help re-flows it)
    _need_optuna(backend)
    from foxhunt.cli.data import instrument_registry, open_store
    from foxhunt.cli.train import write_source
    from foxhunt.configbase import validate_config
    from foxhunt.data.series import BarSpec
    from foxhunt.devices import resolve_device
    from foxhunt.metrics import periods_per_year
    from foxhunt.profiles import choose_profile
    from foxhunt.tune.objective import TrialContext
    from foxhunt.tune.space import load_space
    from foxhunt.tune.storage import default_storage_url
    from foxhunt.tune.study import TuneConfig, one_line, read_study, run_final

    resolved = settings_of(ctx)
    settings = resolved.settings
    base = settings.training_spec()
    updates: dict[str, dict[str, Any]] = {}
    if folds is not None:
        updates["walkforward"] = {"folds": folds}
    for key, value in (("epochs", epochs), ("updates_per_fold", updates_per_fold),
                       ("device", device)):
        if value is not None:
            updates.setdefault("train", {})[key] = value
    if updates:
        base = base.with_overrides(updates, "command-line options")
    searched = load_space(space, base)
    choice = choose_profile(profile)
    dev = resolve_device(base.train.device)
    bars = resolve_bars(ctx, symbol, bars)
    name = study or f"{symbol}-{bars.replace(':', '')}-{sampler}"
    config = validate_config(TuneConfig, {
        "name": name, "storage": storage or default_storage_url(resolved.home), "trials": trials,
        "sampler": sampler, "parallel": parallel, "backend": backend, "metric": metric,
        "pruner": pruner, "particles": particles, "seed": seed, "ray_address": ray_address,
        "gpus_per_trial": gpus_per_trial}, "foxhunt tune options")
    instrument = instrument_registry(ctx).get(symbol)
    with open_store(ctx) as store:
        frame = store.read_bars(symbol, BarSpec.parse(bars))
    ppy = periods_per_year(BarSpec.parse(bars), instrument.session, frame.ts)
    root = under_home(ctx, out_dir, "studies") or resolved.home / "studies" / name
    # K trials share the CPU's cores: one intra-op thread pool per trial, not K oversubscribed.
    threads = max(1, (os.cpu_count() or 1) // parallel) if dev.type == "cpu" else None
    trial_ctx = TrialContext(frame, instrument, settings.features, base, choice.profile, ppy,
                             metric, root, device=dev.type, threads=threads)
    source = {"symbol": symbol, "bars": bars, "rows": len(frame)}
    if not as_json:
        err.print(f"tuning {symbol} {bars} ({len(frame):,} bars): {trials} trials, {sampler}, "
                  f"{parallel} at once ({backend}) on {dev}, GPU profile {choice.profile.name}, "
                  f"searching {searched.summary()} -> {root}", soft_wrap=True)
        fills = {k: v for k, v in base.profile_fills(choice.profile).items()
                 if k not in set(searched.keys())}
        err.print(choice.describe(fills), soft_wrap=True, markup=False, highlight=False)
        if "train.updates_per_fold" in fills:  # as in `foxhunt train`'s budget lines
            err.print(f"budget: a fold's updates follow its training window ([train] samples_per_"
                      f"bar), at most {fills['train.updates_per_fold']:,}", soft_wrap=True)
    doc = _run_with_progress(config, trial_ctx, searched, source, resume, quiet=as_json)
    # From here the study's result is in study.json: a late step that fails is one line, and
    # the result is still printed (the exit status then says something failed).
    late = list(doc.get("late_errors") or [])
    final_run = None
    if final and doc["best"] is not None:
        final_dir = root / "final"
        if not as_json:
            err.print(f"training the best configuration (trial {doc['best']['number']}) once more "
                      f"and rolling out the test windows -> {final_dir}", soft_wrap=True)
        try:
            write_source(final_dir, symbol, bars, settings.features, frame)
            final_run = run_final(trial_ctx, doc["best"]["params"], final_dir,
                                  on_fold=None if as_json else
                                  lambda r: err.print(r.verdict, soft_wrap=True, markup=False))
            doc = read_study(root)
        except Exception as exc:  # noqa: BLE001 (the study's result must still be shown)
            late.append(f"the final test rollout: {one_line(exc)}")
    if as_json:
        emit_json("tune.study", {"study_dir": str(root), **doc, "late_errors": late})
    else:
        _print_result(doc, root, final_run, late)
    if late:
        raise typer.Exit(1)


def _print_result(doc: dict[str, Any], root: Path, final_run, late: list[str]) -> None:
    """The study's table, DSR, PBO, importance and where it lies; then the final run's folds;
    then one line per late step that failed."""
    from foxhunt.cli.train import print_fold_table
    from foxhunt.tune.study import BEST_FILE, one_line

    try:
        _print_study(doc)
    except Exception as exc:  # noqa: BLE001
        late.append(f"printing the study: {one_line(exc)}")
        best = doc.get("best") or {}
        out.print(f"best trial {best.get('number')}: {doc.get('metric')} {best.get('value')} "
                  f"{best.get('params')}", soft_wrap=True, markup=False)
    out.print(f"study: {root}", soft_wrap=True)
    if (root / BEST_FILE).is_file() and doc.get("best") is not None:
        out.print(f"best configuration: {root / BEST_FILE}", soft_wrap=True)
    if final_run is not None:
        try:
            print_fold_table(final_run)
        except Exception as exc:  # noqa: BLE001
            late.append(f"printing the final run: {one_line(exc)}")
    for line in late:
        err.print(f"error: {line}", soft_wrap=True, markup=False, highlight=False)


def _run_with_progress(config, trial_ctx, searched, source, resume: bool, quiet: bool):
    from foxhunt.cli.train import progress_bar
    from foxhunt.tune.study import counted_trials, run_study

    if quiet:
        return run_study(config, trial_ctx, searched, source, resume)
    progress = progress_bar()
    best: list[float] = []

    def on_trial(outcome, study) -> None:
        if outcome.value is not None:
            best[:] = [max(best + [outcome.value])]
        shown = "—" if outcome.value is None else f"{outcome.value:+.3f}"
        line = (f"trial {outcome.number}: {outcome.state} {shown} in {outcome.seconds:.1f} s"
                + (f" ({outcome.error})" if outcome.error else ""))
        progress.console.print(line, soft_wrap=True, markup=False, highlight=False)
        status = f"best {best[0]:+.3f}" if best else "no finished trial yet"
        progress.update(task, completed=len(counted_trials(study)), status=status)

    with progress:
        task = progress.add_task("trials", total=config.trials, status="starting")
        return run_study(config, trial_ctx, searched, source, resume, on_trial)


def _print_study(doc: dict[str, Any]) -> None:
    rows = sorted((t for t in doc["trials"] if t["value"] is not None), key=lambda t: -t["value"])
    keys = doc["space_keys"]
    if doc.get("kind_searched"):  # a column per shared key; each kind's own keys in one column
        own = {k for mine in (doc.get("kind_keys") or {}).values() for k in mine}
        keys = [k for k in keys if k != "agent.kind" and k not in own]
        body = [[t["number"], t["state"], t.get("kind", ""), _num(t["value"])]
                + [_param(t["params"].get(k)) for k in keys]
                + [", ".join(f"{k.split('.', 1)[1]} {_param(v)}" for k, v in t["params"].items()
                             if k in own)] for t in rows[:10]]
        head = ["trial", "state", "kind", doc["metric"], *keys, "its kind's own"]
    else:
        body = [[t["number"], t["state"], _num(t["value"])]
                + [_param(t["params"].get(k)) for k in keys] for t in rows[:10]]
        head = ["trial", "state", doc["metric"], *keys]
    out.print(rich_table(f"study {doc['study']}: best {len(body)} of {len(doc['trials'])} trials "
                         f"(validation {doc['metric']}, mean over folds)", head, body))
    if doc.get("kind_searched"):
        _print_kinds(doc)
    dsr, pbo = doc.get("deflated_sharpe") or {}, doc.get("pbo") or {}
    if dsr.get("dsr") is not None:
        out.print(f"deflated Sharpe ratio {dsr['dsr']:.3f}: per-bar Sharpe {dsr['sharpe']:.4f} "
                  f"against {dsr['sr0']:.4f} expected from the best of {dsr['n_trials']} "
                  f"zero-skill trials (variance of the trials' Sharpe {dsr['variance']:.3g})")
    else:
        out.print(f"deflated Sharpe ratio: n/a ({dsr.get('reason', '')})")
    if pbo.get("pbo") is not None:
        out.print(f"probability of backtest overfitting {pbo['pbo']:.3f} (CSCV: {pbo['splits']:,} "
                  f"splits of {pbo['n_obs']:,} validation bars of {pbo['n_trials']} trials)")
    else:
        out.print(f"probability of backtest overfitting: n/a ({pbo.get('reason', '')})")
    out.print(_importance_line(doc), soft_wrap=True, markup=False, highlight=False)
    thr = doc.get("throughput") or {}
    if thr.get("trials_per_hour"):
        out.print(f"throughput: {thr['trials_per_hour']:,.0f} trials/hour ({thr['trials']} trials "
                  f"in {thr['wall_s']:.1f} s, {thr['parallel']} at once, {thr['backend']})")


def _print_kinds(doc: dict[str, Any]) -> None:
    """Per learner kind: trials, completed, best and median score; then which kind won."""
    body = [[r["kind"], r["trials"], r["completed"], r["pruned"], r["failed"], _num(r["best"]),
             _num(r["median"]), "—" if r["best_trial"] is None else r["best_trial"]]
            for r in doc.get("by_kind", [])]
    out.print(rich_table(f"learners: validation {doc['metric']} by kind (one objective for all)",
                         ["kind", "trials", "completed", "pruned", "failed", "best", "median",
                          "best trial"], body))
    won = doc.get("kind_won")
    if won is None:
        out.print("kind won: none yet (no trial completed)")
    else:
        best = doc["best"]
        out.print(f"kind won: {won} (trial {best['number']}, {doc['metric']} "
                  f"{best['value']:+.3f})")


def _importance_line(doc: dict[str, Any]) -> str:
    from foxhunt.tune.study import IMPORTANCE_METHODS

    imp, note = doc.get("importance") or {}, doc.get("importance_note")
    if not imp:
        return f"parameter importance: n/a ({note or 'not computed'})"
    method = IMPORTANCE_METHODS.get(doc.get("importance_method") or "", "")
    how = "; ".join(x for x in (method, note) if x)
    shares = ", ".join(f"{k} {v:.2f}" for k, v in sorted(imp.items(), key=lambda kv: -kv[1]))
    return f"parameter importance{f' ({how})' if how else ''}: {shares}"


def _param(v: Any) -> str:
    if v is None:  # a key the trial's kind does not search
        return "—"
    return f"{v:.4g}" if isinstance(v, float) else str(v)

