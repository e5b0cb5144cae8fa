"""`foxhunt backtest` and `foxhunt report`: honest out-of-sample numbers, and one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from foxhunt.cli.common import (
    ONE_POLICY,
    RUN_DIR_RULE,
    BarsOpt,
    DeviceOpt,
    FromOpt,
    JsonOpt,
    ToOpt,
    emit_json,
    out,
    parse_ts,
    resolve_bars,
    rich_table,
    settings_of,
    under_home,
    working,
)
from foxhunt.cli.data import instrument_registry, open_store
from foxhunt.errors import ConfigError, DataError, FoxhuntError


def register(app: typer.Typer) -> None:
    app.command()(backtest)
    app.command("report")(report_cmd)


def load_series(ctx: typer.Context, symbol: str, bars: str):
    from foxhunt.data.series import BarSpec
    from foxhunt.metrics import periods_per_year

    instrument = instrument_registry(ctx).get(symbol)
    spec = BarSpec.parse(bars)
    with open_store(ctx) as store:
        frame = store.read_bars(symbol, spec)
    return instrument, frame, periods_per_year(spec, instrument.session, frame.ts)


def load_traded_series(ctx: typer.Context, symbol: str, bars: str):
    """(instrument, stored bars) of a symbol to trade or play: one of the instruments file, or
    a stored contract month (ESZ24), which trades by its root's spec (tick, point value,
    commission, session), as paper's months do. `foxhunt live` and `foxhunt venue` take it."""
    from foxhunt.data.contracts import is_contract_symbol

    registry = instrument_registry(ctx)
    if not is_contract_symbol(symbol, registry):
        return load_series(ctx, symbol, bars)[:2]
    with open_store(ctx) as store:
        month = next((c for c in store.contracts() if c.symbol == symbol), None)
        if month is None:
            raise DataError(f"{symbol}: no such contract month stored; import it (foxhunt data "
                            f"import {symbol}.csv --symbol ...) or give a stored month's symbol")
        frame = store.read_bars(symbol, bars)
    return registry.get(month.root).model_copy(update={"symbol": symbol}), frame


def _today():
    from datetime import UTC, datetime

    return datetime.now(UTC).date()


def refuse_continuous(ctx: typer.Context, symbol: str, bars: str, command: str) -> None:
    """`foxhunt live` and `foxhunt venue` trade one symbol's own prices and never roll: on a
    stored continuous series they would trade the stitched prices and hold a position past its
    month's expiry, so it is refused in one line naming the month to trade instead
    (docs/futures.md)."""
    with open_store(ctx) as store:
        if store.continuous(symbol, bars) is None:
            return
        months = store.contracts(symbol)
    today = _today()
    front = next((c for c in months if c.expiry >= today), None)
    if front is not None:
        instead = f"{command} {front.symbol}, the front month stored"
    else:
        last = f"end with {months[-1].symbol}, expired" if months else "are gone"
        instead = (f"the stored months {last}: import the front month's bars (foxhunt data "
                   f"import FILE --symbol {symbol}) and trade it")
    raise ConfigError(
        f"{symbol} {bars} is a continuous series, and {command} does not roll a position "
        f"yet (it would trade the stitched prices and never roll): trade the front month's own "
        f"symbol instead ({instead})")


def _window(frame, start: str | None, end: str | None, what: str = "a backtest") -> tuple[int, int]:
    """Bar rows [lo, hi) of --from/--to; `what` names the calling command in the error."""
    import numpy as np

    lo = 0 if start is None else int(np.searchsorted(frame.ts, parse_ts(start, "--from"), "left"))
    hi = len(frame) if end is None else int(np.searchsorted(frame.ts, parse_ts(end, "--to"), "right"))
    if hi - lo < 3:
        raise FoxhuntError(f"--from/--to select {max(hi - lo, 0)} bars; {what} needs at least 3")
    return lo, hi


def _metrics_rows(results) -> list[dict[str, Any]]:
    return [{"policy": r.name, "window": list(r.window), "trades": len(r.trades), **r.metrics}
            for r in results]


def _print_metrics(title: str, rows: list[dict[str, Any]]) -> None:
    """The results table, with the basis of its Sharpe in the header (or a column where rows
    differ) and one line per basis under it (docs/metrics.md)."""
    from foxhunt.metrics import PER_BAR, sharpe_basis_lines

    def pct(v):
        return "—" if v is None else f"{v:+.2%}"

    def num(v):
        return "—" if v is None else f"{v:+.2f}"

    def count(v):
        return "—" if v is None else f"{v:,}"

    bases = list(dict.fromkeys(r.get("sharpe_basis") or PER_BAR for r in rows))
    one = len(bases) == 1
    head = ["policy", "window", "sessions", f"Sharpe ({bases[0]})" if one else "Sharpe"]
    head += [] if one else ["basis"]
    head += ["return", "max DD", "trades", "win rate"]
    body = []
    for r in rows:
        cells = [r["policy"], f"{r['window'][0]}..{r['window'][1]}", count(r.get("sessions")),
                 num(r.get("sharpe"))]
        cells += [] if one else [r.get("sharpe_basis") or PER_BAR]
        cells += [pct(r.get("total_return")), pct(r.get("max_drawdown")), r["trades"],
                  pct(r.get("win_rate"))]
        body.append(cells)
    out.print(rich_table(title, head, body))
    for line in sharpe_basis_lines(rows):
        out.print(line)


def backtest(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol with stored bars.")],
    run: Annotated[str | None, typer.Option("--run", help="Run directory: every fold's model on "
                                             "its test window. " + RUN_DIR_RULE + ONE_POLICY)] = None,
    checkpoint: Annotated[Path | None, typer.Option(
        help="One checkpoint file." + ONE_POLICY)] = None,
    strategy: Annotated[list[str] | None, typer.Option(
        help="A rule strategy (repeatable): flat | buy-and-hold | sma:FAST,SLOW[,long-flat] | "
        "zfade:LOOKBACK,ENTRY[,EXIT] | random:SEED." + ONE_POLICY)] = None,
    bars: BarsOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    costs: Annotated[bool, typer.Option("--costs/--no-costs", help="Commission and slippage.")] = True,
    report: Annotated[Path | None, typer.Option(
        help="Write an HTML report here (default: none).")] = None,
    trades: Annotated[Path | None, typer.Option(
        help="Write the trade list here, .csv, .parquet or .json (default: none).")] = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Backtest a run, a checkpoint or baseline strategies through the training env's fill model."""
    from foxhunt.backtest import checkpoint_policy, parse_strategy, run_backtest, write_trades
    from foxhunt.devices import resolve_device
    from foxhunt.report import write_report
    from foxhunt.report.run import run_report_data

    chosen = [x for x in (run, checkpoint, strategy) if x]
    if len(chosen) != 1:
        raise FoxhuntError("backtest: give exactly one of --run DIR, --checkpoint FILE or --strategy S")
    dev = resolve_device(device)
    bars = resolve_bars(ctx, symbol, bars)
    run = under_home(ctx, run, existing=True)
    instrument, frame, ppy = load_series(ctx, symbol, bars)
    series = _continuous(ctx, instrument, bars, frame)
    if run is not None:
        with working(f"backtesting every fold of {run}"):
            per_fold = _backtest_folds(run, symbol, bars, series, frame, instrument,
                                       costs=costs, device=dev, periods_per_year=ppy)
        results = [r for fold in per_fold for r in fold]
    else:
        window = _window(frame, start, end)
        env_config = settings_of(ctx).settings.env
        if checkpoint is not None:
            from foxhunt.report.run import BASELINES
            from foxhunt.training.checkpoint import load_policy

            policy = load_policy(checkpoint)
            env_config = policy.spec.env
            features = (None if "feature_config" in policy.metadata  # else the settings' features
                        else settings_of(ctx).settings.features)
            policies = {"agent": checkpoint_policy(policy, frame, instrument, dev, features=features)}
            policies.update({s: parse_strategy(s) for s in BASELINES})
        else:
            policies = {s: parse_strategy(s) for s in strategy}
        if series is not None:
            tester = _rolling(symbol, bars, series, instrument, env_config, costs)
        results = run_backtest(frame, instrument, policies=policies, windows=[window],
                               env_config=env_config, costs=costs, device=dev, periods_per_year=ppy)
        if series is not None:
            results = _refill(symbol, bars, tester, results, ppy)
    rolling = None if series is None else _rolling_doc(series)
    rows = _metrics_rows(results)
    if trades is not None:
        if trades.suffix.lower() == ".csv":  # for people: ISO times, prices on the tick grid
            from foxhunt.report.csvfile import write_results_trades_csv

            write_results_trades_csv(results, trades, instrument.tick_size)
        else:
            write_trades(results, trades)
    if report is not None:
        if run is not None:
            data = run_report_data(run, per_fold, bars=frame)
        else:
            from foxhunt.backtest import report_series

            data = {"title": f"{symbol} {bars} backtest: {', '.join(r.name for r in results)}",
                    "kind": "backtest", "symbol": symbol, "bars": bars,
                    "tick_size": instrument.tick_size, "periods_per_year": ppy,
                    "series": [report_series(results, f"{symbol} {bars}")],
                    "metrics": [{**r, "window": f"bars {r['window'][0]}..{r['window'][1]}"}
                                for r in rows]}
        write_report(data, report)
    if as_json:
        emit_json("backtest", {"symbol": symbol, "bars": bars, "costs": costs, "results": rows,
                   "report": str(report) if report else None, "trades_file": str(trades) if trades else None,
                   **({} if rolling is None else {"rolling": rolling})})
        return
    _print_metrics(f"backtest {symbol} {bars} ({'with' if costs else 'without'} costs)", rows)
    if rolling is not None:
        _print_rolling(symbol, bars, rolling, rows, instrument.currency)
    for path, what in ((trades, "trades"), (report, "report")):
        if path is not None:
            out.print(f"{what}: {path}")


def _backtest_folds(run: Path, symbol: str, bars: str, series, frame, instrument, *,
                    costs: bool = True, device=None, periods_per_year: float | None = None):
    """`report.run.backtest_run`, every fold's results filled across the rolls where `series`
    (the stored continuous series `symbol` `bars` is) is one."""
    from foxhunt.report.run import backtest_run

    if series is not None:  # what cannot be rolled is refused before the folds run
        from foxhunt.report.run import read_run
        from foxhunt.training.config import TrainingSpec

        tester = _rolling(symbol, bars, series, instrument,
                          TrainingSpec.model_validate(read_run(run)["spec.json"]).env, costs)
    per_fold = backtest_run(run, frame, instrument, costs=costs, device=device,
                            periods_per_year=periods_per_year)
    if series is not None:
        for fold in per_fold:  # in place: a fold's list keeps its windows' times
            fold[:] = _refill(symbol, bars, tester, fold, periods_per_year)
    return per_fold


def _continuous(ctx: typer.Context, instrument, bars: str, frame):
    """The stored continuous series `symbol` `bars` is, rebuilt from its months with its roll
    table, or None (backtest.rolling.stored_continuous)."""
    from foxhunt.backtest.rolling import stored_continuous

    with open_store(ctx) as store:
        found = stored_continuous(store, instrument, bars, frame)
    return None if found is None else found[0]


def _rolling(symbol: str, bars: str, series, instrument, env_config, costs: bool):
    """The rolling backtest of a continuous series; what it cannot roll is refused in one line
    before the engine runs."""
    from foxhunt.backtest.rolling import RollingBacktest

    try:
        return RollingBacktest(series, instrument, env_config, costs=costs)
    except ConfigError as exc:
        raise ConfigError(f"{symbol} {bars} is a continuous series, backtested across its rolls: "
                          f"{exc}") from None


def _refill(symbol: str, bars: str, tester, results, ppy):
    """The engine's results filled in the traded contract months, each roll paying its legs."""
    try:
        return tester.refill(results, ppy)
    except ConfigError as exc:
        raise ConfigError(f"{symbol} {bars} is a continuous series, backtested across its rolls: "
                          f"{exc}") from None


def _rolling_doc(series) -> dict[str, Any]:
    """What `--json` says of a backtest across rolls: how the series rolls and its roll table."""
    return {"roll": series.rule.roll, "adjust": series.rule.adjust,
            "contracts": [c.symbol for c in series.contracts],
            "rolls": [r.to_dict() for r in series.rolls]}


def _print_rolling(symbol: str, bars: str, rolling: dict[str, Any], rows, currency: str) -> None:
    out.print(f"filled in {symbol}'s contract months ({', '.join(rolling['contracts'])}), "
              f"rolled by its roll table ({rolling['roll']} roll, {rolling['adjust']} "
              f"adjustment, {len(rolling['rolls'])} rolls: foxhunt data rolls {symbol} --bars "
              f"{bars})", markup=False)
    for r in rows:
        out.print(f"{r['policy']} ({r['window'][0]}..{r['window'][1]}): {r['rolls']} rolls of a "
                  f"held position, their legs' costs {r['roll_costs']:,.2f} {currency}",
                  markup=False)


def report_cmd(
    ctx: typer.Context,
    run_dir: Annotated[str, typer.Argument(
        help="A `foxhunt train` run or `foxhunt tune` study directory. A bare NAME is "
        "FOXHUNT_HOME/runs/NAME or FOXHUNT_HOME/studies/NAME where one exists; a path is used "
        "as given.")],
    out_file: Annotated[Path, typer.Option("--out", help="HTML file to write.")] = Path("report.html"),
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """One self-contained HTML report of a walk-forward run or a `foxhunt tune` study (works
    offline)."""
    study_dir = under_home(ctx, run_dir, "studies", existing=True)
    if (study_dir / "study.json").is_file():
        return report_study(study_dir, out_file, as_json)
    run_dir = under_home(ctx, run_dir, existing=True)
    from foxhunt.devices import resolve_device
    from foxhunt.report import write_report
    from foxhunt.report.run import SOURCE_FILE, read_run, run_report_data

    dev = resolve_device(device)
    source = read_run(run_dir)[SOURCE_FILE]
    symbol, bars = source["symbol"], source["bars"]
    instrument, frame, ppy = load_series(ctx, symbol, bars)
    per_fold = _backtest_folds(run_dir, symbol, bars, _continuous(ctx, instrument, bars, frame),
                               frame, instrument, device=dev, periods_per_year=ppy)
    write_report(run_report_data(run_dir, per_fold, bars=frame), out_file)
    rows = _metrics_rows([r for fold in per_fold for r in fold])
    if as_json:
        emit_json("report.run", {"run_dir": str(run_dir), "report": str(out_file), "results": rows})
    else:
        _print_metrics(f"test windows of {run_dir}", rows)
        out.print(f"report: {out_file}")


def report_study(study_dir: Path, out_file: Path, as_json: bool) -> None:
    """`foxhunt report STUDY_DIR`: the study page (trials, history, importance, parallel
    coordinates, DSR and PBO, the final test run)."""
    from foxhunt.report.study import write_study_report
    from foxhunt.tune.study import read_study

    doc = read_study(study_dir)
    write_study_report(doc, out_file)
    if as_json:
        emit_json("report.study", {"study_dir": str(study_dir), "report": str(out_file)})
    else:
        out.print(f"report: {out_file}")
