"""One self-contained HTML file: tables rendered here, charts drawn in the page by uPlot.

The page carries everything it needs: uPlot's JS and CSS and foxhunt's own renderer are
inlined, the chart data sits in a `<script type="application/json">` block, and a
Content-Security-Policy forbids every network fetch. The renderer records its progress on the
`<html>` element (`data-charts-expected`, `data-charts-rendered`, `data-errors`,
`data-report-ready`), which the headless-browser test reads back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from foxhunt import metrics as fm
from foxhunt.fileio import write_text_atomic
from foxhunt.report import perf
from foxhunt.report.charts import Charts, policies_caption
from foxhunt.report.data import ReportData, Series, normalise
from foxhunt.report.decimate import MAX_CHART_POINTS
from foxhunt.report.format import fmt_integer, fmt_metric, fmt_time
from foxhunt.report.tables import (
    basis_words,
    cards,
    folds_section,
    metrics_section,
    monthly_table,
    series_stats,
    table,
    trade_list,
)

ASSETS = Path(__file__).with_name("assets")
UPLOT_VERSION = "1.6.32"
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)

FOOTER = (
    f"foxhunt \u00b7 self-contained report, works offline \u00b7 charts by uPlot {UPLOT_VERSION} "
    "(MIT License) \u00b7 times in UTC \u00b7 drag on a chart to zoom, double-click to reset"
)


@cache
def asset(name: str) -> str:
    """Text of a bundled asset (uPlot, the renderer, the style sheet)."""
    return (ASSETS / name).read_text(encoding="utf-8")


def render_report(data: dict[str, Any], max_points: int = MAX_CHART_POINTS) -> str:
    """The report page for `data` (contract: docs/report.md) as one HTML string."""
    if max_points < 16:
        raise ValueError("max_points must be at least 16")
    return _Page(normalise(data), max_points).html()


def write_report(
    data: dict[str, Any], path: Path | str, max_points: int = MAX_CHART_POINTS
) -> Path:
    """Render `data` and write it to `path` atomically (temp file + rename); returns the path."""
    return write_text_atomic(render_report(data, max_points), path)


BRANDS = {"run": "foxhunt \u00b7 walk-forward run report", "backtest": "foxhunt \u00b7 backtest report"}


def top(brand: str, title: str, meta: Iterable[tuple[str, Any]], subtitle: str = "") -> str:
    """The page's header bar: `brand`, the title, a line saying what the page holds and the
    `meta` (label, value) items."""
    items = "".join(
        f'<span class="meta-item"><span class="k">{k}</span> <b>{escape(str(v))}</b></span>'
        for k, v in meta
    )
    sub = f'<p class="subtitle">{escape(subtitle)}</p>' if subtitle else ""
    return (
        f'<header class="top"><div class="wrap"><div class="brand">{escape(brand)}</div>'
        f'<h1>{escape(title)}</h1>{sub}<div class="meta">{items}</div></div></header>'
    )


def page(title: str, header: str, body: str, plots: Charts) -> str:
    """The whole self-contained document around `header` and `body` (the run report and the
    study page share it): assets inlined, the charts' specs in the JSON data block."""
    payload = json.dumps(
        {"charts": plots.charts, "time": plots.time}, separators=(",", ":"), allow_nan=False
    ).replace("<", "\\u003c")
    return f"""<!DOCTYPE html>
<html lang="en" data-charts-expected="{len(plots.charts)}" data-charts-rendered="0" data-errors="">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="generator" content="foxhunt">
<title>{escape(title)}</title>
<script>{asset("errors.js")}</script>
<style>/* uPlot {UPLOT_VERSION} | MIT License | Copyright (c) 2022 Leon Sorokin */
{asset("uPlot.min.css")}</style>
<style>{asset("report.css")}</style>
</head>
<body>
{header}
<main class="wrap">
{body}
</main>
<footer class="wrap">{FOOTER}</footer>
<script type="application/json" id="foxhunt-report-data">{payload}</script>
<script>/*! uPlot {UPLOT_VERSION}, inlined unchanged.
{asset("uPlot.LICENSE").strip()}
*/
{asset("uPlot.iife.min.js")}</script>
<script>{asset("report.js")}</script>
</body>
</html>
"""


class _Page:
    """Builds the page: the tables and the charts' placeholders, the chart specs in a JSON
    block beside them."""

    def __init__(self, data: ReportData, max_points: int):
        self.d = data
        self.plots = Charts(max_points)

    def header(self) -> str:
        d = self.d
        return top(BRANDS[d.kind], d.title,
                   (("Symbol", d.symbol), ("Bars", d.bars), ("Generated", d.generated)),
                   self.subtitle())

    def policies(self) -> list[str]:
        names: list[str] = []
        for s in self.d.series:
            names += [p for p in s.equity if p not in names]
        return names

    def subtitle(self) -> str:
        """One line saying what the page holds."""
        d = self.d
        span = ""
        if d.series:
            first = min(int(s.ts[0]) for s in d.series)
            last = max(int(s.ts[-1]) for s in d.series)
            span = f" over {fmt_time(first)} \u2013 {fmt_time(last)} UTC"
        policies = self.policies()
        if d.kind == "run":
            folds = len(d.folds) or sum(s.fold is not None for s in d.series)
            what = policies_caption(policies) if policies else "the agent"
            return (f"Walk-forward run: {folds} fold{'s' * (folds != 1)}, each fold's deployed "
                    f"model on its unseen test window ({what}){span}.")
        if not policies:
            return f"Backtest{span}."
        return f"Backtest of {policies_caption(policies)}{span}, same fill model and costs."

    def periods_per_year(self, parts: list[Series]) -> float:
        """Bars a year for annualising: the data's, else the first metric dict's that names
        one, else the median observed in the series' own timestamps."""
        d = self.d
        if d.periods_per_year:
            return d.periods_per_year
        for m in [*d.metrics, *(f.test for f in d.folds)]:
            v = m.get("periods_per_year")
            if isinstance(v, float) and v > 0:
                return v
        rates = [fm.periods_per_year_from_ts(s.ts) for s in parts if s.ts.size > 1]
        return float(np.median(rates)) if rates else 1.0

    def performance(self) -> str:
        """Out-of-sample performance: the test windows chained (a table per policy and, with
        several windows, their equity), monthly returns and the rolling Sharpe."""
        d = self.d
        parts = [s for s in d.series if s.fold is not None] or list(d.series)
        chain = perf.chain(parts) or (perf.chain(parts[:1]) if parts else None)
        if chain is None or chain.ts.size < 3:
            return ""
        used = [s for s in parts if s.name in chain.names]
        ppy = self.periods_per_year(used)
        basis = basis_words(fm.PER_BAR, d.bars)
        start = perf.capital(used[0].equity[next(iter(chain.returns))])
        several = len(chain.names) > 1
        rows = []
        for p, r in chain.returns.items():
            rows.append(
                f"<tr><td>{escape(p)}</td>"
                f"<td class=num>{fmt_integer(r.size)}</td>"
                + "".join(
                    f'<td class="num">{escape(fmt_metric(k, v))}</td>'
                    for k, v in (("total_return", fm.total_return(r)),
                                 ("max_drawdown", fm.max_drawdown(fm.compounded_equity(r))),
                                 ("sharpe", fm.sharpe(r, ppy)))
                )
                + "</tr>"
            )
        head = ("<tr><th>Policy</th><th class=num>Bar returns</th><th class=num>Return "
                "(compounded)</th><th class=num>Max DD</th>"
                f"<th class=num>Sharpe ({escape(basis)})</th></tr>")
        windows = ", ".join(chain.names)
        lead = (f"The {'test windows chained in time' if several else 'window'} ({windows}): "
                "returns compound bar by bar (the product of 1 + r), so the whole path's return "
                "is the product of the windows' growths. Sharpe: per-bar returns, annualised "
                f"x sqrt(N), N = {ppy:,.0f} bars a year (metrics.sharpe).")
        intro = ('<section id="performance"><h2>Out-of-sample performance</h2>'
                 f'<p class="lead">{escape(lead)}</p>')
        html = [intro, table(head, rows)]
        if several:
            html.append(self.plots.chain_equity(chain, start if np.isfinite(start) else 1.0))
        policies = list(chain.returns)
        first = monthly_table(chain.ts, chain.returns[policies[0]], policies[0])
        if first:
            html.append(f"<h3>Monthly returns (compounded, UTC months): {escape(policies[0])}</h3>"
                        + first)
            for p in policies[1:]:
                html.append(f"<details class=monthly><summary>Monthly returns: {escape(p)}"
                            f"</summary>{monthly_table(chain.ts, chain.returns[p], p)}</details>")
        html.append(self.plots.rolling_sharpe(chain, ppy, basis))
        html.append("</section>")
        return "".join(html)

    def toc(self, entries: list[tuple[str, str]]) -> str:
        if len(entries) < 2:
            return ""
        links = "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t in entries)
        return f'<nav class="toc wrap">{links}</nav>'

    def series_section(self, i: int, s: Series) -> str:
        charts, side = self.plots.series(f"s{i}", s)
        return (
            f'<section id="series-{i}"><h2>{escape(s.name)}</h2>'
            + series_stats(s)
            + charts
            + f'<div class="grid2">{side}</div>'
            + trade_list(s, self.d.tick_size)
            + "</section>"
        )

    def html(self) -> str:
        d = self.d
        toc: list[tuple[str, str]] = []
        body = [cards(d)]
        if d.folds:
            body.append(folds_section(d))
            toc.append(("folds", "Folds"))
        performance = self.performance()
        if performance:
            body.append(performance)
            toc.append(("performance", "Performance"))
        for i, s in enumerate(d.series):
            body.append(self.series_section(i, s))
            toc.append((f"series-{i}", s.name))
        training = self.plots.training_section(d)
        if training:
            body.append(training)
            toc.append(("training", "Training"))
        if d.metrics:
            body.append(metrics_section(d))
            toc.append(("metrics", "Metrics"))
        if not toc:
            body.append(
                '<section><p class="lead">This report has no folds, series, training log or '
                "metrics to show.</p></section>"
            )
        return page(d.title, f"{self.header()}\n{self.toc(toc)}", "".join(body), self.plots)
