"""How numbers and metric names appear in the report's tables.

Metric values are fractions where the name says so (`PERCENT`: 0.052 shows as 5.20%), whole
numbers for counts (`INTEGER`), money with thousands separators (`MONEY`), everything else
with two decimals. None, NaN and missing values show as an em dash.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

DASH = "\u2014"

PERCENT = frozenset(
    {
        "return",
        "total_return",
        "cagr",
        "annual_return",
        "max_drawdown",
        "max_dd",
        "volatility",
        "annual_volatility",
        "annual_volatility_per_bar",
        "annualised_volatility",
        "win_rate",
        "exposure",
        "flat",
        "flat_fraction",
        "time_flat",
        "hit_rate",
    }
)
INTEGER = frozenset(
    {
        "trades",
        "n_trades",
        "num_trades",
        "bars",
        "sessions",
        "fold",
        "epoch",
        "best_epoch",
        "max_drawdown_duration",
        "drawdown_duration",
        "max_dd_duration",
        "bars_held",
        "transitions",
    }
)
MONEY = frozenset({"pnl", "total_pnl", "avg_trade", "average_trade", "costs", "cost", "equity"})

LABELS = {
    "sharpe": "Sharpe",
    "sharpe_basis": "Sharpe basis",
    "sharpe_per_bar": "Sharpe per-bar",
    "sortino": "Sortino",
    "sortino_per_bar": "Sortino per-bar",
    "annual_volatility_per_bar": "Ann. vol per-bar",
    "calmar": "Calmar",
    "cagr": "CAGR",
    "return": "Return",
    "total_return": "Total return",
    "max_drawdown": "Max DD",
    "max_dd": "Max DD",
    "max_drawdown_duration": "Max DD bars",
    "pnl": "PnL",
    "total_pnl": "Total PnL",
    "avg_trade": "Avg trade",
    "average_trade": "Avg trade",
    "win_rate": "Win rate",
    "profit_factor": "Profit factor",
    "psr": "PSR",
    "dsr": "DSR",
    "annual_volatility": "Ann. vol",
    "volatility": "Volatility",
    "trades": "Trades",
    "n_trades": "Trades",
    "flat": "Time flat",
    "mean_q": "Mean Q",
    "td_p99": "TD error p99",
    "grad_norm": "Grad norm",
}

ALIASES = {
    "return": ("return", "total_return"),
    "max_drawdown": ("max_drawdown", "max_dd"),
    "trades": ("trades", "n_trades", "num_trades"),
}
"""Fold-table column -> metric names it accepts, first found wins."""


def pick(metrics: dict[str, Any], name: str) -> Any:
    """The value of `name` (or one of its aliases) in `metrics`, else None."""
    for key in ALIASES.get(name, (name,)):
        if key in metrics:
            return metrics[key]
    return None


def label(name: str) -> str:
    """Column header for a metric name: a known label, else the name in sentence case."""
    if name in LABELS:
        return LABELS[name]
    text = name.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_number(value: Any, decimals: int = 2) -> str:
    """Two decimals with thousands separators; tiny non-zero values keep two significant digits."""
    if is_missing(value):
        return DASH
    if isinstance(value, str):
        return value
    v = float(value)
    if math.isinf(v):
        return "\u221e" if v > 0 else "\u2212\u221e"
    if v != 0 and abs(v) < 0.5 * 10**-decimals:
        text = f"{v:.2g}"
    else:
        text = f"{v:,.{decimals}f}"
    return text.replace("-", "\u2212")


def fmt_percent(value: Any) -> str:
    if is_missing(value) or isinstance(value, str):
        return fmt_number(value)
    v = float(value)
    if math.isinf(v):
        return fmt_number(v)
    return f"{100 * v:,.2f}%".replace("-", "\u2212")


def fmt_integer(value: Any) -> str:
    if is_missing(value) or isinstance(value, str) or math.isinf(float(value)):
        return fmt_number(value)
    return f"{round(float(value)):,}".replace("-", "\u2212")


def fmt_metric(name: str, value: Any) -> str:
    """A metric value formatted by its name (see the module docstring)."""
    if name in PERCENT:
        return fmt_percent(value)
    if name in INTEGER:
        return fmt_integer(value)
    return fmt_number(value)


def fmt_window_bound(value: Any) -> str:
    """A window bound: ns timestamps (>= 1e15) as UTC dates, bar indices as integers."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_missing(value):
        if abs(value) >= 1e15:
            return fmt_time(int(value), date_only=True)
        return fmt_integer(value)
    return DASH if is_missing(value) else str(value)


def fmt_time(ns: int, date_only: bool = False) -> str:
    """ns since the epoch as `YYYY-MM-DD HH:MM` UTC (or the date alone)."""
    d = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return d.strftime("%Y-%m-%d" if date_only else "%Y-%m-%d %H:%M")
