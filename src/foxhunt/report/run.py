"""Report data for a walk-forward run directory: every fold's selected checkpoint backtested on
its own test window next to the baselines, plus the fold table and the training curves.

The test windows are the ones the trainer recorded; nothing here chooses anything, so the report
shows exactly what the walk-forward protocol produced.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from foxhunt.backtest import (
    BacktestResult,
    checkpoint_policy,
    parse_strategy,
    report_series,
    run_backtest,
)
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.errors import FoxhuntError
from foxhunt.features.config import FeatureConfig
from foxhunt.training.config import TrainingSpec

BASELINES = ("buy-and-hold", "sma:10,30", "flat")
SOURCE_FILE = "source.json"


class FoldResults(list):
    """One fold's backtests ([agent, *baselines]), with what the report needs of the bars it
    ran on: `window_times` (window name -> [first bar's ts, last bar's ts], ns) and the
    instrument's `tick_size`. `backtest_run` fills both, so `run_report_data` shows the folds'
    windows as dates without being handed the bars again."""

    window_times: dict[str, list[int]]
    tick_size: float | None

    def __init__(self, results: list[BacktestResult], window_times: dict[str, list[int]],
                 tick_size: float | None):
        super().__init__(results)
        self.window_times = window_times
        self.tick_size = tick_size


def window_times(windows: dict[str, list[int]], ts) -> dict[str, list[int]]:
    """[first, last] bar timestamps (ns) of each `[start, stop)` bar window inside `ts`."""
    out = {}
    for name, (start, stop) in windows.items():
        if 0 <= start < stop <= len(ts):
            out[name] = [int(ts[start]), int(ts[stop - 1])]
    return out


def read_run(run_dir: Path) -> dict[str, Any]:
    """spec.json, source.json, folds.json and run.jsonl of a run directory, checked."""
    run_dir = Path(run_dir)
    docs: dict[str, Any] = {}
    for name in ("spec.json", SOURCE_FILE, "folds.json"):
        path = run_dir / name
        if not path.is_file():
            raise FoxhuntError(f"{run_dir}: not a finished foxhunt run (no {name}); "
                               "run `foxhunt train ... --out DIR` first")
        try:
            docs[name] = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise FoxhuntError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    log = run_dir / "run.jsonl"
    docs["training"] = [json.loads(x) for x in log.read_text().splitlines() if x] if log.exists() else []
    return docs


def backtest_run(run_dir: Path, bars: Bars, instrument: Instrument, *, costs: bool = True,
                 device: str | None = None, periods_per_year: float | None = None,
                 baselines: tuple[str, ...] = BASELINES) -> list[list[BacktestResult]]:
    """Per fold: [agent, *baselines] over the fold's test window; "agent" is what the fold
    deployed: its checkpoint, or flat where the deploy rule found no edge on validation."""
    docs = read_run(run_dir)
    spec = TrainingSpec.model_validate(docs["spec.json"])
    features = FeatureConfig.model_validate(docs[SOURCE_FILE]["features"])
    out = []
    for fold in docs["folds.json"]:
        start, stop = fold["windows"]["test"]
        if stop > len(bars):
            raise FoxhuntError(f"{run_dir}: fold {fold['fold']} tests bars up to {stop}, the series "
                               f"has {len(bars)}; backtest it on the series it was trained on")
        if fold.get("deployed") == "flat":
            policies = {"agent": parse_strategy("flat")}
        else:
            policies = {"agent": checkpoint_policy(fold["checkpoint"], bars, instrument, device,
                                                   features=features, label="agent")}
        policies.update({name: parse_strategy(name) for name in baselines})
        results = run_backtest(bars, instrument, policies=policies, windows=[(start, stop)],
                               env_config=spec.env, costs=costs, device=device,
                               capital=spec.train.capital, periods_per_year=periods_per_year)
        out.append(FoldResults(results, window_times(fold["windows"], bars.ts),
                               instrument.tick_size))
    return out


def run_report_data(run_dir: Path, per_fold: list[list[BacktestResult]], bars: Bars | None = None,
                    tick_size: float | None = None) -> dict[str, Any]:
    """The report data of a run: its folds (windows as dates: from `bars`, the series the run
    was trained on, else from what `backtest_run` recorded), every fold's test window as a
    series, the metrics and the training log."""
    docs = read_run(run_dir)
    source = docs[SOURCE_FILE]
    series, metrics, folds = [], [], []
    ppy = None
    for fold, results in zip(docs["folds.json"], per_fold):
        name = f"fold {fold['fold']} test"
        series.append({**report_series(results, name, primary="agent"), "fold": fold["fold"]})
        metrics += [{"policy": r.name, "window": name, **r.metrics} for r in results]
        ppy = ppy or next((r.metrics.get("periods_per_year") for r in results), None)
        tick_size = tick_size or getattr(results, "tick_size", None)
        row = {k: fold[k] for k in ("fold", "windows", "best_epoch", "val", "test", "baselines",
                                    "deployed", "deploy", "verdict") if k in fold}
        times = (window_times(fold["windows"], bars.ts) if bars is not None
                 else getattr(results, "window_times", None))
        if times:
            row["window_times"] = times
        folds.append(row)
    baselines = list(dict.fromkeys(r.name for results in per_fold for r in results
                                   if r.name != "agent"))
    against = f" against {', '.join(baselines)}" if baselines else ""
    return {
        "title": (f"{source['symbol']} {source['bars']} walk-forward run {Path(run_dir).name}: "
                  f"the agent's test windows{against}"),
        "kind": "run",
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "symbol": source["symbol"],
        "bars": source["bars"],
        **({"tick_size": tick_size} if tick_size else {}),
        **({"periods_per_year": ppy} if ppy else {}),
        "folds": folds,
        "training": docs["training"],
        "series": series,
        "metrics": metrics,
    }
