"""Honest rule baselines for a walk-forward fold: the rule is chosen on validation, judged on test.

An agent's test Sharpe means little alone: the question is whether it beats what a simple rule
finds on the same bars. `fold_baselines` evaluates a grid of SMA-cross and z-score-fade rules on
the fold's validation window, keeps the one with the best validation Sharpe, and reports that
rule's test-window result beside flat, buy-and-hold and (where the market has one) an oracle,
all through the backtester, i.e. the env's fill and cost model. The choice sees only the bars
before the validation window's end: the test window is read once, for the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from foxhunt.backtest.engine import Backtester, Job
from foxhunt.backtest.results import BacktestResult
from foxhunt.backtest.strategies import (
    BuyAndHold,
    FixedSides,
    Flat,
    SmaCross,
    TablePolicy,
    ZScoreFade,
)
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.env.config import EnvConfig
from foxhunt.errors import ConfigError
from foxhunt.training.walkforward import Fold, Window

SMA_GRID = ((2, 10), (5, 20), (5, 60), (10, 100), (20, 200), (50, 400), (100, 800))
"""(fast, slow) pairs from minutes-scale momentum to half-day trends."""
ZFADE_GRID = tuple((k, e) for k in (20, 60, 200) for e in (1.0, 1.5, 2.0))
"""(lookback, entry z) pairs; every fade exits at the mean."""
REPORTED = ("sharpe", "total_pnl", "total_return", "max_drawdown", "bars", "costs_paid")
"""Keys of each test result; `sharpe` here is the per-bar annualised Sharpe (below)."""


def default_rules() -> tuple[TablePolicy, ...]:
    """The grid searched by default: SMA crosses (long/short) and z-score fades."""
    return (*(SmaCross(f, s) for f, s in SMA_GRID), *(ZScoreFade(k, e) for k, e in ZFADE_GRID))


@dataclass(frozen=True)
class FoldBaselines:
    """One fold's baselines. `val` is every rule's validation Sharpe (the only thing the choice
    read); `test` holds flat, buy_and_hold, rule (the chosen one) and oracle (when given)."""

    fold: int
    windows: dict[str, list[int]]
    chosen: str
    val: dict[str, float]
    test: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"fold": self.fold, "windows": self.windows, "chosen": self.chosen,
                "val": self.val, "test": self.test}


def sharpe_of(result: BacktestResult) -> float:
    """The result's per-bar annualised Sharpe (`sharpe_per_bar`), 0.0 where undefined (no
    variance), for ranking. Per-bar, not the backtest's headline (daily where a window spans
    enough sessions): it is the trainer's basis, so the chosen rule's figures compare with the
    agent's walk-forward figures, and short validation windows rank on the same scale as long
    ones."""
    s = result.metrics.get("sharpe_per_bar")
    return 0.0 if s is None else float(s)


def choose_rule(bars: Bars, instrument: Instrument, val: Window,
                rules: Sequence[TablePolicy] | None = None, *, env_config: EnvConfig | None = None,
                costs: bool = True, periods_per_year: float | None = None,
                device: torch.device | str | None = "cpu") -> tuple[TablePolicy, dict[str, float]]:
    """The rule with the best Sharpe on `val` (the first in grid order on a tie) and every
    rule's validation Sharpe. Only bars [0, val.stop) are handed to the backtester, so nothing
    after the validation window can sway the choice."""
    rules = tuple(rules if rules is not None else default_rules())
    if not rules:
        raise ConfigError("choose_rule: no rules given")
    labels = [r.label for r in rules]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"choose_rule: rule labels must be unique, got {labels}")
    if not 0 <= val.start < val.stop <= len(bars):
        raise ConfigError(f"choose_rule: validation window [{val.start}, {val.stop}) lies outside "
                          f"the {len(bars)} bars")
    head = bars.slice(0, val.stop)
    tester = Backtester(head, instrument, env_config, costs=costs, device=device,
                        periods_per_year=periods_per_year)
    results = tester.run([Job(r.label, r, (val.start, val.stop)) for r in rules])
    scores = {r.label: sharpe_of(res) for r, res in zip(rules, results, strict=True)}
    best = max(range(len(rules)), key=lambda i: (scores[labels[i]], -i))
    return rules[best], scores


def fold_baselines(bars: Bars, instrument: Instrument, fold: Fold,
                   rules: Sequence[TablePolicy] | None = None, *,
                   oracle_side: np.ndarray | None = None, env_config: EnvConfig | None = None,
                   costs: bool = True, periods_per_year: float | None = None,
                   device: torch.device | str | None = "cpu") -> FoldBaselines:
    """Choose a rule on `fold.val`, then run flat, buy-and-hold, the chosen rule and the oracle
    (`oracle_side[t]`: +1/-1/0 decided at the close of bar t) over `fold.test`."""
    if not fold.test.stop <= len(bars):
        raise ConfigError(f"fold {fold.index}: test window ends at bar {fold.test.stop}, the "
                          f"series has {len(bars)} bars")
    rule, scores = choose_rule(bars, instrument, fold.val, rules, env_config=env_config,
                               costs=costs, periods_per_year=periods_per_year, device=device)
    policies: dict[str, TablePolicy] = {"flat": Flat(), "buy_and_hold": BuyAndHold(), "rule": rule}
    if oracle_side is not None:
        policies["oracle"] = FixedSides(np.asarray(oracle_side), label="oracle")
    tester = Backtester(bars, instrument, env_config, costs=costs, device=device,
                        periods_per_year=periods_per_year)
    window = (fold.test.start, fold.test.stop)
    results = tester.run([Job(name, p, window) for name, p in policies.items()])
    test = {name: _report(res) for name, res in zip(policies, results, strict=True)}
    windows = {name: [w.start, w.stop] for name, w in (("train", fold.train), ("val", fold.val),
                                                       ("test", fold.test))}
    return FoldBaselines(fold.index, windows, rule.label, scores, test)


def _report(result: BacktestResult) -> dict[str, Any]:
    out = {k: result.metrics.get(k) for k in REPORTED}
    out["sharpe"] = sharpe_of(result)
    out["trades"] = len(result.trades)
    out["flat"] = float((result.position[1:] == 0).mean()) if len(result.position) > 1 else 1.0
    return out
