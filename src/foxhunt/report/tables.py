"""The report's tables: summary cards, walk-forward folds against baselines, a series'
statistics and trade list, and the metrics table.

Every table with a Sharpe says what it is computed from (`foxhunt.metrics.sharpe_basis_lines`):
daily (session) returns or per-bar returns, from each metric dict's `sharpe_basis`; a dict
without one is per-bar, as the walk-forward trainer reports its folds."""

from __future__ import annotations

import math
import re
from base64 import b64encode
from collections.abc import Iterable
from html import escape
from typing import Any

import numpy as np

from foxhunt.metrics import DAILY, PER_BAR, sharpe_basis_lines
from foxhunt.report import perf
from foxhunt.report.csvfile import PriceFormat, series_csv
from foxhunt.report.data import Fold, ReportData, Series
from foxhunt.report.format import (
    DASH,
    fmt_integer,
    fmt_metric,
    fmt_number,
    fmt_percent,
    fmt_time,
    fmt_window_bound,
    is_missing,
    label,
    pick,
)

MAX_TRADE_ROWS = 500
"""Rows in a series' trade list; the list says how many it leaves out."""
MAX_CSV_TRADES = 20_000
"""Trades of one series embedded in the page as a CSV download (about 100 bytes each)."""


def _num_cell(text: str, cls: str = "") -> str:
    return f'<td class="num{(" " + cls) if cls else ""}">{escape(text)}</td>'


def _finite(values: Iterable[Any]) -> list[float]:
    """The values that are numbers (not None, NaN or text), as floats."""
    return [float(v) for v in values if not is_missing(v) and not isinstance(v, str)]


def _mean(values: Iterable[Any]) -> float:
    xs = _finite(values)
    return float(np.mean(xs)) if xs else math.nan


def table(head: str, rows: list[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return (
        f'<div class="table-wrap"><table{attr}><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _sign_class(v: Any) -> str:
    """CSS class colouring a signed value (returns, Sharpe, PnL) green or red."""
    if is_missing(v) or isinstance(v, str):
        return ""
    return "pos" if v > 0 else "neg" if v < 0 else ""


def _basis(metrics: Iterable[dict[str, Any]], bars: str = "") -> str:
    """What a Sharpe column is annualised from, as " (annualised from daily returns)" or
    " (annualised from 1min bars)", where every dict has that basis; else "" (the table's
    footer lines then say which row has which)."""
    bases = {m.get("sharpe_basis") or PER_BAR for m in metrics}
    if len(bases) != 1:
        return ""
    return f" ({basis_words(bases.pop(), bars)})"


def basis_words(basis: str, bars: str = "") -> str:
    """"annualised from daily returns" or "annualised from 1min bars"."""
    if basis == DAILY:
        return "annualised from daily returns"
    return f"annualised from {bars} bars" if bars else "annualised from per-bar returns"


def _basis_note(metrics: Iterable[dict[str, Any]]) -> str:
    """The lines saying what the table's Sharpe is computed from."""
    lines = sharpe_basis_lines(list(metrics))
    return "".join(f'<p class="note">{escape(line)}</p>' for line in lines)


def cards(data: ReportData) -> str:
    folds = data.folds
    if not folds:
        return ""
    trades = _finite(pick(f.test, "trades") for f in folds)
    beat = [b for b in (_beats_baselines(f) for f in folds) if b is not None]
    val_basis = _basis((f.val for f in folds if f.val), data.bars)
    test_basis = _basis((f.test for f in folds), data.bars)
    items = [
        ("Folds", fmt_integer(len(folds))),
        (f"Mean validation Sharpe{val_basis}",
         fmt_number(_mean(pick(f.val, "sharpe") for f in folds))),
        (f"Mean test Sharpe{test_basis}", fmt_number(_mean(pick(f.test, "sharpe") for f in folds))),
        ("Mean test return (compounded)",
         fmt_percent(_mean(pick(f.test, "return") for f in folds))),
        ("Test trades", fmt_integer(sum(trades) if trades else None)),
    ]
    if beat:
        items.append(("Folds beating every baseline", f"{sum(beat)} / {len(beat)}"))
    cells = "".join(
        f'<div class="card"><div class="card-k">{escape(k)}</div>'
        f'<div class="card-v">{escape(v)}</div></div>'
        for k, v in items
    )
    return f'<section class="cards">{cells}</section>'


def _beats_baselines(f: Fold) -> bool | None:
    agent = _finite([pick(f.test, "sharpe")])
    others = _finite(pick(b, "sharpe") for b in f.baselines.values())
    if not agent or not others:
        return None
    return bool(agent[0] > max(others))


def _deploy_cell(deploy: dict[str, Any]) -> str:
    """The deploy rule's probability, with what it was against in the cell's title."""
    p = deploy.get("p")
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return f"<td class=num>{DASH}</td>"
    title = f"P(true Sharpe > 0) ({deploy.get('rule', 'psr')})"
    if deploy.get("rule") == "deflated":
        title = (f"P(true Sharpe > {deploy.get('sr0', math.nan):.1f}), the expected best of "
                 f"{deploy.get('candidates', 0):g} epochs without skill (deflated Sharpe ratio)")
    return f'<td class=num title="{escape(title)}">{p:.2f}</td>'


def folds_section(data: ReportData) -> str:
    folds = sorted(data.folds, key=lambda f: f.fold)
    if not folds:
        return ""
    names = ["train", "val", "test"]
    tz = " (UTC)" if any(f.window_times for f in folds) else ""
    extra = sorted({k for f in folds for k in f.windows} - set(names))
    wins = [w for w in names + extra if any(w in f.windows for f in folds)]
    cols = [
        ("val", "sharpe", f"Val Sharpe{_basis((f.val for f in folds if f.val), data.bars)}"),
        ("val", "return", "Val return"),
        ("test", "sharpe", f"Test Sharpe{_basis((f.test for f in folds), data.bars)}"),
        ("test", "return", "Test return"),
        ("test", "max_drawdown", "Test max DD"),
        ("test", "trades", "Test trades"),
    ]
    head = (
        "<tr><th>Fold</th>"
        + "".join(f"<th>{escape(label(w))} window{tz}</th>" for w in wins)
        + "<th class=num>Best epoch</th><th>Deployed</th><th class=num>Deploy P</th>"
        + "".join(f"<th class=num>{t}</th>" for _, _, t in cols)
        + "</tr>"
    )
    rows = []
    for f in folds:
        cells = [f"<td>{f.fold}</td>"]
        for w in wins:
            cells.append(_window_cell(f, w))
        cells.append(_num_cell(fmt_integer(f.best_epoch)))
        deployed = {"agent": "agent", "flat": "no edge: flat"}.get(f.deployed or "", DASH)
        cells.append(f'<td title="{escape(f.verdict or "")}">{escape(deployed)}</td>')
        cells.append(_deploy_cell(f.deploy))
        for part, name, _ in cols:
            v = pick(getattr(f, part), name)
            signed = name not in ("trades", "max_drawdown")
            cells.append(_num_cell(fmt_metric(name, v), _sign_class(v) if signed else ""))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    if len(folds) > 1:
        cells = ["<td>Mean</td>"] + ["<td></td>"] * (len(wins) + 3)
        for part, name, _ in cols:
            mean = _mean(pick(getattr(f, part), name) for f in folds)
            cells.append(_num_cell(fmt_metric(name, mean)))
        rows.append('<tr class="mean">' + "".join(cells) + "</tr>")
    return (
        '<section id="folds"><h2>Walk-forward folds</h2>'
        '<p class="lead">Validation picks the checkpoint (best epoch) and decides whether the '
        "fold deploys it or stays flat (no significant edge on validation); the test window is "
        "seen once, after training.</p>"
        + table(head, rows)
        + _basis_note(m for f in folds for m in (f.val, f.test) if m)
        + baselines_table(folds, data.bars)
        + "</section>"
    )


def _window_cell(f: Fold, name: str) -> str:
    """A fold's window: its first and last bar's UTC times (one a line), the bar indices in the
    tooltip; bar indices (or ns bounds) where the times are not known."""
    pair, times = f.windows.get(name), f.window_times.get(name)
    bars = ""
    if pair is not None:
        bars = f"{fmt_window_bound(pair[0])} \u2013 {fmt_window_bound(pair[1])}"
    if times is not None:
        tip = f' title="bars {escape(bars)}"' if bars else ""
        return (f'<td class="win"{tip}><span>{fmt_time(times[0])}</span> '
                f"<span>{fmt_time(times[1])}</span></td>")
    return f'<td class="win">{escape(bars or DASH)}</td>'


def baselines_table(folds: list[Fold], bars: str = "") -> str:
    names: list[str] = []
    for f in folds:
        names += [b for b in f.baselines if b not in names]
    if not names:
        return ""
    policies = ["agent", *names]
    tested = [m for f in folds for m in (f.test, *f.baselines.values())]
    groups = (("sharpe", f"Test Sharpe{_basis(tested, bars)}"), ("return", "Test return"))
    head = (
        "<tr><th rowspan=2>Fold</th>"
        + "".join(f'<th colspan={len(policies)} class="group">{t}</th>' for _, t in groups)
        + "<th rowspan=2 class=num>Sharpe vs best baseline</th></tr><tr>"
        + "".join(f"<th class=num>{escape(p)}</th>" for _ in groups for p in policies)
        + "</tr>"
    )

    def values(f: Fold, metric: str) -> list[Any]:
        return [pick(f.test, metric)] + [pick(f.baselines.get(n, {}), metric) for n in names]

    def row(first: str, vals: dict[str, list[Any]], cls: str = "") -> str:
        cells = [f"<td>{first}</td>"]
        for metric, _ in groups:
            finite = _finite(vals[metric])
            best = max(finite) if len(finite) > 1 else None
            for k, v in enumerate(vals[metric]):
                c = ["best"] if best is not None and v == best else []
                c += ["agent"] if k == 0 else []
                cells.append(_num_cell(fmt_metric(metric, v), " ".join(c)))
        agent, others = _finite(vals["sharpe"][:1]), _finite(vals["sharpe"][1:])
        edge = agent[0] - max(others) if agent and others else None
        sign = "+" if edge is not None and edge > 0 else ""
        cells.append(_num_cell(sign + fmt_number(edge), _sign_class(edge)))
        return f'<tr class="{cls}">' + "".join(cells) + "</tr>"

    rows = [row(str(f.fold), {m: values(f, m) for m, _ in groups}) for f in folds]
    if len(folds) > 1:
        means = {
            m: [_mean(values(f, m)[k] for f in folds) for k in range(len(policies))]
            for m, _ in groups
        }
        rows.append(row("Mean", means, "mean"))
    return (
        "<h3>Test window: agent against baselines</h3>"
        '<p class="lead">Best value per fold in bold. Same bars, same fill model and costs.</p>'
        + table(head, rows)
        + _basis_note(tested)
    )


def series_stats(s: Series) -> str:
    longs = sum(t.side == "long" for t in s.trades)
    pnls = [t.pnl for t in s.trades if not math.isnan(t.pnl)]
    items = [
        ("Bars", fmt_integer(s.ts.size)),
        ("From", fmt_time(int(s.ts[0]))),
        ("To", fmt_time(int(s.ts[-1]))),
        ("Trades", f"{len(s.trades):,} ({longs:,} long / {len(s.trades) - longs:,} short)"),
        ("Win rate", fmt_percent(sum(p > 0 for p in pnls) / len(pnls) if pnls else None)),
        ("Trade PnL", fmt_number(sum(pnls) if pnls else None)),
    ]
    for p, e in s.equity.items():
        items.append((f"Return {p}", fmt_percent(perf.total_return(e))))
    cells = "".join(
        f'<div class="stat"><span class="k">{escape(k)}</span>'
        f'<span class="v">{escape(v)}</span></div>'
        for k, v in items
    )
    return f'<div class="stats">{cells}</div>'


def trade_list(s: Series, tick_size: float | None = None) -> str:
    """The first `MAX_TRADE_ROWS` trades, folded, with the whole list as a CSV download."""
    if not s.trades:
        return ""
    price = PriceFormat(tick_size, s.close)
    head = (
        "<tr><th class=num>#</th><th>Side</th><th>Entry (UTC)</th><th class=num>Entry price</th>"
        "<th>Exit (UTC)</th><th class=num>Exit price</th><th class=num>Contracts</th>"
        "<th class=num>PnL</th><th>Exit reason</th></tr>"
    )
    rows = []
    for k, t in enumerate(s.trades[:MAX_TRADE_ROWS]):
        exit_time = DASH if t.exit_ts is None else fmt_time(t.exit_ts)
        rows.append(
            f'<tr><td class=num>{k + 1}</td><td class="side {t.side}">{t.side}</td>'
            f"<td>{fmt_time(t.entry_ts)}</td>{_num_cell(price(t.entry_price) or DASH)}"
            f"<td>{exit_time}</td>{_num_cell(price(t.exit_price) or DASH)}"
            f"{_num_cell(fmt_number(t.contracts))}"
            f"{_num_cell(fmt_number(t.pnl), _sign_class(t.pnl))}"
            f"<td>{escape(t.exit_reason) or DASH}</td></tr>"
        )
    more = len(s.trades) - MAX_TRADE_ROWS
    tail = f'<p class="note">{more:,} more trades not listed (all are in the CSV).</p>' if more > 0 else ""
    return (
        f'<details class="trades"><summary>Trade list ({len(s.trades):,})</summary>'
        f"{_csv_link(s, tick_size)}{table(head, rows)}{tail}</details>"
    )


def _csv_link(s: Series, tick_size: float | None) -> str:
    """A download link carrying the series' trades CSV (times ISO-8601 UTC, prices on the tick
    grid) in a data: URL, so the page stays one file."""
    if len(s.trades) > MAX_CSV_TRADES:
        return (f'<p class="note">{len(s.trades):,} trades: too many to embed as a CSV; '
                "write them with `foxhunt backtest --trades FILE.csv`.</p>")
    uri = "data:text/csv;charset=utf-8;base64," + b64encode(series_csv(s, tick_size).encode()).decode()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", s.name).strip("-") or "trades"
    return (f'<p class="note"><a class="csv" download="{escape(name)}-trades.csv" '
            f'href="{escape(uri)}">Download all {len(s.trades):,} trades as CSV</a> '
            "(ISO-8601 UTC times, prices on the tick grid)</p>")


def _window_dates(window: str, data: ReportData) -> str:
    """UTC first and last bar of a metrics row's window: a series of that name, or the one
    series whose length matches a "bars A..B" window; "" where neither is known."""
    match = next((s for s in data.series if s.name == window), None)
    m = re.fullmatch(r"bars (\d+)\.\.(\d+)", window)
    if match is None and m and len(data.series) == 1:
        only = data.series[0]
        match = only if only.ts.size == int(m.group(2)) - int(m.group(1)) else None
    if match is None:
        return ""
    return f"{fmt_time(int(match.ts[0]))} \u2013 {fmt_time(int(match.ts[-1]))} UTC"


def metrics_section(data: ReportData) -> str:
    """One table per window: a row per metric, a column per policy (so any number of metrics
    fits the page's width)."""
    rows = data.metrics
    if not rows:
        return ""
    windows: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        windows.setdefault(r["window"], []).append(r)
    blocks = []
    for window, group in windows.items():
        names: list[str] = []
        for r in group:
            names += [k for k in r if k not in ("policy", "window") and k not in names]
        policies = [r["policy"] for r in group]
        head = (
            "<tr><th>Metric</th>"
            + "".join(f"<th class=num>{escape(p)}</th>" for p in policies)
            + "</tr>"
        )
        body = []
        for n in names:
            name = label(n)
            if n == "sharpe":
                name += _basis(group, data.bars)
            cells = [f"<th scope=row>{escape(name)}</th>"]
            cells += [_num_cell(fmt_metric(n, r.get(n)), _sign_class(r.get(n))
                                if n in SIGNED else "") for r in group]
            body.append("<tr>" + "".join(cells) + "</tr>")
        dates = _window_dates(window, data)
        sub = f' <span class="dates">{escape(dates)}</span>' if dates else ""
        blocks.append(
            f'<div class="metric-block"><h3>{escape(window)}{sub}</h3>'
            + table(head, body, "dense metrics")
            + _basis_note(group)
            + "</div>"
        )
    widest = max(len(group) for group in windows.values())
    grid = "metric-grid" if widest <= SIDE_BY_SIDE_POLICIES else "metric-stack"
    return (
        '<section id="metrics"><h2>Metrics</h2><p class="lead">Per window, one column per '
        "policy. Returns are compounded (the product of 1 + each bar's return); fractions "
        "(returns, drawdown, volatility, win rate, exposure) in percent. Sharpe, Sortino and "
        "volatility are the headline figures of each row's Sharpe basis; the per-bar ones are "
        "beside them.</p>"
        f'<div class="{grid}">{"".join(blocks)}</div>'
        "</section>"
    )


SIDE_BY_SIDE_POLICIES = 3
"""Windows' metrics tables sit two to a row up to this many policy columns, else one a row."""
SIGNED = frozenset({"sharpe", "sortino", "return", "total_return", "cagr", "total_pnl", "pnl",
                    "calmar", "avg_trade", "sharpe_per_bar", "sortino_per_bar"})
"""Metrics coloured green or red by sign."""


def monthly_table(ts: np.ndarray, returns: np.ndarray, policy: str) -> str:
    """Year x month compounded returns of `policy` (`perf.monthly_returns`), the year's
    compounded return last."""
    months = perf.monthly_returns(ts, returns)
    if not months:
        return ""
    head = ("<tr><th>Year</th>" + "".join(f"<th class=num>{m}</th>" for m in perf.MONTHS)
            + "<th class=num>Year</th></tr>")
    rows = []
    for year in sorted(months):
        row = months[year]
        cells = [f"<td>{year}</td>"]
        for month in range(1, 13):
            v = row.get(month)
            cells.append(_num_cell("" if v is None else fmt_percent(v), _sign_class(v)))
        cells.append(_num_cell(fmt_percent(row[0]), "year " + _sign_class(row[0])))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return table(head, rows, "dense monthly")
