"""The page's return figures, all compounded and all through `foxhunt.metrics`.

A series' equity is account value in currency, `capital + cumsum(pnl)`, one value per bar. Its
per-bar returns are those of `foxhunt.metrics.summary`: `pnl / capital`, the PnL of each bar
over the fixed notional capital (the first equity value), so bar 0 (nothing can have filled yet)
is no return. Every return the page shows compounds them (`metrics.total_return`,
`metrics.compounded_equity`): a series' return, its equity and drawdown charts, the chained
out-of-sample curve (the test windows one after the other: its growth is the product of the
windows' growths), the monthly table and the rolling Sharpe (`metrics.sharpe`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from foxhunt import metrics as fm
from foxhunt.report.data import Series

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
ROLLING_POINTS = 400
"""Points at which the rolling Sharpe is evaluated (each a `metrics.sharpe` of its window)."""


def capital(equity: np.ndarray) -> float:
    """The notional capital returns are measured against: the first finite equity value."""
    finite = equity[np.isfinite(equity)]
    return float(finite[0]) if finite.size and finite[0] > 0 else math.nan


def bar_returns(equity: np.ndarray) -> np.ndarray:
    """Per-bar returns `pnl / capital` of bars 1..n-1 (n - 1 values); a bar next to a missing
    equity value counts as no return."""
    e = np.asarray(equity, dtype=np.float64)
    c = capital(e)
    if e.size < 2 or not math.isfinite(c):
        return np.zeros(max(e.size - 1, 0))
    return np.nan_to_num(np.diff(e) / c, nan=0.0, posinf=0.0, neginf=0.0)


def total_return(equity: np.ndarray) -> float | None:
    """Compounded return of an equity series (`metrics.total_return` of its bar returns)."""
    if not math.isfinite(capital(np.asarray(equity, dtype=np.float64))):
        return None
    return fm.total_return(bar_returns(equity))


def compounded(equity: np.ndarray) -> np.ndarray:
    """The equity curve as the page draws it: the capital grown by the compounded bar returns,
    NaN where the input has no value."""
    e = np.asarray(equity, dtype=np.float64)
    c = capital(e)
    if not math.isfinite(c):
        return np.full(e.size, np.nan)
    out = c * fm.compounded_equity(bar_returns(e))
    return np.where(np.isfinite(e), out, np.nan)


@dataclass(frozen=True)
class Chain:
    """The out-of-sample windows one after the other: `ts` (the first bar of the first window,
    then every later bar of each window), `returns` per policy (one per ts after the first),
    `bounds` the index in `ts` where each window starts, and the windows' names."""

    ts: np.ndarray
    returns: dict[str, np.ndarray]
    bounds: list[int]
    names: list[str]

    def equity(self, policy: str, start: float = 1.0) -> np.ndarray:
        return start * fm.compounded_equity(self.returns[policy])


def chain(series: Sequence[Series]) -> Chain | None:
    """Chain `series` in time order over the policies they all have (with a capital: a policy
    without any equity value is left out); None if there are none, or if the windows overlap in
    time (then they are not one out-of-sample path)."""
    parts = sorted(series, key=lambda s: int(s.ts[0]))
    if not parts:
        return None
    if any(int(b.ts[0]) <= int(a.ts[-1]) for a, b in pairwise(parts)):
        return None
    policies = [p for p in parts[0].equity
                if all(p in s.equity and math.isfinite(capital(s.equity[p])) for s in parts)]
    if not policies:
        return None
    ts = np.concatenate([parts[0].ts[:1], *(s.ts[1:] for s in parts)])
    returns = {p: np.concatenate([bar_returns(s.equity[p]) for s in parts]) for p in policies}
    bounds = np.cumsum([0] + [s.ts.size - 1 for s in parts[:-1]]).tolist()
    return Chain(ts, returns, [int(b) for b in bounds], [s.name for s in parts])


def monthly_returns(ts: np.ndarray, returns: np.ndarray) -> dict[int, dict[int, float]]:
    """{year: {month (1-12): compounded return}} of the bar returns `returns`, each counted in
    the UTC month of its bar's time `ts` (one more ts than returns: the returns are of bars
    1..n-1), plus month 0: the year's compounded return."""
    t = np.asarray(ts, dtype=np.int64)[1:]
    r = np.asarray(returns, dtype=np.float64)
    if t.size != r.size:
        raise ValueError(f"monthly_returns: {t.size + 1} ts for {r.size} returns")
    months = t.astype("datetime64[ns]").astype("datetime64[M]").astype(np.int64)  # since 1970-01
    out: dict[int, dict[int, float]] = {}
    if r.size == 0:
        return out
    starts = np.concatenate(([0], np.flatnonzero(np.diff(months)) + 1, [r.size]))
    for a, b in pairwise(starts):
        year, month = divmod(int(months[a]), 12)
        out.setdefault(1970 + year, {})[month + 1] = fm.total_return(r[a:b])
    for year, row in out.items():
        sel = (months // 12) == (year - 1970)
        row[0] = fm.total_return(r[sel])
    return out


def rolling_window(n: int) -> int:
    """Bars in the rolling-Sharpe window: a tenth of the returns, at least 30 (at most n)."""
    return max(2, min(n, max(30, n // 10)))


def rolling_sharpe(
    returns: np.ndarray, periods_per_year: float, window: int, points: int = ROLLING_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """(end index of each window into the returns, `metrics.sharpe` of the `window` returns
    up to and including it), at up to `points` evenly spaced ends from the first full window."""
    r = np.asarray(returns, dtype=np.float64)
    if r.size < window or window < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ends = np.unique(np.linspace(window - 1, r.size - 1, points).round().astype(np.int64))
    values = np.array([fm.sharpe(r[e - window + 1 : e + 1], periods_per_year) for e in ends])
    return ends, values
