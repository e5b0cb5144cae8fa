"""The report in headless Chromium: loads offline, no console errors, every chart drawn.

The page records its own state on <html> (data-charts-expected / -rendered, data-errors,
data-report-ready); `--dump-dom` reads it back after the scripts ran. Chromium's log is
checked too: the report writes nothing to the console, so any console line is a failure.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from foxhunt.report import write_report
from foxhunt.report.browser import dump_dom, find_chromium, screenshot
from foxhunt.report.sample import sample_report_data

from .builders import T0, report, series, training
from .pngdecode import decode_png

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="headless Chromium not installed (Debian: apt-get install chromium; .ci/run does)",
)


def page_state(html) -> tuple[dict[str, str], str, list[str]]:
    run = dump_dom(html)
    tag = re.search(r"<html[^>]*>", run.stdout)
    assert tag, f"no DOM dumped: {run.stdout[:300]!r}"
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', tag.group(0)))
    return attrs, run.stdout, run.console_messages()


def assert_clean(attrs: dict[str, str], console: list[str], expected: int) -> None:
    assert attrs.get("data-errors") == "", attrs.get("data-errors")
    assert console == [], console
    assert attrs.get("data-report-ready") == "1"
    assert attrs.get("data-charts-expected") == str(expected)
    assert attrs.get("data-charts-rendered") == str(expected)


@pytest.fixture(scope="module")
def demo_html(tmp_path_factory):
    return write_report(
        sample_report_data(n_folds=3, test_bars=2000, epochs=8),
        tmp_path_factory.mktemp("report") / "demo.html",
    )


def test_demo_report_loads_with_all_charts_and_no_errors(demo_html):
    attrs, dom, console = page_state(demo_html)
    assert_clean(attrs, console, 2 + 3 * 5 + 6)  # performance: chained equity, rolling Sharpe
    # uPlot drew canvases and legends for every chart.
    assert len(re.findall(r"<canvas", dom)) >= 23
    assert dom.count('class="uplot') >= 23


def test_edge_cases_render_without_errors(tmp_path):
    data = report(n_series=1, folds=1)
    odd = series(
        400, "nan-heavy, no trades", seed=3, components=False, direction=False, trades=False
    )
    odd["equity"]["buy-and-hold"] = [None] * 400  # a baseline with no values at all
    odd["close"][10:50] = [None] * 40
    one_bar = {
        "name": "one bar",
        "ts": [odd["ts"][0]],
        "close": [4000.0],
        "equity": {"agent": [100_000.0]},
    }
    data["series"] += [odd, one_bar]
    data["training"] = training(folds=1, epochs=1)
    data["training"][0]["loss"] = None
    path = write_report(data, tmp_path / "edge.html")
    attrs, _, console = page_state(path)
    # Performance: the rolling Sharpe (the three series overlap in time: no chain, the first
    # alone). Series: 5 + 4 + 4 charts. Training (no loss values): mean Q, val Sharpe,
    # grad norm, TD p99, flat.
    assert_clean(attrs, console, 1 + 13 + 5)


def test_external_resources_are_blocked_and_reported(tmp_path):
    """The error capture works: a page that tries to fetch anything is flagged, not silent."""
    path = write_report(report(n_series=1), tmp_path / "r.html")
    text = path.read_text().replace(
        "<main", '<img src="https://example.invalid/x.png" alt=""><main', 1
    )
    path.write_text(text)
    attrs, _, _ = page_state(path)
    assert "content security policy" in attrs.get("data-errors", "")


def test_screenshot_shows_the_report(demo_html, tmp_path):
    png = screenshot(demo_html, tmp_path / "shot.png", width=1400, height=4000)
    data = png.read_bytes()
    assert len(data) > 50_000
    px = decode_png(data)
    assert px.shape[:2] == (4000, 1400)
    rgb = px[..., :3].reshape(-1, 3)
    colours, counts = np.unique(rgb[::7], axis=0, return_counts=True)
    assert len(colours) > 200, "too few colours: blank or broken page"
    assert counts.max() / counts.sum() < 0.9, "one colour covers the page"

    def near(colour, tol=40):
        return int((np.abs(rgb.astype(int) - colour).sum(axis=1) < tol).sum())

    assert near((15, 23, 42)) > 50_000  # the dark header band
    assert near((37, 99, 235)) > 500  # the agent's equity line (blue)
    assert near((22, 163, 74)) > 200 and near((220, 38, 38)) > 200  # long / short markers and mix


LAYOUT_PROBE = """<script>(function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var root = document.documentElement, worst = 0, scrolled = 0, n = 0;
  document.querySelectorAll("main table").forEach(function (t) {
    n += 1;
    worst = Math.max(worst, Math.ceil(t.getBoundingClientRect().right));
    var wrap = t.closest(".table-wrap");
    if (wrap && wrap.scrollWidth > wrap.clientWidth) scrolled += 1;
  });
  root.setAttribute("data-layout", [window.innerWidth, root.scrollWidth, worst, scrolled, n].join(" "));
})();</script></body>"""


def wide_report() -> dict:
    """A run as the CLI builds it, at its widest: five folds with date windows, four baselines
    with long names, and every metric `foxhunt.metrics.summary` writes for each policy."""
    from foxhunt import metrics as fm

    from .builders import fold

    policies = ["agent", "buy-and-hold", "sma:10,30", "random:123456", "flat"]
    data = report(n_series=0, folds=5)
    data["kind"] = "run"
    data["metrics"], data["series"] = [], []
    for k, f in enumerate(data["folds"]):
        f.update(fold(k))
        f["window_times"] = {w: [T + 86_400 * 10**9 * j for j in (0, 1)]
                             for w, T in (("train", T0), ("val", T0 + 2), ("test", T0 + 3))}
        f["baselines"] = {p: {"sharpe": 0.1 * j, "return": 0.01 * j}
                          for j, p in enumerate(policies[1:])}
        s = series(400, f"fold {k} test", seed=k)
        s["ts"] = [t + k * 2 * 86_400 * 10**9 for t in s["ts"]]
        s["trades"] = []
        s["equity"] = {p: s["equity"][["agent", "buy-and-hold", "flat"][j % 3]]
                       for j, p in enumerate(policies)}
        s["fold"] = k
        data["series"].append(s)
        rng = np.random.default_rng(k)
        for p in policies:
            pnl = rng.normal(5, 300, 400)
            data["metrics"].append({"policy": p, "window": f"fold {k} test", **fm.summary(
                pnl, 100_000.0, 98_280.0, positions=np.sign(pnl), trade_pnls=pnl[:40],
                ts=np.asarray(s["ts"]))})
    return data


@pytest.mark.parametrize("kind", ["run", "backtest"])
def test_tables_fit_a_1280_px_window(tmp_path, kind):
    """At 1,280 px no table overflows the page (scrollWidth) or the window (each table's right
    edge), and none needs its own horizontal scroll bar."""
    data = wide_report()
    if kind == "backtest":  # as `foxhunt backtest --strategy ... --report` builds it
        s = data["series"][0]
        data = {"title": "ES 1min backtest", "symbol": "ES", "bars": "1min", "series": [s],
                "metrics": [{**m, "window": "bars 0..400"} for m in data["metrics"][:5]]}
    path = write_report(data, tmp_path / "wide.html")
    path.write_text(path.read_text().replace("</body>", LAYOUT_PROBE, 1))
    run = dump_dom(path, width=1280, height=2000)
    layout = re.search(r'data-layout="([^"]*)"', run.stdout)
    assert layout, run.stdout[:300]
    inner, scroll_width, right, scrolled, tables = map(int, layout.group(1).split())
    assert inner == 1280 and tables >= 3
    assert scroll_width <= 1280, f"the page is {scroll_width} px wide at a 1,280 px window"
    assert right <= 1280, f"a table ends at {right} px"
    assert scrolled == 0, f"{scrolled} tables scroll sideways"
