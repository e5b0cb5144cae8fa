"""Self-contained, offline HTML reports: walk-forward folds, equity against baselines, trades.

`render_report(data)` returns the page, `write_report(data, path)` writes it atomically. The
input contract is documented in docs/report.md and checked by `normalise` (a broken input
raises `ReportDataError`, a `FoxhuntError`, naming the key).
"""

from foxhunt.report.data import ReportData, ReportDataError, normalise
from foxhunt.report.decimate import MAX_CHART_POINTS, decimate
from foxhunt.report.html import render_report, write_report

__all__ = [
    "MAX_CHART_POINTS",
    "ReportData",
    "ReportDataError",
    "decimate",
    "normalise",
    "render_report",
    "write_report",
]
