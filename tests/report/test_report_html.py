"""The HTML writer without a browser: offline page, tables, chart data, decimation, writes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from foxhunt.report import ReportDataError, render_report, write_report
from foxhunt.report.charts import MAX_TRADE_MARKERS, _direction_from_trades
from foxhunt.report.data import normalise
from foxhunt.report.decimate import decimate, rolling_shares, time_segments
from foxhunt.report.format import fmt_integer, fmt_metric, fmt_number, fmt_percent, label
from foxhunt.report.perf import compounded

from .builders import minimal, minute_ts, report


def payload(page: str) -> dict:
    m = re.search(
        r'<script type="application/json" id="foxhunt-report-data">(.*?)</script>', page, re.DOTALL
    )
    assert m, "no chart data block"

    def no_constants(name):
        raise AssertionError(f"non-JSON constant {name} in chart data")

    return json.loads(m.group(1), parse_constant=no_constants)


def html_attr(page: str, name: str) -> str:
    return re.search(rf'<html[^>]* {name}="([^"]*)"', page).group(1)


def strip_comments(page: str) -> str:
    return re.sub(r"/\*.*?\*/", "", page, flags=re.DOTALL)


def test_page_is_self_contained_and_offline():
    page = render_report(report())
    assert page.startswith("<!DOCTYPE html>")
    # No URL at all outside /* licence comments */, and no external src/href anywhere.
    code = strip_comments(page)
    assert "http://" not in code and "https://" not in code
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.IGNORECASE)
    assert not re.search(r"<script[^>]+src=", page, re.IGNORECASE)
    assert not re.search(r"<link[^>]+stylesheet", page, re.IGNORECASE)
    # In-page links, and the trades CSV as a data: URL (a download, never a fetch).
    assert all(h.startswith(("#", "data:text/csv;charset=utf-8;base64,"))
               for h in re.findall(r'href="([^"]*)"', page))
    # The CSP forbids every fetch; uPlot and its licence are inlined.
    assert "default-src 'none'" in page and "connect-src 'none'" in page
    assert "var uPlot=function()" in page and "Permission is hereby granted" in page


def test_chart_count_matches_the_data():
    page = render_report(report(n_series=2))
    charts = payload(page)["charts"]
    # performance: the rolling Sharpe (the two series overlap in time, so no chain: the first
    # alone); series 0: equity, drawdown, price, action mix, components; series 1 has no
    # components; training: loss, mean Q, val Sharpe, grad norm, TD p99, flat.
    assert len(charts) == 1 + 5 + 4 + 6
    assert html_attr(page, "data-charts-expected") == "16"
    assert html_attr(page, "data-charts-rendered") == "0" and html_attr(page, "data-errors") == ""
    assert all(f'id="{c["id"]}"' in page for c in charts)
    kinds = [c["kind"] for c in charts]
    assert kinds.count("price") == 2 and kinds.count("mix") == 2


def test_render_is_deterministic_for_the_same_data():
    assert render_report(report()) == render_report(report())


def test_tables_format_numbers_and_missing_values():
    data = report()
    data["folds"][0]["test"]["sharpe"] = None
    data["folds"][1]["val"]["return"] = float("nan")
    page = render_report(data)
    assert "\u2014" in page  # em dash for missing
    assert "1.23%" in page  # val return 0.0123
    assert "\u22120.45%" in page  # test return -0.0045 with a real minus sign
    assert "\u221e" in page  # profit factor inf
    assert re.search(r'<td class="num[^"]*">9</td>', page)  # trades as an integer
    assert "Sharpe vs best baseline</th>" in page
    assert "Mean" in page


def test_formatters():
    assert fmt_percent(0.0523) == "5.23%"
    assert fmt_percent(-0.1) == "\u221210.00%"
    assert fmt_number(1234.5) == "1,234.50" and fmt_number(None) == "\u2014"
    assert fmt_number(float("nan")) == "\u2014" and fmt_number(0.0012) == "0.0012"
    assert fmt_integer(12345.0) == "12,345"
    assert fmt_metric("max_drawdown", 0.25) == "25.00%" and fmt_metric("trades", 3) == "3"
    assert fmt_metric("sharpe", 1.2345) == "1.23"
    assert (
        label("profit_factor") == "Profit factor" and label("some_new_metric") == "Some new metric"
    )


def test_text_is_escaped_everywhere():
    data = report(n_series=1)
    data["title"] = "<script>alert(1)</script>"
    data["series"][0]["name"] = "x</script><b>"
    data["series"][0]["equity"] = {"</script>agent": data["series"][0]["equity"]["agent"]}
    page = render_report(data)
    assert (
        "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    )
    assert "x</script><b>" not in page
    assert payload(page)["charts"][0]["series"][0]["label"] == "</script>agent"


def test_single_fold_no_trades_and_no_optional_fields():
    data = report(n_series=1, folds=1)
    s = data["series"][0]
    for key in ("trades", "direction", "components"):
        del s[key]
    data["folds"][0].pop("baselines")
    page = render_report(data)
    charts = payload(page)["charts"]
    assert len(charts) == 1 + 4 + 6  # rolling Sharpe, the series, training
    assert "No trades in this window." in page and "Trade list" not in page
    assert '<tr class="mean">' not in page  # one fold: no mean row
    assert "agent against baselines</h3>" not in page
    assert "derived from the trade list" in page
    mix = next(c for c in charts if c["kind"] == "mix")
    assert mix["series"][0]["y"][-1] == pytest.approx(1.0)  # all flat
    assert mix["series"][1]["y"][-1] == 0.0


def test_minimal_data_renders_a_page_without_charts():
    page = render_report(minimal())
    assert html_attr(page, "data-charts-expected") == "0"
    assert "no folds, series, training log or metrics" in page


def test_nan_values_become_gaps_in_chart_data():
    data = report(n_series=1)
    data["series"][0]["equity"]["flat"] = [None] * 400
    data["series"][0]["close"][3] = float("nan")
    charts = payload(render_report(data))["charts"]
    equity = next(c for c in charts if c["group"] == "s0")
    assert equity["series"][2]["y"] == [None] * 400
    rolling = next(c for c in charts if c["group"] == "oos")
    assert [s["label"] for s in rolling["series"]] == ["agent", "buy-and-hold"]  # flat: no data
    price = next(c for c in charts if c["kind"] == "price")
    assert price["series"][0]["y"][3] is None


def test_long_series_are_decimated_keeping_extremes():
    n = 60_000
    data = report(n_series=1, n=n)
    agent = np.asarray(data["series"][0]["equity"]["agent"])
    agent[12_345] = agent.max() + 5_000  # a spike and a crash the chart must show
    agent[45_678] = agent.min() - 7_000
    data["series"][0]["equity"]["agent"] = agent.tolist()
    page = render_report(data, max_points=2000)
    for c in payload(page)["charts"]:
        if c["xkind"] == "bar":
            assert len(c["x"]) <= 2000
            assert c["x"][-1] == n - 1
            assert c["x"][0] == 0 or c["group"] == "oos"  # the rolling Sharpe: first full window
    equity = next(c for c in payload(page)["charts"] if c["group"] == "s0")
    ys = equity["series"][0]["y"]
    grown = compounded(agent)  # the chart draws the compounded curve
    assert int(grown.argmax()) == 12_345 and int(grown.argmin()) == 45_678
    assert max(ys) == pytest.approx(grown.max()) and min(ys) == pytest.approx(grown.min())
    assert 12_345 in equity["x"] and 45_678 in equity["x"]
    assert "of 60,000 bars plotted (min/max-preserving decimation)" in page
    assert len(page.encode()) < 1_500_000


def test_decimate_keeps_min_max_of_every_column():
    rng = np.random.default_rng(1)
    cols = [rng.normal(size=10_001).cumsum() for _ in range(3)]
    idx = decimate(cols, 1000)
    assert len(idx) <= 1000 and np.all(np.diff(idx) > 0)
    for c in cols:
        assert c[idx].max() == c.max() and c[idx].min() == c.min()
    assert decimate(cols, 20_000).tolist() == list(range(10_001))


def test_time_segments_are_exact_for_sessions_and_bounded_otherwise():
    ts = np.asarray(minute_ts(2000, per_session=390))
    seg = time_segments(ts)
    assert len(seg) <= 2 * (2000 // 390 + 1)

    def decode(segments, i):
        s = max((x for x in segments if x[0] <= i), key=lambda x: x[0])
        return s[1] + (i - s[0]) * s[2]

    assert all(decode(seg, i) == ts[i] // 1_000_000 for i in range(2000))
    irregular = np.cumsum(np.random.default_rng(2).integers(1, 10_000, 5000)) * 1_000_000_000
    seg = time_segments(irregular, max_segments=100)
    assert len(seg) <= 100
    ms = irregular // 1_000_000
    assert all(ms[0] <= decode(seg, i) <= ms[-1] for i in range(0, 5000, 7))


def test_rolling_shares_and_direction_from_trades():
    d = np.array([0, 0, 1, 1, 2, 2, 2, 0])
    sh = rolling_shares(d, 4)
    assert sh[:, 3].tolist() == [0.5, 0.5, 0.0]
    assert sh[:, 7].tolist() == [0.25, 0.0, 0.75]
    assert np.allclose(sh.sum(axis=0), 1.0)
    s = normalise(report(n_series=1)).series[0]
    derived = _direction_from_trades(s)
    assert derived.tolist() == s.direction.tolist()


def test_trade_markers_map_to_bars():
    data = report(n_series=1)
    s = data["series"][0]
    s["trades"][0]["entry_ts"] += 30_000_000_000  # between bars: drawn on the next bar
    s["trades"].append(
        {**s["trades"][0], "entry_ts": s["ts"][0] - 10**12, "exit_ts": s["ts"][0] - 10**11}
    )
    s["trades"].append({**s["trades"][1], "exit_ts": None, "exit_price": None})  # still open
    price = next(c for c in payload(render_report(data))["charts"] if c["kind"] == "price")
    m = price["markers"]
    assert m["ei"] == [41, 200, 200] and m["es"] == [1, 2, 2]
    assert m["xi"] == [100, 300]


def test_many_trades_are_subsampled_for_markers():
    data = report(n_series=1, n=20_000)
    s = data["series"][0]
    s["trades"] = [
        {
            "entry_ts": s["ts"][i],
            "exit_ts": s["ts"][i + 1],
            "entry_price": 4000.0,
            "exit_price": 4001.0,
            "side": "long",
            "pnl": 50.0,
        }
        for i in range(0, 19_998, 3)
    ]
    page = render_report(data)
    price = next(c for c in payload(page)["charts"] if c["kind"] == "price")
    assert len(price["markers"]["ei"]) == MAX_TRADE_MARKERS
    assert f"Markers for {MAX_TRADE_MARKERS:,} of 6,666 trades" in page
    assert "6,166 more trades not listed (all are in the CSV)." in page


def test_write_report_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "deep" / "report.html"
    assert write_report(report(), out) == out
    first = out.read_text()
    assert first == render_report(report())
    assert os.listdir(out.parent) == ["report.html"]
    # A bad input leaves the previous report as it was.
    with pytest.raises(ReportDataError):
        write_report({"title": "broken"}, out)
    assert out.read_text() == first
    # A failing rename leaves no temporary file behind.

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_report(report(n_series=1), out)
    assert out.read_text() == first and os.listdir(out.parent) == ["report.html"]


def test_assets_ship_with_the_package():
    assets = Path(__import__("foxhunt.report", fromlist=["x"]).__file__).with_name("assets")
    names = {p.name for p in assets.iterdir()}
    assert {
        "uPlot.iife.min.js",
        "uPlot.min.css",
        "uPlot.LICENSE",
        "report.js",
        "report.css",
        "errors.js",
    } <= names
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"report/assets/*"' in pyproject


def _section(page: str, anchor: str) -> str:
    start = page.index(f'<section id="{anchor}"')
    return page[start : page.index("</section>", start)]


def test_every_sharpe_table_says_its_basis():
    """Fold figures without a `sharpe_basis` are the trainer's per-bar ones: the cards, the fold
    table and the baselines table say so in their headers and a line under the table; the
    metrics table names each row's basis and has one line per basis."""
    data = report()
    data["metrics"] = [
        {"policy": "agent", "window": "fold 0 test", "sharpe": 1.1, "sharpe_basis": "daily",
         "sessions": 40, "sharpe_per_bar": 9.9, "periods_per_year": 98_280.0},
        {"policy": "agent", "window": "fold 1 test", "sharpe": 7.5, "sharpe_basis": "per-bar",
         "sessions": 3, "sharpe_per_bar": 7.5, "periods_per_year": 98_280.0},
    ]
    page = render_report(data)
    basis = "(annualised from 1m bars)"
    assert f"Mean validation Sharpe {basis}" in page and f"Mean test Sharpe {basis}" in page
    folds = _section(page, "folds")
    assert f"<th class=num>Val Sharpe {basis}</th>" in folds
    assert f"<th class=num>Test Sharpe {basis}</th>" in folds
    assert f'class="group">Test Sharpe {basis}</th>' in folds
    per_bar_line = "Sharpe: per-bar returns, annualised x sqrt(N), N = bars a year"
    assert folds.count(f'<p class="note">{per_bar_line}</p>') == 2  # fold and baselines tables
    metrics = _section(page, "metrics")
    assert "<th scope=row>Sharpe basis</th>" in metrics and ">daily</td>" in metrics
    assert "<th scope=row>Sharpe per-bar</th>" in metrics and ">40</td>" in metrics
    assert "<th scope=row>Sharpe (annualised from daily returns)</th>" in metrics
    assert "<th scope=row>Sharpe (annualised from 1m bars)</th>" in metrics
    assert '<p class="note">Sharpe: daily (session) returns, annualised x sqrt(252) (40 sessions)' \
        in metrics
    assert ("Sharpe: per-bar returns, annualised x sqrt(N), N = 98,280 bars a year "
            "(3 sessions, fewer than 20)") in metrics


def test_fold_figures_that_carry_a_daily_basis_are_labelled_daily():
    data = report()
    for f in data["folds"]:
        for m in (f["val"], f["test"], *f["baselines"].values()):
            m["sharpe_basis"] = "daily"
    folds = _section(render_report(data), "folds")
    assert "<th class=num>Test Sharpe (annualised from daily returns)</th>" in folds
    assert "bars)" not in folds
    assert "Sharpe: daily (session) returns, annualised x sqrt(252)" in folds
