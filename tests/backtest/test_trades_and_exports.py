"""Trades reconcile with the equity curve; results export and read back; report input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from foxhunt.backtest import (
    SmaCross,
    extract_trades,
    read_table,
    report_series,
    run_backtest,
    write_bars,
    write_table,
    write_trades,
)
from foxhunt.backtest.results import bars_table, trades_table
from foxhunt.backtest.strategies import RandomActions
from foxhunt.env import EnvConfig
from foxhunt.errors import ConfigError
from foxhunt.report import normalise

from .builders import instrument, synth


@pytest.fixture(scope="module")
def results():
    m = synth(2500)
    return run_backtest(m.bars, instrument(), policies={"random": RandomActions(5),
                                                        "sma": SmaCross(10, 30)},
                        windows=[(100, 800), (1200, 1500)],
                        env_config=EnvConfig(flatten_at_session_end=True,
                                             stop_atr_multiples=(1.0, 3.0)), device="cpu")


def test_trades_reconcile_with_the_pnl_after_the_final_flatten(results):
    reasons = set()
    for r in results:
        t = r.trades
        assert (r.position[-1], r.actions[-1].tolist()) == (0.0, [0, 0, 0])
        assert t["gross_pnl"].sum() - t["costs"].sum() == pytest.approx(r.total_pnl, abs=0.005)
        assert t["pnl"].sum() == pytest.approx(r.total_pnl, abs=0.005)
        assert t["costs"].sum() == pytest.approx(r.components["cost"].sum(), abs=0.005)
        assert r.equity[-1] == pytest.approx(r.capital + r.total_pnl, abs=1e-6)
        assert (t["bars_held"] == t["exit_bar"] - t["entry_bar"]).all()
        assert (t["entry_bar"] > r.window[0]).all() and (t["exit_bar"] < r.window[1]).all()
        assert (np.diff(t["entry_bar"]) >= 0).all()
        reasons |= set(t["exit_reason"])
    assert reasons == {"signal", "stop", "session", "end"}


def test_a_flip_splits_into_two_trades_and_scaling_stays_in_one():
    """long 1 -> long 3 -> short 2 -> flat: two trades, the flip's costs shared by contracts."""
    ts = np.arange(10, dtype=np.int64) * 60
    t = extract_trades(
        bar=np.array([1, 2, 4, 6]), kind=np.array([0, 0, 0, 0]),
        qty=np.array([1.0, 2.0, -5.0, 2.0]), price=np.array([100.0, 101.0, 104.0, 102.0]),
        cost=np.array([1.0, 2.0, 5.0, 2.0]), ts=ts, commission=1.0, point_value=10.0,
    )
    rows = t.records()
    assert [(r["side"], r["contracts"], r["entry_bar"], r["exit_bar"]) for r in rows] == [
        ("long", 3.0, 1, 4), ("short", 2.0, 4, 6)]
    assert rows[0]["entry_price"] == pytest.approx((100 + 2 * 101) / 3)
    assert rows[0]["costs"] == pytest.approx(1 + 2 + 3)
    assert rows[0]["pnl"] == pytest.approx((3 * 104 - 100 - 2 * 101) * 10 - 6)
    assert rows[1]["pnl"] == pytest.approx((104 - 102) * 2 * 10 - 4)
    assert rows[1]["entry_ts"] == 240


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json"])
def test_trades_and_bars_round_trip(results, tmp_path, suffix):
    for write, table in ((write_trades, trades_table), (write_bars, bars_table)):
        path = write(results, tmp_path / f"out{suffix}")
        back, expected = read_table(path), table(results)
        assert list(back) == list(expected)
        for k, v in expected.items():
            if v.dtype.kind in "iuf":
                np.testing.assert_array_equal(back[k].astype(np.float64), v.astype(np.float64),
                                              err_msg=k)
            else:
                assert back[k].astype(str).tolist() == v.tolist(), k
        assert [p.name for p in tmp_path.iterdir()] == [path.name]
        path.unlink()


def test_an_unknown_suffix_names_the_file_and_writes_nothing(results, tmp_path):
    target = tmp_path / "trades.xlsx"
    with pytest.raises(ConfigError, match="trades.xlsx") as err:
        write_trades(results, target)
    assert ".csv" in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="table"):
        write_table({"a": np.zeros(2)}, tmp_path / "table")


def test_to_dict_is_json_safe_and_feeds_the_report(results):
    d = results[0].to_dict()
    text = json.dumps(d, allow_nan=False)
    assert len(json.loads(text)["ts"]) == len(results[0].ts)
    assert {"ts", "close", "equity", "pnl", "position", "direction", "components", "trades",
            "metrics"} <= set(d)
    for key in ("sharpe", "total_return", "max_drawdown", "win_rate", "profit_factor", "trades",
                "turnover", "exposure"):
        assert key in d["metrics"]
    assert d["metrics"]["trades"] == len(results[0].trades)
    first_window = [r for r in results if r.window == results[0].window]
    series = report_series(first_window, "window 1", primary="random")
    report = normalise({"title": "t", "symbol": "SYN", "bars": "1min", "series": [series]})
    assert set(report.series[0].equity) == {"random", "sma"}
    assert len(report.series[0].trades) == len(results[0].trades)


def test_metrics_annualise_with_the_given_bars_per_year():
    m = synth(1500)
    per_year = 390 * 252.0
    observed, given = (
        run_backtest(m.bars, instrument(), policies={"sma": SmaCross(5, 20)}, device="cpu",
                     periods_per_year=ppy)[0]
        for ppy in (None, per_year)
    )
    assert given.metrics["periods_per_year"] == per_year
    assert observed.metrics["periods_per_year"] != per_year
    assert given.metrics["sharpe_basis"] == "per-bar"  # 1,500 bars: under 4 sessions
    ratio = given.metrics["sharpe_per_bar"] / observed.metrics["sharpe_per_bar"]
    assert ratio == pytest.approx((per_year / observed.metrics["periods_per_year"]) ** 0.5)
    assert given.metrics["sharpe"] == given.metrics["sharpe_per_bar"]


def test_a_window_of_many_sessions_reports_the_sharpe_of_its_daily_returns():
    """30 sessions of 390 one-minute bars: the headline Sharpe, Sortino and volatility are
    those of the equity's daily returns (the compounded returns of each session's bars, on the
    capital), 252 a year, as empyrical computes them from pandas' daily grouping; the per-bar
    figures stay under `*_per_bar`, and only they depend on the bars per year."""
    import empyrical
    import pandas as pd

    m = synth(30 * 390)
    inst = instrument()
    per_year = 390 * 252.0
    a, b = (run_backtest(m.bars, inst, policies={"sma": SmaCross(5, 20)}, device="cpu",
                         periods_per_year=ppy)[0] for ppy in (per_year, 2 * per_year))
    r = a.pnl[1:] / a.capital
    day = pd.to_datetime(a.ts[1:], unit="ns", utc=True).normalize()  # the session is in UTC
    daily = ((1 + pd.Series(r, index=day)).groupby(level=0).prod() - 1).to_numpy()
    assert a.metrics["sharpe_basis"] == "daily" and a.metrics["sessions"] == daily.size == 30
    assert a.metrics["sharpe"] == pytest.approx(empyrical.sharpe_ratio(daily, annualization=252),
                                                rel=1e-9)
    assert a.metrics["sortino"] == pytest.approx(
        empyrical.sortino_ratio(daily, annualization=252), rel=1e-9)
    assert a.metrics["annual_volatility"] == pytest.approx(
        empyrical.annual_volatility(daily, annualization=252), rel=1e-9)
    assert a.metrics["sharpe_per_bar"] == pytest.approx(
        empyrical.sharpe_ratio(r, annualization=per_year), rel=1e-9)
    assert b.metrics["sharpe"] == a.metrics["sharpe"]
    assert b.metrics["sharpe_per_bar"] == pytest.approx(a.metrics["sharpe_per_bar"] * 2**0.5)
