"""Performance metrics on per-bar PnL, shared by training (validation Sharpe) and evaluation.

Conventions (docs/metrics.md): `pnl` is money per bar (after costs); returns are `pnl / capital`
(a futures account earns on margin, so a fixed notional capital is the honest denominator).
Where empyrical has a metric it is defined exactly as there (empyrical-reloaded, `stats.py`):
Sharpe and volatility use ddof=1 and `sqrt(periods_per_year)` with a zero risk-free rate,
Sortino's downside deviation runs over all bars with returns clipped at 0, drawdowns and the
annual return (CAGR) compound the returns. Drawdowns here are positive fractions.

The headline Sharpe, Sortino and volatility of `summary` are those of daily (session) returns,
annualised with 252 trading days, as tearsheets (pyfolio, quantstats) quote them, when the
series spans at least `MIN_DAILY_SESSIONS` sessions; otherwise those of the per-bar returns,
annualised with the bars per year. `sharpe_basis` says which; the per-bar figures are always
there too (`sharpe_per_bar`, ...).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import numpy as np

if TYPE_CHECKING:
    from foxhunt.data.instruments import Session
    from foxhunt.data.series import BarSpec

NS_PER_YEAR = 365.25 * 24 * 3600 * 1e9
NS_PER_DAY = 24 * 3600 * 1e9
NS_PER_MINUTE = 60e9
TRADING_DAYS_PER_YEAR = 252
EULER_GAMMA = 0.5772156649015329
MIN_DAILY_SESSIONS = 20
"""Fewest sessions for a daily-return Sharpe, Sortino and volatility; below it the per-bar
figures are the headline. About one trading month: the daily figure rests on a standard deviation
of n - 1 degrees of freedom, whose 95% interval spans 0.76-1.46x the estimate at 20 sessions but
0.60-2.87x at 5, so a handful of quiet sessions could make any Sharpe look large."""
DAILY = "daily"
PER_BAR = "per-bar"
"""Values of `sharpe_basis` in `summary`."""


def sharpe(returns: np.ndarray, periods_per_year: float = 1.0) -> float:
    """Annualised Sharpe ratio (ddof=1, zero risk-free rate); 0.0 where undefined, for ranking."""
    s = _sharpe(_as_1d(returns), periods_per_year)
    return 0.0 if s is None else s


def max_drawdown(equity: np.ndarray) -> float:
    """Largest peak-to-trough fall of an equity curve, as a positive fraction of the peak."""
    e = np.asarray(equity, dtype=np.float64)
    if e.size == 0:
        return 0.0
    return float(_drawdowns(e).max())


def periods_per_year_from_ts(ts: np.ndarray) -> float:
    """Bars per year as observed in a series: bars / elapsed years (gaps and sessions included)."""
    t = np.asarray(ts, dtype=np.int64)
    if t.size < 2 or t[-1] <= t[0]:
        return 1.0
    return float((t.size - 1) / ((t[-1] - t[0]) / NS_PER_YEAR))


def session_minutes(session: Session | None) -> int:
    """Length of a daily session in minutes; `None` or open == close is a 24-hour session."""
    if session is None:
        return 1440
    return (session.minutes("close") - session.minutes("open")) % 1440 or 1440


def periods_per_year(spec: BarSpec, session: Session | None = None,
                     ts: np.ndarray | None = None) -> float:
    """Bars per year: time bars count bars per session x 252 trading days (at least one bar a
    day); tick, volume and dollar bars have no fixed duration and use the observed rate in `ts`."""
    if spec.kind == "time":
        per_session = session_minutes(session) * NS_PER_MINUTE / spec.ns
        return max(per_session, 1.0) * TRADING_DAYS_PER_YEAR
    if ts is None:
        raise ValueError(f"{spec} bars have no fixed duration: pass their timestamps")
    return periods_per_year_from_ts(ts)


def session_days(ts: np.ndarray, session: Session | None = None) -> np.ndarray:
    """The trading day of each bar, from its close time `ts` (int64 ns UTC, in time order): the
    local date, in the session's time zone, of the first session close at or after the bar's
    close, as days since 1970-01-01 (int64); a close at 00:00 is midnight at the end of its day
    (24:00).

    So a bar belongs to the session it closes in, and a bar in the break before a session opens
    to that session. A 24-hour session (open == close) rolls over at `close`; at 00:00 that is
    the calendar day in its zone, with a bar that closes at midnight still in the day that ends
    there. No session: the UTC calendar day, the same way."""
    t = np.asarray(ts, dtype=np.int64)
    if t.ndim != 1:
        raise ValueError(f"expected a 1-D series of timestamps, got shape {t.shape}")
    minutes = session.minutes("close") if session is not None else 0
    local = t + _utc_offsets_ns(t, session.tz) if session is not None else t
    close = (minutes or 1440) * int(NS_PER_MINUTE)  # a close at 00:00 ends the day: 24:00
    return -((close - local) // int(NS_PER_DAY))


def session_returns(returns: np.ndarray, ts: np.ndarray,
                    session: Session | None = None) -> np.ndarray:
    """Each session's compounded return, prod(1 + r) - 1 over the bars of one `session_days`
    day, one value per session with bars, in time order. `ts` are the bars' close times; a
    day that has no bar (a weekend, a holiday) is no session."""
    r = _as_1d(returns)
    days = session_days(ts, session)
    if days.shape != r.shape:
        raise ValueError(f"ts must have one value per return ({r.size})")
    if r.size == 0:
        return r.copy()
    change = days[1:] != days[:-1]
    if (days[1:] < days[:-1]).any():
        raise ValueError("ts must be in time order")
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    return np.multiply.reduceat(r + 1.0, starts) - 1.0


def _utc_offsets_ns(ts: np.ndarray, tz: str) -> np.ndarray:
    """UTC offset in ns of each timestamp in the zone `tz`. The zone is probed once per UTC day
    of the span, and a day whose offset changes is bisected to the second of the change (zones
    change at most once a day), so a million bars cost a few hundred look-ups."""
    if tz == "UTC" or ts.size == 0:
        return np.zeros(ts.size, dtype=np.int64)
    zone = ZoneInfo(tz)

    def offset(second: int) -> int:
        off = datetime.fromtimestamp(second, zone).utcoffset()
        return int(off.total_seconds()) if off is not None else 0

    day = 86_400
    seconds = ts // 10**9
    grid = range(int(seconds.min()) // day * day, int(seconds.max()) // day * day + 2 * day, day)
    probes = [offset(g) for g in grid]
    changes, offsets = [], [probes[0]]
    for g, before, after in zip(grid, probes, probes[1:], strict=False):
        if before != after:
            lo, hi = g, g + day
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if offset(mid) == before else (lo, mid)
            changes.append(hi)
            offsets.append(after)
    idx = np.searchsorted(np.asarray(changes, dtype=np.int64), seconds, side="right")
    return np.asarray(offsets, dtype=np.int64)[idx] * 10**9


def total_return(returns: np.ndarray) -> float:
    """Compounded return of the series, prod(1 + r) - 1 (empyrical `cum_returns_final`)."""
    r = _as_1d(returns)
    return float(np.prod(r + 1.0) - 1.0) if r.size else 0.0


def cagr(returns: np.ndarray, periods_per_year: float) -> float | None:
    """Compound annual growth rate (empyrical `annual_return`); None when empty or the account is
    wiped out below zero."""
    r = _as_1d(returns)
    if r.size == 0:
        return None
    ending = np.prod(r + 1.0)
    if ending < 0:
        return None
    with np.errstate(over="ignore"):
        return _finite(ending ** (1.0 / (r.size / periods_per_year)) - 1.0)


def annual_volatility(returns: np.ndarray, periods_per_year: float) -> float | None:
    """Standard deviation (ddof=1) times sqrt(periods_per_year); None below two bars."""
    r = _as_1d(returns)
    if r.size < 2:
        return None
    return float(r.std(ddof=1) * periods_per_year ** 0.5)


def sortino(returns: np.ndarray, periods_per_year: float) -> float | None:
    """Annualised mean over annualised downside deviation, the root mean square of min(r, 0) over
    all bars (empyrical `sortino_ratio`); None below two bars or without a losing bar."""
    r = _as_1d(returns)
    if r.size < 2:
        return None
    downside = math.sqrt(float(np.mean(np.minimum(r, 0.0) ** 2))) * math.sqrt(periods_per_year)
    if downside == 0.0:
        return None
    return _finite(r.mean() * periods_per_year / downside)


def compounded_equity(returns: np.ndarray) -> np.ndarray:
    """Growth of 1 under the returns, the starting 1 first (length n + 1)."""
    return np.concatenate(([1.0], np.cumprod(_as_1d(returns) + 1.0)))


@dataclass(frozen=True)
class Drawdown:
    """Deepest and longest drawdown episodes of an equity curve, as indices into it. An episode
    runs from its peak to the first point back at the peak, or to the last point if never."""

    depth: float
    peak: int
    trough: int
    end: int
    recovered: bool
    longest_peak: int
    longest_end: int

    @property
    def bars(self) -> int:
        return self.end - self.peak

    @property
    def longest_bars(self) -> int:
        return self.longest_end - self.longest_peak


def drawdown(equity: np.ndarray) -> Drawdown:
    """Deepest drawdown (positive fraction of its peak) with its duration, and the longest
    time under water, of an equity curve whose first point is the starting value. Each run of
    points below the running peak is one episode, from the point before it (its peak) to the
    point after it (back at the peak) or the last point."""
    e = np.asarray(equity, dtype=np.float64)
    if e.size == 0:
        return Drawdown(0.0, 0, 0, 0, True, 0, 0)
    peak = np.maximum.accumulate(e)
    under = e < peak
    edges = np.flatnonzero(np.diff(under.view(np.int8), prepend=np.int8(0), append=np.int8(0)))
    if edges.size == 0:
        return Drawdown(0.0, 0, 0, 0, True, 0, 0)
    first, after = edges[0::2], edges[1::2]  # each run is e[first:after]
    back = np.minimum(after, e.size - 1)
    dd = _drawdowns(e, peak)
    trough = int(dd.argmax())
    if under[trough]:
        run = int(np.searchsorted(first, trough, side="right")) - 1
        top, end, recovered = int(first[run]) - 1, int(back[run]), bool(after[run] < e.size)
    else:  # no point is below a positive peak
        top, end, recovered = trough, trough, True
    k = int((back - first).argmax())
    return Drawdown(float(dd[trough]), top, trough, end, recovered, int(first[k]) - 1,
                    int(back[k]))


def turnover(positions: np.ndarray, periods_per_year: float) -> float | None:
    """Position units traded per year: mean |change of position| per bar (flat before the first
    bar) times periods_per_year; None when empty."""
    p = _as_1d(positions)
    if p.size == 0:
        return None
    return float(np.abs(np.diff(p, prepend=0.0)).mean() * periods_per_year)


def exposure(positions: np.ndarray) -> float | None:
    """Fraction of bars with a non-zero position; None when empty."""
    p = _as_1d(positions)
    return float(np.count_nonzero(p) / p.size) if p.size else None


@dataclass(frozen=True)
class TradeStats:
    trades: int
    win_rate: float | None
    profit_factor: float | None
    avg_trade: float | None


def trade_stats(trade_pnls: np.ndarray) -> TradeStats:
    """Closed-trade statistics: share of trades with positive PnL, gross profit over gross loss
    (None without a losing trade), mean PnL per trade (money, after costs)."""
    t = _as_1d(trade_pnls)
    if t.size == 0:
        return TradeStats(0, None, None, None)
    loss = -float(t[t < 0].sum())
    gain = float(t[t > 0].sum())
    return TradeStats(int(t.size), float(np.count_nonzero(t > 0) / t.size),
                      gain / loss if loss > 0 else None, float(t.mean()))


def norm_cdf(x: float) -> float:
    """Standard normal distribution function."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
      1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
      6.680131188771972e01, -1.328068155288572e01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
      -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)


def norm_ppf(p: float) -> float:
    """Inverse standard normal distribution function: Acklam's rational approximation with one
    Halley step on `norm_cdf` (about 1e-15 relative)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"norm_ppf needs 0 < p < 1, got {p}")
    if p > 0.5:
        return -norm_ppf(1.0 - p)
    if p < 0.02425:
        q = math.sqrt(-2.0 * math.log(p))
        x = (((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]) / \
            ((((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0)
    else:
        q = p - 0.5
        s = q * q
        x = (((((_A[0] * s + _A[1]) * s + _A[2]) * s + _A[3]) * s + _A[4]) * s + _A[5]) * q / \
            (((((_B[0] * s + _B[1]) * s + _B[2]) * s + _B[3]) * s + _B[4]) * s + 1.0)
    u = (norm_cdf(x) - p) * math.sqrt(2.0 * math.pi) * math.exp(0.5 * x * x)
    return x - u / (1.0 + 0.5 * x * u)


def psr(sr: float, n: int, skew: float = 0.0, kurtosis: float = 3.0,
        benchmark: float = 0.0) -> float | None:
    """Probabilistic Sharpe ratio, P(true SR > benchmark), from a per-bar (not annualised) Sharpe
    over `n` bars with the returns' skewness and (non-excess) kurtosis (Bailey & Lopez de Prado
    2012, "The Sharpe ratio efficient frontier"); None below two bars."""
    if n < 2:
        return None
    var = 1.0 - skew * sr + (kurtosis - 1.0) / 4.0 * sr * sr
    if not var > 0:
        return None
    return norm_cdf((sr - benchmark) * math.sqrt(n - 1) / math.sqrt(var))


def probabilistic_sharpe(returns: np.ndarray, benchmark: float = 0.0) -> float | None:
    """`psr` of a return series: per-bar Sharpe with ddof=1, sample (biased) skewness and
    kurtosis; `benchmark` is a per-bar Sharpe. None below two bars or for constant returns."""
    r = _as_1d(returns)
    if r.size < 2 or r.max() == r.min():
        return None
    m = _moments(r)
    return psr(float(m.mean / m.sd), r.size, m.skew, m.kurtosis, benchmark)


@dataclass(frozen=True)
class _Moments:
    """Mean, standard deviation (ddof=1, bit for bit `r.std(ddof=1)`), and the biased sample
    skewness and (non-excess) kurtosis of a series of at least two values, from one pass of
    deviations (`d * d * d` rather than `d ** 3`: numpy's power is ~20x slower)."""

    mean: np.float64
    sd: np.float64
    skew: float
    kurtosis: float


def _moments(r: np.ndarray) -> _Moments:
    mean = r.mean()
    d = r - mean
    d2 = d * d
    s2 = d2.sum()
    m2 = float(s2 / r.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        skew = float((d2 * d).sum() / r.size) / m2 ** 1.5 if m2 > 0 else math.nan
        kurt = float((d2 * d2).sum() / r.size) / (m2 * m2) if m2 > 0 else math.nan
    return _Moments(mean, np.sqrt(s2 / (r.size - 1)), skew, kurt)


@dataclass(frozen=True)
class SharpeEstimate:
    """A per-bar Sharpe ratio with what its sampling variance needs: the bar count and the
    returns' skewness and (non-excess) kurtosis."""

    sr: float
    n: int
    skew: float = 0.0
    kurtosis: float = 3.0
    exact: bool = False

    @property
    def variance(self) -> float:
        """Variance of the estimate (Mertens 2002, as in `psr`); 0 where `exact` (all-zero
        returns: a flat policy's Sharpe is 0 by construction, not by estimate)."""
        if self.exact:
            return 0.0
        if self.n < 2:
            return math.inf
        var = 1.0 - self.skew * self.sr + (self.kurtosis - 1.0) / 4.0 * self.sr * self.sr
        return max(var, 0.0) / (self.n - 1)


def sharpe_estimate(returns: np.ndarray) -> SharpeEstimate | None:
    """Per-bar Sharpe (ddof=1) with sample skewness and kurtosis; all-zero returns (a flat
    policy) are exactly Sharpe 0 with no variance; None below two bars or for other constant
    returns."""
    r = _as_1d(returns)
    if r.size < 2:
        return None
    if r.max() == r.min():
        return SharpeEstimate(0.0, int(r.size), exact=True) if r[0] == 0.0 else None
    m = _moments(r)
    return SharpeEstimate(float(m.mean / m.sd), int(r.size), m.skew, m.kurtosis)


def sharpe_above_probability(a: SharpeEstimate, b: SharpeEstimate) -> float | None:
    """P(true Sharpe of `a` > true Sharpe of `b`) for estimates from independent samples: the
    difference over the root of the summed variances, as `psr` does against a fixed benchmark.
    None where both variances are zero (two flat series)."""
    var = a.variance + b.variance
    if not var > 0:
        return None
    return norm_cdf((a.sr - b.sr) / math.sqrt(var))


def expected_max_sharpe(n_trials: int, variance: float) -> float:
    """Expected maximum of `n_trials` zero-skill Sharpe ratios whose estimates have `variance`
    (Bailey & Lopez de Prado 2014, "The deflated Sharpe ratio", Euler-Mascheroni form)."""
    if n_trials < 1:
        raise ValueError(f"need at least one trial, got {n_trials}")
    if n_trials == 1 or variance <= 0:
        return 0.0
    z = (1.0 - EULER_GAMMA) * norm_ppf(1.0 - 1.0 / n_trials) + \
        EULER_GAMMA * norm_ppf(1.0 - 1.0 / (n_trials * math.e))
    return math.sqrt(variance) * z


@dataclass(frozen=True)
class DeflatedSharpe:
    """A deflated Sharpe ratio with what it is computed from, all per bar (not annualised)."""

    dsr: float | None  # P(true Sharpe > sr0); None where the moments give no PSR
    sharpe: float  # the picked series' Sharpe
    sr0: float  # expected maximum Sharpe of n_trials zero-skill trials
    n_trials: int
    variance: float  # of the trials' Sharpe ratios (ddof=1)
    n_obs: int
    skew: float
    kurtosis: float  # raw (3 for normal returns)

    def doc(self) -> dict[str, float | int | None]:
        return dict(self.__dict__)


def deflated_sharpe(returns: np.ndarray, trial_sharpes: np.ndarray,
                    n_trials: int | None = None) -> DeflatedSharpe | None:
    """Deflated Sharpe ratio of the series picked as best of the candidates whose per-bar Sharpe
    ratios are `trial_sharpes` (the finite ones count, the picked one included): its PSR against
    the expected maximum Sharpe of N zero-skill trials with the trials' variance (ddof=1). N is
    `n_trials` where more were tried than have a Sharpe (pruned or failed trials), else the
    number of trial Sharpes. None below two bars or for constant returns."""
    r = _as_1d(returns)
    if r.size < 2 or r.max() == r.min():
        return None
    t = _as_1d(trial_sharpes)
    t = t[np.isfinite(t)]
    n = n_trials or t.size
    if n < 1:
        raise ValueError("deflated_sharpe needs the Sharpe ratios of the trials")
    variance = float(t.var(ddof=1)) if t.size > 1 else 0.0
    sr0 = expected_max_sharpe(n, variance)
    m = _moments(r)
    sr = float(m.mean / m.sd)
    return DeflatedSharpe(psr(sr, r.size, m.skew, m.kurtosis, sr0), sr, sr0, n, variance,
                          int(r.size), m.skew, m.kurtosis)


def summary(pnl: np.ndarray, capital: float, periods_per_year: float,
            positions: np.ndarray | None = None, trade_pnls: np.ndarray | None = None,
            ts: np.ndarray | None = None, trial_sharpes: np.ndarray | None = None,
            session: Session | None = None,
            min_sessions: int = MIN_DAILY_SESSIONS) -> dict[str, float | int | str | None]:
    """Every metric of a per-bar PnL series in one JSON-safe dict: None where a metric is
    undefined or its input was not given, never NaN or infinity.

    `sharpe`, `sortino` and `annual_volatility` are the headline figures: of the daily returns
    (`session_returns` of the bars' close times `ts` in `session`, 252 a year) when `ts` is
    given and spans at least `min_sessions` sessions with more bars than sessions, else of the
    per-bar returns (`periods_per_year`). `sharpe_basis` says which ("daily" or "per-bar");
    `sharpe_per_bar`, `sortino_per_bar` and `annual_volatility_per_bar` are always per-bar."""
    money = _as_1d(pnl)
    if not np.isfinite(money).all():
        raise ValueError("pnl has non-finite values")
    if not (math.isfinite(capital) and capital > 0):
        raise ValueError(f"capital must be a positive number, got {capital}")
    if not (math.isfinite(periods_per_year) and periods_per_year > 0):
        raise ValueError(f"periods_per_year must be a positive number, got {periods_per_year}")
    for name, a in (("positions", positions), ("ts", ts)):
        if a is not None and np.asarray(a).shape != money.shape:
            raise ValueError(f"{name} must have one value per pnl bar ({money.size})")
    r = money / capital
    ppy = periods_per_year
    dd = drawdown(compounded_equity(r))
    growth = cagr(r, ppy)
    trades = trade_stats(trade_pnls) if trade_pnls is not None else None
    daily = session_returns(r, ts, session) if ts is not None else None
    basis = DAILY if daily is not None and min_sessions <= daily.size < r.size else PER_BAR
    # one pass of moments for the per-bar volatility, Sharpe and PSR: the same numbers as
    # annual_volatility, _sharpe and probabilistic_sharpe, bit for bit
    moments = _moments(r) if r.size >= 2 else None
    constant = moments is None or r.max() == r.min()
    per_bar = {
        "annual_volatility": float(moments.sd * ppy ** 0.5) if moments else None,
        "sharpe": None if constant else _finite(moments.mean / moments.sd * math.sqrt(ppy)),
        "sortino": sortino(r, ppy),
    }
    sr = None if constant else float(moments.mean / moments.sd)
    if basis == DAILY:
        days_ppy = TRADING_DAYS_PER_YEAR
        headline = {"annual_volatility": annual_volatility(daily, days_ppy),
                    "sharpe": _sharpe(daily, days_ppy), "sortino": sortino(daily, days_ppy)}
    else:
        headline = per_bar

    def days(a: int, b: int) -> float | None:
        if ts is None or money.size == 0:
            return None
        t = np.asarray(ts, dtype=np.int64)
        return float((t[max(b - 1, 0)] - t[max(a - 1, 0)]) / NS_PER_DAY)

    out: dict[str, float | int | str | None] = {
        "bars": int(money.size),
        "sessions": int(daily.size) if daily is not None else None,
        "periods_per_year": float(ppy),
        "total_pnl": float(money.sum()),
        "total_return": total_return(r),
        "cagr": growth,
        "sharpe_basis": basis,
        **headline,
        **{f"{k}_per_bar": v for k, v in per_bar.items()},
        "max_drawdown": dd.depth,
        "max_drawdown_bars": dd.bars,
        "max_drawdown_days": days(dd.peak, dd.end),
        "longest_drawdown_bars": dd.longest_bars,
        "longest_drawdown_days": days(dd.longest_peak, dd.longest_end),
        "calmar": None if dd.depth == 0.0 or growth is None else _finite(growth / dd.depth),
        "psr": None if sr is None else psr(sr, r.size, moments.skew, moments.kurtosis),
        "dsr": None if sr is None or trial_sharpes is None else
        deflated_sharpe(r, trial_sharpes).dsr,
        "trades": trades.trades if trades else None,
        "win_rate": trades.win_rate if trades else None,
        "profit_factor": trades.profit_factor if trades else None,
        "avg_trade": trades.avg_trade if trades else None,
        "turnover": turnover(positions, ppy) if positions is not None else None,
        "exposure": exposure(positions) if positions is not None else None,
    }
    return {k: v if v is None or isinstance(v, int | str) else _finite(v)
            for k, v in out.items()}


def sharpe_basis_text(basis: str, periods_per_year: float | None = None,
                      sessions: int | None = None) -> str:
    """One line for a table saying what its Sharpe, Sortino and volatility are computed from,
    e.g. "Sharpe: daily (session) returns, annualised x sqrt(252)" or "Sharpe: per-bar returns,
    annualised x sqrt(N), N = 347,760 bars a year (3 sessions, fewer than 20)"."""
    if basis == DAILY:
        text = f"daily (session) returns, annualised x sqrt({TRADING_DAYS_PER_YEAR})"
        if sessions is not None:
            text += f" ({int(sessions):,} sessions)"
    elif basis == PER_BAR:
        n = "" if periods_per_year is None else f"{periods_per_year:,.0f} "
        text = f"per-bar returns, annualised x sqrt(N), N = {n}bars a year"
        if sessions is not None and sessions < MIN_DAILY_SESSIONS:
            text += f" ({int(sessions):,} sessions, fewer than {MIN_DAILY_SESSIONS})"
    else:
        raise ValueError(f"unknown Sharpe basis {basis!r}; expected {DAILY!r} or {PER_BAR!r}")
    return f"Sharpe: {text}"


def sharpe_basis_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """`sharpe_basis_text` of each basis among `rows` (summaries, or table rows holding their
    keys), in order of first appearance. A row without `sharpe_basis` is per-bar (the trainer's
    figures). N and the session count are named where every row of that basis shares them."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get("sharpe_basis") or PER_BAR, []).append(row)

    def shared(group: list[Mapping[str, Any]], key: str) -> Any:
        values = {row.get(key) for row in group}
        value = values.pop() if len(values) == 1 else None
        return value if isinstance(value, int | float) and math.isfinite(value) else None

    return [sharpe_basis_text(basis, shared(group, "periods_per_year"), shared(group, "sessions"))
            for basis, group in groups.items()]


def _as_1d(a: np.ndarray) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D series, got shape {x.shape}")
    return x


def _finite(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _drawdowns(e: np.ndarray, peak: np.ndarray | None = None) -> np.ndarray:
    peak = np.maximum.accumulate(e) if peak is None else peak
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(peak > 0, (peak - e) / peak, 0.0)


def _sharpe(r: np.ndarray, periods_per_year: float) -> float | None:
    if r.size < 2 or r.max() == r.min():
        return None
    return _finite(r.mean() / r.std(ddof=1) * math.sqrt(periods_per_year))
