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
        out.append(run_backtest(bars, instrument, policies=policies, windows=[(start, stop)],
                                env_config=spec.env, costs=costs, device=device,
                                capital=spec.train.capital, periods_per_year=periods_per_year))
    return out


def run_report_data(run_dir: Path, per_fold: list[list[BacktestResult]]) -> dict[str, Any]:
    docs = read_run(run_dir)
    source = docs[SOURCE_FILE]
    series, metrics = [], []
    for fold, results in zip(docs["folds.json"], per_fold):
        name = f"fold {fold['fold']} test"
        series.append(report_series(results, name, primary="agent"))
        metrics += [{"policy": r.name, "window": name, **r.metrics} for r in results]
    return {
        "title": f"{source['symbol']} {source['bars']} walk-forward: {Path(run_dir).name}",
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "symbol": source["symbol"],
        "bars": source["bars"],
        "folds": [{k: fold[k] for k in ("fold", "windows", "best_epoch", "val", "test", "baselines",
                                        "deployed", "deploy", "verdict") if k in fold}
                  for fold in docs["folds.json"]],
        "training": docs["training"],
        "series": series,
        "metrics": metrics,
    }
