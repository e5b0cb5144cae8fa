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

from foxhunt.fileio import write_text_atomic
from foxhunt.report.charts import Charts
from foxhunt.report.data import ReportData, Series, normalise
from foxhunt.report.decimate import MAX_CHART_POINTS
from foxhunt.report.tables import cards, folds_section, metrics_section, series_stats, trade_list

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


def top(brand: str, title: str, meta: Iterable[tuple[str, Any]]) -> str:
    """The page's header bar: `brand`, the title and the `meta` (label, value) items."""
    items = "".join(
        f'<span class="meta-item"><span class="k">{k}</span> <b>{escape(str(v))}</b></span>'
        for k, v in meta
    )
    return (
        f'<header class="top"><div class="wrap"><div class="brand">{brand}</div>'
        f'<h1>{escape(title)}</h1><div class="meta">{items}</div></div></header>'
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
        return top("foxhunt report", d.title,
                   (("Symbol", d.symbol), ("Bars", d.bars), ("Generated", d.generated)))

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
            + trade_list(s)
            + "</section>"
        )

    def html(self) -> str:
        d = self.d
        toc: list[tuple[str, str]] = []
        body = [cards(d)]
        if d.folds:
            body.append(folds_section(d))
            toc.append(("folds", "Folds"))
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
