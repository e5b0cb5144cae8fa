"""Performance metrics on per-bar PnL, shared by training (validation Sharpe) and evaluation.

Conventions: `pnl` is money per bar (after costs); returns are `pnl / capital` (a futures account
earns on margin, so a fixed notional capital is the honest denominator). Sharpe is annualised
by `sqrt(periods_per_year)` with a zero risk-free rate; std uses ddof=1.
"""

from __future__ import annotations

import math

import numpy as np

NS_PER_YEAR = 365.25 * 24 * 3600 * 1e9


def sharpe(returns: np.ndarray, periods_per_year: float = 1.0) -> float:
    r = np.asarray(returns, dtype=np.float64)
    if r.size < 2:
        return 0.0
    sd = r.std(ddof=1)
    if not sd > 0:
        return 0.0
    return float(r.mean() / sd * math.sqrt(periods_per_year))


def max_drawdown(equity: np.ndarray) -> float:
    """Largest peak-to-trough fall of an equity curve, as a positive fraction of the peak."""
    e = np.asarray(equity, dtype=np.float64)
    if e.size == 0:
        return 0.0
    peak = np.maximum.accumulate(e)
    with np.errstate(divide="ignore", invalid="ignore"):
        dd = np.where(peak > 0, (peak - e) / peak, 0.0)
    return float(dd.max())


def periods_per_year_from_ts(ts: np.ndarray) -> float:
    """Bars per year as observed in a series: bars / elapsed years (gaps and sessions included)."""
    t = np.asarray(ts, dtype=np.int64)
    if t.size < 2 or t[-1] <= t[0]:
        return 1.0
    return float((t.size - 1) / ((t[-1] - t[0]) / NS_PER_YEAR))
