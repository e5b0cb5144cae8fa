"""Metrics: parity with empyrical-reloaded, known answers, PSR/DSR, edge cases."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import empyrical
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data.instruments import Session
from foxhunt.data.series import BarSpec
from foxhunt.metrics import (
    NS_PER_DAY,
    annual_volatility,
    cagr,
    compounded_equity,
    deflated_sharpe,
    drawdown,
    expected_max_sharpe,
    exposure,
    max_drawdown,
    norm_cdf,
    norm_ppf,
    periods_per_year,
    periods_per_year_from_ts,
    probabilistic_sharpe,
    psr,
    sharpe,
    sortino,
    summary,
    total_return,
    trade_stats,
    turnover,
)

CME = Session(tz="America/Chicago", open="17:00", close="16:00")
N = NormalDist()


def _series() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    normal = rng.normal(2e-4, 1e-2, 2000)
    return {
        "normal": normal,
        "fat_tails": rng.standard_t(3, 500) * 5e-3,
        "all_positive": rng.uniform(1e-4, 2e-2, 300),
        "all_negative": -rng.uniform(1e-4, 2e-2, 300),
        "with_zeros": np.where(rng.random(400) < 0.6, 0.0, rng.normal(0, 1e-2, 400)),
        "short_2": np.array([0.01, -0.02]),
        "short_3": np.array([0.03, -0.01, 0.02]),
        "recovers": np.array([0.1, -0.5, 1.0, 0.2]),
        "wiped_out": np.array([0.1, -1.5, 0.2]),
        "constant": np.full(50, 1e-3),
        "zeros": np.zeros(20),
    }


def _same(ours, theirs) -> None:
    """Equal to 1e-9 where empyrical gives a number; None where it gives NaN or infinity."""
    if math.isfinite(theirs):
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-9)
    else:
        assert ours is None


def _check_parity(r: np.ndarray, ppy: float) -> None:
    s = summary(r, 1.0, ppy)
    _same(s["sharpe"], empyrical.sharpe_ratio(r, annualization=ppy))
    assert sharpe(r, ppy) == (s["sharpe"] if s["sharpe"] is not None else 0.0)
    _same(sortino(r, ppy), empyrical.sortino_ratio(r, annualization=ppy))
    if np.prod(r + 1.0) >= 0:
        _same(cagr(r, ppy), empyrical.annual_return(r, annualization=ppy))
        _same(s["calmar"], empyrical.calmar_ratio(r, annualization=ppy))
    else:
        assert cagr(r, ppy) is None and s["calmar"] is None
    _same(annual_volatility(r, ppy), empyrical.annual_volatility(r, annualization=ppy))
    _same(total_return(r), empyrical.cum_returns_final(r))
    assert max_drawdown(compounded_equity(r)) == pytest.approx(
        abs(empyrical.max_drawdown(r)), rel=1e-9, abs=1e-12)
    for key, ours in (("sortino", sortino), ("cagr", cagr), ("annual_volatility", annual_volatility)):
        assert s[key] == ours(r, ppy)


OVERFLOW = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


@OVERFLOW
@pytest.mark.parametrize("ppy", [12.0, 252.0, 1380.0 * 252])
@pytest.mark.parametrize("name", list(_series()))
def test_matches_empyrical(name, ppy):
    _check_parity(_series()[name], ppy)


@OVERFLOW
@settings(max_examples=150, deadline=None)
@given(r=st.lists(st.integers(-400_000, 400_000).map(lambda i: i / 1e6), min_size=2,
                  max_size=200).map(np.array),
       ppy=st.sampled_from([1.0, 12.0, 252.0, 347_760.0]))
def test_matches_empyrical_on_random_series(r, ppy):
    _check_parity(r, ppy)


def test_empyrical_undefined_cases_are_none_here():
    up = _series()["all_positive"]
    assert not math.isfinite(empyrical.sortino_ratio(up, annualization=252))
    assert not math.isfinite(empyrical.calmar_ratio(up, annualization=252))
    s = summary(up, 1.0, 252)
    assert s["sortino"] is None and s["calmar"] is None and s["max_drawdown"] == 0.0


def test_trade_stats_known_answer():
    t = trade_stats(np.array([100.0, -50.0, 0.0, 200.0, -25.0]))
    assert (t.trades, t.win_rate, t.profit_factor, t.avg_trade) == (5, 0.4, 4.0, 45.0)
    only_wins = trade_stats(np.array([10.0, 5.0]))
    assert only_wins.profit_factor is None and only_wins.win_rate == 1.0
    only_losses = trade_stats(np.array([-10.0, -5.0]))
    assert only_losses.profit_factor == 0.0 and only_losses.win_rate == 0.0
    none = trade_stats(np.empty(0))
    assert (none.trades, none.win_rate, none.profit_factor, none.avg_trade) == (0, None, None, None)


def test_drawdown_depth_and_durations_known_answer():
    dd = drawdown(np.array([1.0, 0.99, 0.98, 0.97, 0.99, 1.0, 0.8, 1.01]))
    assert dd.depth == pytest.approx(0.2)
    assert (dd.peak, dd.trough, dd.end, dd.recovered, dd.bars) == (5, 6, 7, True, 2)
    assert (dd.longest_peak, dd.longest_end, dd.longest_bars) == (0, 5, 5)
    open_dd = drawdown(np.array([1.0, 2.0, 1.5, 1.8]))
    assert (open_dd.depth, open_dd.peak, open_dd.trough, open_dd.end) == (0.25, 1, 2, 3)
    assert not open_dd.recovered and open_dd.bars == 2 and open_dd.longest_bars == 2
    flat = drawdown(np.array([1.0, 1.0, 1.2]))
    assert (flat.depth, flat.bars, flat.longest_bars) == (0.0, 0, 0)


def test_summary_drawdown_duration_in_bars_and_days():
    ts = (np.arange(4) * NS_PER_DAY).astype(np.int64) + 1_700_000_000_000_000_000
    s = summary(np.array([10.0, -50.0, 100.0, 20.0]), 100.0, 252, ts=ts)
    assert s["max_drawdown"] == pytest.approx(0.5)
    assert s["max_drawdown_bars"] == 2 and s["max_drawdown_days"] == pytest.approx(2.0)
    assert s["longest_drawdown_bars"] == 2 and s["longest_drawdown_days"] == pytest.approx(2.0)
    assert summary(np.array([10.0, -50.0]), 100.0, 252)["max_drawdown_days"] is None


def test_exposure_and_turnover_known_answer():
    pos = np.array([0.0, 1.0, 1.0, -2.0, 0.0])
    assert exposure(pos) == 0.6
    assert turnover(pos, 252) == pytest.approx(6 / 5 * 252)
    s = summary(np.zeros(5), 1.0, 252, positions=pos, trade_pnls=np.array([3.0, -1.0]))
    assert s["exposure"] == 0.6 and s["turnover"] == pytest.approx(302.4)
    assert (s["trades"], s["win_rate"], s["profit_factor"], s["avg_trade"]) == (2, 0.5, 3.0, 1.0)
    assert exposure(np.empty(0)) is None and turnover(np.empty(0), 252) is None


def test_returns_known_answers():
    assert total_return(np.array([0.1, -0.1])) == pytest.approx(-0.01)
    assert cagr(np.array([0.1, 0.1]), 2) == pytest.approx(0.21)
    assert cagr(np.array([0.21]), 0.5) == pytest.approx(0.1)
    assert annual_volatility(np.array([0.01, -0.01]), 4) == pytest.approx(math.sqrt(2e-4) * 2)
    r = np.array([0.02, -0.01, 0.03, -0.02])
    downside = math.sqrt((0.01**2 + 0.02**2) / 4) * math.sqrt(252)
    assert sortino(r, 252) == pytest.approx(r.mean() * 252 / downside)


@pytest.mark.parametrize(("spec", "session", "expected"), [
    ("1min", CME, 1380 * 252),
    ("5min", CME, 276 * 252),
    ("1h", CME, 23 * 252),
    ("1d", CME, 252),
    ("5min", None, 288 * 252),
    ("1min", Session(), 1440 * 252),
    ("30s", Session(tz="UTC", open="09:30", close="16:00"), 780 * 252),
])
def test_periods_per_year_for_time_bars(spec, session, expected):
    assert periods_per_year(BarSpec.parse(spec), session) == pytest.approx(expected)


def test_periods_per_year_for_activity_bars_uses_timestamps():
    ts = np.arange(0, 1001, dtype=np.int64) * int(NS_PER_DAY)
    ppy = periods_per_year(BarSpec.parse("ticks:500"), CME, ts)
    assert ppy == periods_per_year_from_ts(ts) == pytest.approx(365.25)
    with pytest.raises(ValueError, match="timestamps"):
        periods_per_year(BarSpec.parse("volume:1000"), CME)


def test_normal_distribution_functions():
    assert norm_cdf(0.0) == 0.5
    assert norm_cdf(1.959963984540054) == pytest.approx(0.975, abs=1e-15)
    assert norm_ppf(0.975) == pytest.approx(1.959963984540054, abs=1e-13)
    assert norm_ppf(0.995) == pytest.approx(2.5758293035489004, abs=1e-13)
    assert norm_ppf(0.5) == 0.0
    assert norm_ppf(1e-10) == pytest.approx(-6.361340902404056, rel=1e-13)
    for p in np.concatenate([np.logspace(-300, -1, 200), np.linspace(0.005, 0.995, 199),
                             1 - np.logspace(-15, -1, 100)]):
        x = N.inv_cdf(p)
        assert norm_ppf(p) == pytest.approx(x, rel=1e-12, abs=1e-12)
        assert norm_cdf(x) == pytest.approx(p, rel=1e-11)
    for bad in (0.0, 1.0, -0.1, float("nan")):
        with pytest.raises(ValueError):
            norm_ppf(bad)


def test_deflated_sharpe_matches_published_example():
    """Bailey & Lopez de Prado (2014), numerical example: best of N = 100 trials, annualised
    SR 2.5 on T = 1250 daily returns (250 a year), skew -3, kurtosis 10, annualised variance
    of the trials' SRs 1/2 -> expected max SR 0.1132 (daily), DSR 0.9004."""
    sr = 2.5 / math.sqrt(250)
    sr0 = expected_max_sharpe(100, 0.5 / 250)
    assert sr0 == pytest.approx(0.113172, abs=1e-6)
    assert psr(sr, 1250, -3.0, 10.0, sr0) == pytest.approx(0.9004, abs=5e-5)
    # The paper's break-even counts: about 46 trials (and 88 for normal returns) give DSR 0.95.
    assert psr(sr, 1250, -3.0, 10.0, expected_max_sharpe(46, 0.5 / 250)) == pytest.approx(
        0.9505, abs=1e-4)
    assert psr(sr, 1250, 0.0, 3.0, expected_max_sharpe(88, 0.5 / 250)) == pytest.approx(
        0.9505, abs=1e-4)


def _moments(r):
    n = len(r)
    mean = sum(r) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in r) / (n - 1))
    m2 = sum((x - mean) ** 2 for x in r) / n
    skew = sum((x - mean) ** 3 for x in r) / n / m2 ** 1.5
    kurt = sum((x - mean) ** 4 for x in r) / n / m2 ** 2
    return mean / sd, skew, kurt


@pytest.mark.parametrize("name", ["normal", "fat_tails", "with_zeros", "short_3"])
def test_probabilistic_and_deflated_sharpe_follow_the_formulas(name):
    r = _series()[name]
    sr, skew, kurt = _moments(list(r))
    n = len(r)
    se = math.sqrt((1 - skew * sr + (kurt - 1) / 4 * sr**2) / (n - 1))
    assert probabilistic_sharpe(r) == pytest.approx(N.cdf(sr / se), rel=1e-9)
    assert probabilistic_sharpe(r, 0.01) == pytest.approx(N.cdf((sr - 0.01) / se), rel=1e-9)

    trials = np.random.default_rng(3).normal(0.0, 0.02, 40)
    var = float(np.var(trials, ddof=1))
    g = 0.5772156649015329
    sr0 = math.sqrt(var) * ((1 - g) * N.inv_cdf(1 - 1 / 40) + g * N.inv_cdf(1 - 1 / (40 * math.e)))
    assert expected_max_sharpe(40, var) == pytest.approx(sr0, rel=1e-12)
    d = deflated_sharpe(r, trials)
    assert d.dsr == pytest.approx(N.cdf((sr - sr0) / se), rel=1e-9)
    assert (d.sharpe, d.skew, d.kurtosis) == pytest.approx((sr, skew, kurt), rel=1e-9)
    assert (d.sr0, d.variance, d.n_trials, d.n_obs) == pytest.approx((sr0, var, 40, n), rel=1e-12)


def test_deflated_sharpe_shrinks_with_more_trials_and_equals_psr_for_one():
    r = _series()["normal"] + 1e-3
    dsr = [deflated_sharpe(r, np.random.default_rng(0).normal(0, 0.02, n)).dsr
           for n in (2, 20, 200)]
    assert dsr[0] > dsr[1] > dsr[2]
    assert deflated_sharpe(r, np.array([0.05])).dsr == probabilistic_sharpe(r)


def test_deflated_sharpe_counts_every_trial_tried_and_only_finite_sharpes():
    """`n_trials` counts pruned and failed trials too: more tries, a higher bar by luck."""
    r = np.random.default_rng(0).normal(0.001, 0.01, 2000)
    trials = np.random.default_rng(1).normal(0.0, 0.03, 20)
    few, many = deflated_sharpe(r, trials), deflated_sharpe(r, trials, n_trials=200)
    assert few.n_trials == 20 and many.n_trials == 200 and many.dsr < few.dsr
    assert deflated_sharpe(r, np.append(trials, [np.nan, np.inf])) == few
    assert deflated_sharpe(np.zeros(100), trials) is None  # a flat series has no estimate
    assert expected_max_sharpe(1, 0.3) == 0.0 and expected_max_sharpe(50, 0.0) == 0.0
    with pytest.raises(ValueError):
        deflated_sharpe(r, np.array([]))
    with pytest.raises(ValueError):
        expected_max_sharpe(0, 1.0)


@pytest.mark.parametrize("pnl", [np.array([]), np.array([5.0]), np.full(30, 2.0), np.zeros(30),
                                 np.full(30, -2.0)], ids=["empty", "one", "constant+", "zeros",
                                                          "constant-"])
def test_summary_edge_cases_are_defined(pnl):
    s = summary(pnl, 1000.0, 252, positions=np.zeros_like(pnl), trade_pnls=pnl,
                ts=np.arange(pnl.size, dtype=np.int64), trial_sharpes=np.array([0.1, 0.2]))
    json.dumps(s, allow_nan=False)
    assert s.pop("sharpe_basis") == "per-bar"
    assert all(v is None or math.isfinite(v) for v in s.values())
    assert s["bars"] == pnl.size and s["sharpe"] is None and s["psr"] is None
    assert s["sharpe_per_bar"] is None and 0 <= s["sessions"] <= pnl.size
    assert sharpe(pnl / 1000.0, 252) == 0.0
    assert s["max_drawdown"] >= 0.0 and s["total_return"] == pytest.approx(total_return(pnl / 1e3))
    if pnl.size == 0:
        assert s["cagr"] is None and s["total_return"] == 0.0 and s["exposure"] is None
        assert s["max_drawdown_days"] is None and s["trades"] == 0


def test_summary_keys_and_defaults():
    s = summary(_series()["normal"] * 1e4, 1e4, 252)
    assert list(s) == [
        "bars", "sessions", "periods_per_year", "total_pnl", "total_return", "cagr",
        "sharpe_basis", "annual_volatility", "sharpe", "sortino", "annual_volatility_per_bar",
        "sharpe_per_bar", "sortino_per_bar", "max_drawdown", "max_drawdown_bars",
        "max_drawdown_days", "longest_drawdown_bars", "longest_drawdown_days", "calmar", "psr",
        "dsr", "trades", "win_rate", "profit_factor", "avg_trade", "turnover", "exposure"]
    assert all(s[k] is None for k in ("sessions", "dsr", "trades", "win_rate", "profit_factor",
                                      "avg_trade", "turnover", "exposure", "max_drawdown_days"))
    assert s["sharpe_basis"] == "per-bar"
    for key in ("sharpe", "sortino", "annual_volatility"):
        assert s[key] == s[f"{key}_per_bar"]
    assert 0.0 < s["psr"] < 1.0 and s["max_drawdown_bars"] >= 1


def test_summary_rejects_bad_input():
    ok = np.ones(3)
    for kwargs in ({"pnl": np.array([1.0, np.nan])}, {"capital": 0.0}, {"capital": float("inf")},
                   {"periods_per_year": float("nan")}, {"positions": np.ones(2)},
                   {"ts": np.arange(4)}, {"pnl": np.ones((2, 2))}):
        args = {"pnl": ok, "capital": 1.0, "periods_per_year": 252.0} | kwargs
        with pytest.raises(ValueError):
            summary(**args)


def test_legacy_helpers_keep_their_behaviour():
    assert max_drawdown(np.array([100.0, 120.0, 90.0, 130.0])) == pytest.approx(0.25)
    assert max_drawdown(np.array([])) == 0.0
    assert sharpe(np.array([0.01]), 252) == 0.0 and sharpe(np.array([]), 252) == 0.0
    r = np.array([0.01, -0.02, 0.03])
    assert sharpe(r, 252) == pytest.approx(r.mean() / r.std(ddof=1) * math.sqrt(252))
    assert sharpe(r) == pytest.approx(r.mean() / r.std(ddof=1))
    assert periods_per_year_from_ts(np.array([5])) == 1.0


def test_sharpe_estimates_compare_two_samples():
    """P(true Sharpe of a > of b): against an all-zero (flat) series it is a's PSR, swapping the
    two gives the complement, and equal estimates give even odds."""
    from foxhunt.metrics import sharpe_above_probability, sharpe_estimate

    rng = np.random.default_rng(3)
    a = rng.normal(0.002, 0.01, 500) + 0.004 * rng.standard_exponential(500)
    b = rng.normal(0.0, 0.012, 300)
    ea, eb, flat = sharpe_estimate(a), sharpe_estimate(b), sharpe_estimate(np.zeros(300))
    assert ea.n == 500 and ea.sr == pytest.approx(a.mean() / a.std(ddof=1))
    assert flat.sr == 0.0 and flat.variance == 0.0
    assert sharpe_above_probability(ea, flat) == pytest.approx(probabilistic_sharpe(a), rel=1e-12)
    p = sharpe_above_probability(ea, eb)
    assert 0.5 < p < 1 and sharpe_above_probability(eb, ea) == pytest.approx(1 - p)
    assert sharpe_above_probability(ea, ea) == 0.5
    se = math.sqrt(ea.variance + eb.variance)
    assert p == pytest.approx(NormalDist().cdf((ea.sr - eb.sr) / se), rel=1e-12)
    assert sharpe_above_probability(flat, flat) is None
    assert sharpe_estimate(np.ones(5)) is None and sharpe_estimate(np.array([0.1])) is None
