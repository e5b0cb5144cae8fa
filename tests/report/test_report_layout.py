"""Issue 34, point 6: dates, compounded returns, the out-of-sample section, titles, the CSV.

Known answers: the monthly table of a hand-made equity series, the chained equity against the
product of the windows' returns, the CSV's exact text, the title of each report kind.
"""

from __future__ import annotations

import csv
import io
import json
import re
from base64 import b64decode
from datetime import UTC, datetime

import numpy as np
import pytest

from foxhunt import metrics as fm
from foxhunt.report import perf, render_report
from foxhunt.report.csvfile import (
    PriceFormat,
    iso_utc,
    series_csv,
    write_results_trades_csv,
    write_trades_csv,
)
from foxhunt.report.data import normalise
from foxhunt.report.study import render_study_report

from .builders import minute_ts, report, series
from .test_report_html import payload


def ns(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1e9)


def daily_equity(days: list[str], returns: list[float], capital: float = 100_000.0) -> dict:
    """A series with one bar a day at 15:00 UTC whose bar returns (pnl / capital, bars 1..n-1)
    are `returns`: equity = capital + cumsum(pnl)."""
    ts = [ns(f"{d}T15:00:00") for d in days]
    pnl = np.concatenate(([0.0], np.asarray(returns) * capital))
    return {"ts": ts, "equity": (capital + np.cumsum(pnl)).tolist()}


# ---- monthly returns ---------------------------------------------------------------------

DAYS = ["2023-12-29", "2024-01-02", "2024-01-03", "2024-02-01", "2024-02-02", "2024-03-28",
        "2025-01-02"]
RETURNS = [0.01, 0.02, -0.05, 0.10, 0.03, -0.02]  # bars 1..6: Jan, Jan, Feb, Feb, Mar, Jan 2025


def test_monthly_returns_of_a_hand_made_series():
    s = daily_equity(DAYS, RETURNS)
    table = perf.monthly_returns(np.asarray(s["ts"]), perf.bar_returns(np.asarray(s["equity"])))
    jan, feb, mar = 1.01 * 1.02 - 1, 0.95 * 1.10 - 1, 0.03
    assert set(table) == {2024, 2025}
    assert table[2024][1] == pytest.approx(jan) and table[2024][2] == pytest.approx(feb)
    assert table[2024][3] == pytest.approx(mar) and 12 not in table[2024]  # the first bar: no return
    assert table[2024][0] == pytest.approx((1 + jan) * (1 + feb) * (1 + mar) - 1)  # compounded
    assert table[2025] == {1: pytest.approx(-0.02), 0: pytest.approx(-0.02)}


def test_the_monthly_table_on_the_page():
    s = daily_equity(DAYS, RETURNS)
    data = {"title": "t", "symbol": "ES", "bars": "1d", "series": [
        {"name": "w", "ts": s["ts"], "close": [1.0] * len(DAYS), "equity": {"agent": s["equity"]}}]}
    page = render_report(data)
    section = page[page.index('<section id="performance">'):]
    monthly = section[section.index("table class=\"dense monthly\""):]
    monthly = monthly[: monthly.index("</table>")]
    row_2024 = re.search(r"<tr><td>2024</td>(.*?)</tr>", monthly).group(1)
    cells = re.findall(r'<td class="num[^"]*">([^<]*)</td>', row_2024)
    assert cells[:4] == ["3.02%", "4.50%", "3.00%", ""]  # Jan, Feb, Mar, Apr (no bars)
    assert cells[-1] == f"{100 * (1.0302 * 1.045 * 1.03 - 1):.2f}%"  # the year, compounded
    assert "Monthly returns (compounded, UTC months): agent" in section


# ---- compounded returns and the chained out-of-sample path ---------------------------------


def fold_series(k: int, n: int = 390, seed: int = 0) -> dict:
    """A fold's test window: one session, a day after the last (disjoint in time)."""
    s = series(n, f"fold {k} test", seed=seed + k)
    shift = k * 2 * 86_400_000_000_000
    s["ts"] = [t + shift for t in s["ts"]]
    for t in s.get("trades", []):
        t["entry_ts"] += shift
        t["exit_ts"] += shift
    s["fold"] = k
    return s


def test_the_chained_equity_is_the_product_of_the_folds_test_returns():
    data = report(n_series=0, folds=3)
    data["series"] = [fold_series(k) for k in range(3)]
    d = normalise(data)
    chain = perf.chain(d.series)
    assert chain is not None and chain.names == ["fold 0 test", "fold 1 test", "fold 2 test"]
    assert chain.ts.size == 1 + 3 * 389 and chain.bounds == [0, 389, 778]
    for p in ("agent", "buy-and-hold", "flat"):
        # each fold's test return as metrics.summary computes it: pnl / capital, compounded
        fold_returns = []
        for s in data["series"]:
            e = np.asarray(s["equity"][p])
            fold_returns.append(fm.summary(np.diff(e), e[0], 98_280.0)["total_return"])
        product = np.prod([1 + r for r in fold_returns])
        assert chain.equity(p)[-1] == pytest.approx(product, rel=1e-12)
        assert fm.total_return(chain.returns[p]) == pytest.approx(product - 1, rel=1e-12)
    page = render_report(data)
    chained = next(c for c in payload(page)["charts"]
                   if c["group"] == "oos" and c["fmt"] == "money")
    agent = chained["series"][0]
    e0 = data["series"][0]["equity"]["agent"][0]
    assert agent["y"][-1] == pytest.approx(e0 * chain.equity("agent")[-1], rel=1e-6)
    assert chained["x"][-1] == chain.ts.size - 1
    assert "Out-of-sample equity, test windows chained (compounded)" in page
    assert "Rolling Sharpe (annualised from 1m bars)" in page
    assert "Sharpe (annualised from 1m bars)</th>" in page  # the performance table's header


def test_a_series_return_compounds_like_the_summary():
    """The 55.63% / 66.41% mismatch: a big winner's equity-end return adds the PnL, the summary
    compounds it; the page shows the compounded one everywhere."""
    s = series(400, "w", seed=1)
    e = np.asarray(s["equity"]["agent"])
    e = e[0] + (e - e[0]) * 40  # big moves, so compounding differs visibly from adding
    s["equity"] = {"agent": e.tolist()}
    summary = fm.summary(np.diff(e), e[0], 98_280.0)
    added = e[-1] / e[0] - 1
    page = render_report({"title": "t", "symbol": "ES", "bars": "1m", "series": [s]})
    shown = f"{100 * summary['total_return']:,.2f}%".replace("-", "\u2212")
    assert shown != f"{100 * added:,.2f}%".replace("-", "\u2212")
    stats = page[page.index('<div class="stats">'):]
    assert f'Return agent</span><span class="v">{shown}' in stats
    assert f"{100 * added:,.2f}%".replace("-", "\u2212") not in page
    equity = next(c for c in payload(page)["charts"] if c["group"] == "s0")
    assert equity["series"][0]["y"][-1] == pytest.approx(e[0] * (1 + summary["total_return"]),
                                                         rel=1e-6)


# ---- dates ---------------------------------------------------------------------------------


def test_fold_windows_show_utc_dates_of_their_first_and_last_bar():
    data = report(n_series=0, folds=2)
    ts = minute_ts(3000)
    for f in data["folds"]:
        f["window_times"] = {w: [ts[a], ts[b - 1]] for w, (a, b) in f["windows"].items()}
    folds = render_report(data)
    folds = folds[folds.index('<section id="folds">'):]
    folds = folds[: folds.index("</table>")]
    assert "Train window (UTC)" in folds
    first, last = datetime.fromtimestamp(ts[1250] / 1e9, UTC), datetime.fromtimestamp(
        ts[1499] / 1e9, UTC)
    cell = (f'<td class="win" title="bars 1,250 \u2013 1,500"><span>{first:%Y-%m-%d %H:%M}</span> '
            f"<span>{last:%Y-%m-%d %H:%M}</span></td>")
    assert cell in folds


def test_a_backtest_metrics_window_gets_its_dates():
    s = series(400, "ES 1min", seed=2)
    page = render_report({"title": "ES 1min backtest", "symbol": "ES", "bars": "1min",
                          "series": [s], "metrics": [
                              {"policy": "agent", "window": "bars 100..500", "sharpe": 1.0}]})
    start = datetime.fromtimestamp(s["ts"][0] / 1e9, UTC)
    assert f'<span class="dates">{start:%Y-%m-%d %H:%M} \u2013' in page


# ---- titles --------------------------------------------------------------------------------


def test_a_strategy_only_backtest_is_not_agent_against_baselines():
    s = series(400, "ES 1min", seed=2, components=False, trades=False)
    s["equity"] = {"buy-and-hold": s["equity"]["buy-and-hold"]}
    page = render_report({"title": "ES 1min backtest", "symbol": "ES", "bars": "1min",
                          "series": [s]})
    body = page[page.index("<body>"):page.index('<script type="application/json"')]
    assert "agent" not in body.lower()
    assert "foxhunt \u00b7 backtest report" in page and "<title>ES 1min backtest</title>" in page
    assert "Backtest of buy-and-hold over 2024-01-02 14:30" in page
    assert "Equity (compounded): buy-and-hold" in page
    two = {**s, "equity": {"buy-and-hold": s["equity"]["buy-and-hold"],
                           "sma:10,30": s["equity"]["buy-and-hold"]}}
    page = render_report({"title": "t", "symbol": "ES", "bars": "1min", "series": [two]})
    assert "Equity (compounded): buy-and-hold and sma:10,30" in page


def test_titles_per_report_kind():
    run = render_report(report())
    assert "foxhunt \u00b7 walk-forward run report" in run
    assert "Walk-forward run: 2 folds, each fold&#x27;s deployed model" in run
    assert "Equity (compounded): agent against baselines" in run
    checkpoint = render_report({**report(n_series=1, folds=0), "kind": "backtest"})
    assert "foxhunt \u00b7 backtest report" in checkpoint
    assert "Backtest of agent against baselines over" in checkpoint
    study = render_study_report({"study": "s1", "symbol": "ES", "bars": "1min",
                                 "metric": "sharpe", "trials": []})
    assert "<title>ES 1min tuning study s1</title>" in study
    assert "foxhunt \u00b7 tuning study report" in study
    with pytest.raises(Exception, match="kind must be one of run, backtest"):
        normalise({"title": "t", "symbol": "ES", "bars": "1m", "kind": "study"})


# ---- the trades CSV ------------------------------------------------------------------------


def test_prices_on_the_tick_grid_and_iso_times():
    assert iso_utc(1_704_205_800_000_000_000) == "2024-01-02T14:30:00Z"
    assert iso_utc(1_704_205_800_250_000_000) == "2024-01-02T14:30:00.25Z"
    six_e = PriceFormat(0.00005)
    assert six_e(1.0523000000000002) == "1.05230" and six_e(1.052324) == "1.05230"
    assert PriceFormat(0.25)(4000.2500000001) == "4000.25" and PriceFormat(0.25)(4000.13) == "4000.25"
    assert PriceFormat(None, [1.0523, 1.05235])(1.0523000000000002) == "1.05230"
    assert PriceFormat(None, [4000.0, 4001.0])(4000.0000000001) == "4000"


def test_the_trades_csv(tmp_path):
    s = series(400, "fold 0 test", seed=0)
    s["trades"][0]["entry_price"] = 4000.2500000000005
    s["trades"][0]["pnl"] = 1234.5000000000002
    data = {"title": "t", "symbol": "ES", "bars": "1m", "tick_size": 0.25, "series": [s]}
    path = write_trades_csv(data, tmp_path / "t.csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert list(rows[0]) == ["series", "trade", "side", "contracts", "entry_time", "entry_price",
                             "exit_time", "exit_price", "pnl", "exit_reason"]
    assert rows[0]["entry_time"] == iso_utc(s["ts"][40]) == "2024-01-02T15:10:00Z"
    assert rows[0]["entry_price"] == "4000.25" and rows[0]["pnl"] == "1234.50"
    assert rows[1]["side"] == "short" and rows[1]["contracts"] == "2"
    for r in rows:
        for k in ("entry_price", "exit_price"):
            assert re.fullmatch(r"\d+\.\d{2}", r[k]) and float(r[k]) * 4 == round(float(r[k]) * 4)
        for k in ("entry_time", "exit_time"):
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r[k])
    # the page offers the same CSV as a download
    page = render_report(data)
    href = re.search(r'href="data:text/csv;charset=utf-8;base64,([^"]+)"', page).group(1)
    assert b64decode(href).decode() == path.read_text() == series_csv(normalise(data).series[0], 0.25)


def test_backtest_results_as_csv(tmp_path):
    from foxhunt.backtest import parse_strategy, run_backtest
    from foxhunt.data.instruments import InstrumentRegistry
    from foxhunt.data.synth import SynthConfig, generate

    bars = generate(SynthConfig(n_bars=1500, seed=4)).bars
    instrument = InstrumentRegistry.load().get("SYN")
    results = run_backtest(bars, instrument, policies={"sma": parse_strategy("sma:5,20")},
                           windows=[(0, 1500)], device="cpu")
    assert len(results[0].trades) > 5
    path = write_results_trades_csv(results, tmp_path / "t.csv", instrument.tick_size)
    text = path.read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(results[0].trades)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rows[0]["entry_time"])
    assert all(re.fullmatch(r"-?\d+\.\d{2}", r[k]) for r in rows
               for k in ("entry_price", "exit_price", "pnl", "costs"))
    assert not re.search(r"\d\.\d{9,}", text)  # no float noise anywhere


# ---- a run's report data --------------------------------------------------------------------


def test_run_report_data_has_dates_folds_and_a_title(tmp_path):
    from foxhunt.backtest import parse_strategy, run_backtest
    from foxhunt.data.instruments import InstrumentRegistry
    from foxhunt.data.synth import SynthConfig, generate
    from foxhunt.report.run import FoldResults, run_report_data, window_times

    bars = generate(SynthConfig(n_bars=3000, seed=4)).bars
    instrument = InstrumentRegistry.load().get("SYN")
    folds = [{"fold": k, "windows": {"train": [0, 1000 + 500 * k],
                                     "val": [1000 + 500 * k, 1500 + 500 * k],
                                     "test": [1500 + 500 * k, 2000 + 500 * k]},
              "best_epoch": 1, "val": {"sharpe": 1.0}, "test": {"sharpe": 0.5}}
             for k in range(2)]
    run_dir = tmp_path / "myrun"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text("{}")
    (run_dir / "source.json").write_text(json.dumps({"symbol": "SYN", "bars": "1min"}))
    (run_dir / "folds.json").write_text(json.dumps(folds))
    per_fold = []
    for f in folds:
        results = run_backtest(bars, instrument, device="cpu", windows=[tuple(f["windows"]["test"])],
                               policies={"agent": parse_strategy("sma:5,20"),
                                         "buy-and-hold": parse_strategy("buy-and-hold")})
        per_fold.append(FoldResults(results, window_times(f["windows"], bars.ts), 0.25))
    data = run_report_data(run_dir, per_fold)
    assert data["kind"] == "run" and data["tick_size"] == 0.25
    assert data["title"] == "SYN 1min walk-forward run myrun: the agent's test windows against buy-and-hold"
    assert [s["fold"] for s in data["series"]] == [0, 1]
    assert data["folds"][1]["window_times"]["test"] == [int(bars.ts[2000]), int(bars.ts[2499])]
    assert run_report_data(run_dir, [list(r) for r in per_fold], bars=bars)["folds"] == data["folds"]
    page = render_report(data)
    assert "Out-of-sample equity, test windows chained (compounded)" in page
    chain = perf.chain(normalise(data).series)
    product = np.prod([1 + r.metrics["total_return"] for results in per_fold for r in results
                       if r.name == "agent"])
    assert chain.equity("agent")[-1] == pytest.approx(product, rel=1e-12)
    assert len(chain.returns["agent"]) == sum(len(r[0].pnl) - 1 for r in per_fold)


def test_backtest_run_records_the_window_dates_and_tick(tmp_path):
    """`backtest_run` hands `run_report_data` the folds' window times and the instrument's tick,
    so `foxhunt report RUN_DIR` shows dates without passing the bars twice."""
    from foxhunt.data.instruments import InstrumentRegistry
    from foxhunt.data.synth import SynthConfig, generate
    from foxhunt.features.config import FeatureConfig
    from foxhunt.report.run import backtest_run, run_report_data
    from foxhunt.training.config import TrainingSpec

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps(TrainingSpec().model_dump(mode="json")))
    (run_dir / "source.json").write_text(json.dumps(
        {"symbol": "SYN", "bars": "1min", "features": FeatureConfig().model_dump(mode="json")}))
    folds = [{"fold": k, "deployed": "flat", "test": {"sharpe": 0.0},  # flat: no checkpoint
              "windows": {"train": [0, 1000 + 500 * k], "val": [1000 + 500 * k, 1500 + 500 * k],
                          "test": [1500 + 500 * k, 2000 + 500 * k]}} for k in range(2)]
    (run_dir / "folds.json").write_text(json.dumps(folds))
    bars = generate(SynthConfig(n_bars=3000, seed=4)).bars
    per_fold = backtest_run(run_dir, bars, InstrumentRegistry.load().get("SYN"), device="cpu")
    data = run_report_data(run_dir, per_fold)
    assert data["tick_size"] == 0.25
    assert data["folds"][0]["window_times"] == {
        "train": [int(bars.ts[0]), int(bars.ts[999])], "val": [int(bars.ts[1000]), int(bars.ts[1499])],
        "test": [int(bars.ts[1500]), int(bars.ts[1999])]}
    assert data["title"].endswith("against buy-and-hold, sma:10,30, flat")
