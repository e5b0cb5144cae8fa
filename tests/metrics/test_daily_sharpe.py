"""The headline Sharpe: daily (session) returns when a series spans enough sessions, per-bar
otherwise; which trading day a bar belongs to; parity with empyrical on daily returns."""

from __future__ import annotations

import math
from datetime import date, datetime

import empyrical
import numpy as np
import pandas as pd
import pytest

from foxhunt.data.instruments import Session
from foxhunt.metrics import (
    DAILY,
    MIN_DAILY_SESSIONS,
    PER_BAR,
    annual_volatility,
    session_days,
    session_returns,
    sharpe,
    sharpe_basis_lines,
    sharpe_basis_text,
    sortino,
    summary,
)

CME = Session(tz="America/Chicago", open="17:00", close="16:00")
NYSE = Session(tz="America/New_York", open="09:30", close="16:00")
MIN_NS = 60 * 10**9


def ns(text: str) -> int:
    """ns since the epoch of an ISO time with its offset, e.g. '2024-01-08T16:00-06:00'."""
    return int(datetime.fromisoformat(text).timestamp()) * 10**9


def day(y: int, m: int, d: int) -> int:
    """days since 1970-01-01 of a date: what `session_days` returns."""
    return date(y, m, d).toordinal() - date(1970, 1, 1).toordinal()


def minute_bars(days: int, per_day: int = 390, first: str = "2024-01-01T14:31+00:00") -> np.ndarray:
    """Close times of `per_day` one-minute bars on each of `days` consecutive UTC days."""
    start = ns(first)
    return np.concatenate([start + d * 86_400 * 10**9 + np.arange(per_day) * MIN_NS
                           for d in range(days)])


# -- which day a bar belongs to -----------------------------------------------------------------


def test_without_a_session_a_bar_belongs_to_its_utc_calendar_day_a_midnight_close_to_the_day_it_ends():
    ts = np.array([ns("2024-01-08T00:01+00:00"), ns("2024-01-08T23:59+00:00"),
                   ns("2024-01-09T00:00+00:00"), ns("2024-01-09T00:01+00:00")])
    assert session_days(ts).tolist() == [day(2024, 1, 8)] * 3 + [day(2024, 1, 9)]
    assert session_days(ts, Session()).tolist() == session_days(ts).tolist()


def test_an_overnight_session_is_dated_by_its_close_in_the_sessions_zone():
    """CME Globex 17:00-16:00 Chicago: Sunday evening's bars trade in Monday's session, the
    16:00 bar closes it, a bar in the 16:00-17:00 break belongs to the next session, in winter
    (UTC-6), in summer (UTC-5) and across the change to daylight time (2024-03-10)."""
    ts = np.array([
        ns("2024-01-07T17:01-06:00"),  # Sunday evening -> Monday 8th
        ns("2024-01-08T09:00-06:00"),
        ns("2024-01-08T16:00-06:00"),  # the close
        ns("2024-01-08T16:30-06:00"),  # the break -> Tuesday 9th
        ns("2024-01-08T17:01-06:00"),
        ns("2024-03-10T17:01-05:00"),  # first evening in daylight time -> Monday 11th
        ns("2024-03-11T16:00-05:00"),
        ns("2024-07-08T15:59-05:00"),  # summer
        ns("2024-07-08T16:01-05:00"),
    ])
    assert session_days(ts, CME).tolist() == [
        day(2024, 1, 8), day(2024, 1, 8), day(2024, 1, 8), day(2024, 1, 9), day(2024, 1, 9),
        day(2024, 3, 11), day(2024, 3, 11), day(2024, 7, 8), day(2024, 7, 9)]


def test_a_day_session_and_a_24_hour_session_in_another_zone():
    ts = np.array([ns("2024-01-08T09:31-05:00"), ns("2024-01-08T16:00-05:00"),
                   ns("2024-01-08T20:00-05:00")])
    assert session_days(ts, NYSE).tolist() == [day(2024, 1, 8)] * 2 + [day(2024, 1, 9)]
    tokyo = Session(tz="Asia/Tokyo")  # open == close: the calendar day in Tokyo
    ts = np.array([ns("2024-01-08T23:59+09:00"), ns("2024-01-09T00:00+09:00"),
                   ns("2024-01-09T00:01+09:00")])
    assert session_days(ts, tokyo).tolist() == [day(2024, 1, 8)] * 2 + [day(2024, 1, 9)]


# -- session returns ----------------------------------------------------------------------------


def test_a_sessions_return_compounds_its_bars_returns_hand_computed():
    """Three days: (1.01)(1.02) - 1, -0.01, and (1.005)(0.998)(1.003) - 1."""
    ts = np.array([ns("2024-01-08T10:00+00:00"), ns("2024-01-08T11:00+00:00"),
                   ns("2024-01-09T10:00+00:00"),
                   ns("2024-01-10T10:00+00:00"), ns("2024-01-10T11:00+00:00"),
                   ns("2024-01-10T12:00+00:00")])
    r = np.array([0.01, 0.02, -0.01, 0.005, -0.002, 0.003])
    daily = session_returns(r, ts)
    expected = [0.0302, -0.01, 1.005 * 0.998 * 1.003 - 1]
    np.testing.assert_allclose(daily, expected, rtol=1e-14)
    mean = (0.0302 - 0.01 + expected[2]) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in expected) / 2)
    s = summary(r * 1e5, 1e5, 252 * 24, ts=ts, min_sessions=3)
    assert s["sharpe_basis"] == DAILY and s["sessions"] == 3
    assert s["sharpe"] == pytest.approx(mean / sd * math.sqrt(252), rel=1e-12)
    assert s["annual_volatility"] == pytest.approx(sd * math.sqrt(252), rel=1e-12)
    downside = math.sqrt(0.01**2 / 3) * math.sqrt(252)
    assert s["sortino"] == pytest.approx(mean * 252 / downside, rel=1e-12)


def test_days_without_bars_are_no_sessions_and_bad_input_is_refused():
    ts = np.array([ns("2024-01-05T10:00+00:00"), ns("2024-01-08T10:00+00:00")])  # Fri, Mon
    np.testing.assert_allclose(session_returns(np.array([0.01, 0.02]), ts), [0.01, 0.02])
    assert session_returns(np.zeros(0), np.zeros(0, dtype=np.int64)).size == 0
    with pytest.raises(ValueError, match="time order"):
        session_returns(np.zeros(2), ts[::-1])
    with pytest.raises(ValueError, match="one value per return"):
        session_returns(np.zeros(3), ts)


# -- the headline basis -------------------------------------------------------------------------


def test_intraday_noise_that_nets_out_every_day_has_no_daily_risk():
    """Every day +1%, -1%, then whatever brings the day to exactly +0.1%: the per-bar returns
    vary, the daily ones are constant, so the daily volatility is 0, the daily Sharpe and
    Sortino undefined (None), and the per-bar figures are still there."""
    days = 30
    ts = minute_bars(days, per_day=3)
    last = 1.001 / (1.01 * 0.99) - 1
    r = np.tile([0.01, -0.01, last], days)
    s = summary(r, 1.0, 3 * 252, ts=ts)
    np.testing.assert_allclose(session_returns(r, ts), 0.001, rtol=1e-12)
    assert s["sharpe_basis"] == DAILY and s["sessions"] == days
    assert s["annual_volatility"] == pytest.approx(0.0, abs=1e-15)
    assert s["sortino"] is None
    assert s["sharpe_per_bar"] == pytest.approx(sharpe(r, 3 * 252))
    assert s["annual_volatility_per_bar"] == pytest.approx(annual_volatility(r, 3 * 252))


def test_days_alternating_two_returns_known_sharpe():
    """Daily returns alternate +2% and -1% (two bars a day): mean 0.5%, sample sd
    0.015 sqrt(n / (n - 1)) / ... computed by hand below."""
    days = 40
    ts = minute_bars(days, per_day=2)
    up, down = math.sqrt(1.02) - 1, math.sqrt(0.99) - 1  # two equal bars compound to the day
    r = np.array([up, up, down, down] * (days // 2))
    daily = np.array([0.02, -0.01] * (days // 2))
    sd = math.sqrt(((0.015**2) * days) / (days - 1))
    s = summary(r, 1.0, 2 * 252, ts=ts)
    assert s["sharpe"] == pytest.approx(0.005 / sd * math.sqrt(252), rel=1e-9)
    assert s["sharpe"] == pytest.approx(float(np.mean(daily) / np.std(daily, ddof=1) * 252**0.5))


def _minute_series(sessions: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """One-minute bars of the CME session (1380 a day, Sunday-Friday evenings) for `sessions`
    trading days from 2024-02-25 (across the change to daylight time), returns with a drift."""
    opens = pd.bdate_range("2024-02-26", periods=sessions, tz="America/Chicago") - pd.Timedelta(
        hours=7)  # 17:00 of the previous calendar day, local time
    ts = np.concatenate([o.value + (1 + np.arange(1380)) * MIN_NS for o in opens])
    assert ts[0] == ns("2024-02-25T17:01-06:00")
    r = np.random.default_rng(seed).normal(2e-6, 4e-4, ts.size)
    return ts, r


def _pandas_daily(r: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Daily returns the pandas way: local Chicago time, a bar after 16:00 belongs to the next
    day, compounded per day."""
    local = pd.to_datetime(ts, unit="ns", utc=True).tz_convert("America/Chicago")
    midnight = local.normalize()
    after_close = (local - midnight) > pd.Timedelta(hours=16)
    day_of = midnight.tz_localize(None) + pd.to_timedelta(after_close.astype(int), "D")
    return ((1 + pd.Series(r, index=day_of)).groupby(level=0).prod() - 1).to_numpy()


def test_daily_figures_match_empyrical_on_pandas_daily_returns():
    ts, r = _minute_series(45)
    assert ts[-1] == ns("2024-04-26T16:00-05:00")
    daily = _pandas_daily(r, ts)
    assert daily.size == 45
    np.testing.assert_allclose(session_returns(r, ts, CME), daily, rtol=1e-12, atol=1e-15)
    s = summary(r * 1e5, 1e5, 1380 * 252, ts=ts, session=CME)
    assert s["sharpe_basis"] == DAILY and s["sessions"] == 45 and s["bars"] == 45 * 1380
    for key, fn in (("sharpe", empyrical.sharpe_ratio), ("sortino", empyrical.sortino_ratio),
                    ("annual_volatility", empyrical.annual_volatility)):
        assert s[key] == pytest.approx(fn(daily, annualization=252), rel=1e-9), key
    for key, fn in (("sharpe_per_bar", empyrical.sharpe_ratio),
                    ("sortino_per_bar", empyrical.sortino_ratio),
                    ("annual_volatility_per_bar", empyrical.annual_volatility)):
        assert s[key] == pytest.approx(fn(r, annualization=1380 * 252), rel=1e-9), key


def test_the_daily_figure_needs_min_daily_sessions_sessions():
    ts, r = _minute_series(MIN_DAILY_SESSIONS)
    enough = summary(r, 1.0, 1380 * 252, ts=ts, session=CME)
    short = slice(0, (MIN_DAILY_SESSIONS - 1) * 1380)
    fewer = summary(r[short], 1.0, 1380 * 252, ts=ts[short], session=CME)
    assert (enough["sharpe_basis"], enough["sessions"]) == (DAILY, MIN_DAILY_SESSIONS)
    assert (fewer["sharpe_basis"], fewer["sessions"]) == (PER_BAR, MIN_DAILY_SESSIONS - 1)
    assert fewer["sharpe"] == fewer["sharpe_per_bar"] == sharpe(r[short], 1380 * 252)
    assert fewer["sortino"] == fewer["sortino_per_bar"] == sortino(r[short], 1380 * 252)
    assert enough["sharpe"] == pytest.approx(
        empyrical.sharpe_ratio(session_returns(r, ts, CME), annualization=252), rel=1e-12)


def test_without_timestamps_or_with_one_bar_a_day_the_figures_are_per_bar():
    r = np.random.default_rng(1).normal(1e-4, 1e-2, 300)
    no_ts = summary(r, 1.0, 252)
    assert (no_ts["sharpe_basis"], no_ts["sessions"]) == (PER_BAR, None)
    assert no_ts["sharpe"] == no_ts["sharpe_per_bar"] == sharpe(r, 252)
    daily_bars = minute_bars(300, per_day=1)
    one_a_day = summary(r, 1.0, 252, ts=daily_bars)
    assert (one_a_day["sharpe_basis"], one_a_day["sessions"]) == (PER_BAR, 300)
    assert one_a_day["sharpe"] == no_ts["sharpe"]


def test_the_daily_figure_does_not_depend_on_the_bars_per_year():
    ts, r = _minute_series(25)
    a, b = (summary(r, 1.0, ppy, ts=ts, session=CME) for ppy in (1380 * 252, 1440 * 365))
    assert a["sharpe"] == b["sharpe"] and a["sharpe_per_bar"] != b["sharpe_per_bar"]


def test_the_basis_line_says_what_a_table_shows():
    assert sharpe_basis_text(DAILY) == "Sharpe: daily (session) returns, annualised x sqrt(252)"
    assert sharpe_basis_text(DAILY, sessions=23).endswith("sqrt(252) (23 sessions)")
    assert sharpe_basis_text(PER_BAR, 347_760.0, 3) == (
        "Sharpe: per-bar returns, annualised x sqrt(N), N = 347,760 bars a year "
        f"(3 sessions, fewer than {MIN_DAILY_SESSIONS})")
    assert sharpe_basis_text(PER_BAR) == (
        "Sharpe: per-bar returns, annualised x sqrt(N), N = bars a year")
    with pytest.raises(ValueError, match="basis"):
        sharpe_basis_text("weekly")


def test_a_tables_basis_lines_one_per_basis_with_what_its_rows_share():
    """Rows without a basis are per-bar (the trainer's figures); N and the session count are
    named where every row of that basis has the same."""
    rows = [{"sharpe_basis": DAILY, "sessions": 40, "periods_per_year": 98_280.0},
            {"sharpe_basis": DAILY, "sessions": 41, "periods_per_year": 98_280.0},
            {"sharpe_basis": PER_BAR, "sessions": 4, "periods_per_year": 98_280.0},
            {"sharpe": 1.5}]
    assert sharpe_basis_lines(rows) == [
        "Sharpe: daily (session) returns, annualised x sqrt(252)",
        "Sharpe: per-bar returns, annualised x sqrt(N), N = bars a year"]
    assert sharpe_basis_lines(rows[2:3]) == [sharpe_basis_text(PER_BAR, 98_280.0, 4)]
    assert sharpe_basis_lines([{"sharpe": 1.0}]) == [sharpe_basis_text(PER_BAR)]
    assert sharpe_basis_lines([]) == []
