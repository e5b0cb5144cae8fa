"""The report's tables: summary cards, walk-forward folds against baselines, a series'
statistics and trade list, and the metrics table.

Every table with a Sharpe says what it is computed from (`foxhunt.metrics.sharpe_basis_lines`):
daily (session) returns or per-bar returns, from each metric dict's `sharpe_basis`; a dict
without one is per-bar, as the walk-forward trainer reports its folds."""

from __future__ import annotations

import math
from collections.abc import Iterable
from html import escape
from typing import Any

import numpy as np

from foxhunt.metrics import PER_BAR, sharpe_basis_lines
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


def _num_cell(text: str, cls: str = "") -> str:
    return f'<td class="num{(" " + cls) if cls else ""}">{escape(text)}</td>'


def _finite(values: Iterable[Any]) -> list[float]:
    """The values that are numbers (not None, NaN or text), as floats."""
    return [float(v) for v in values if not is_missing(v) and not isinstance(v, str)]


def _mean(values: Iterable[Any]) -> float:
    xs = _finite(values)
    return float(np.mean(xs)) if xs else math.nan


def _table(head: str, rows: list[str], cls: str = "") -> str:
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


def _basis(metrics: Iterable[dict[str, Any]]) -> str:
    """" (daily)" or " (per-bar)" where every dict has that Sharpe basis, else ""."""
    bases = {m.get("sharpe_basis") or PER_BAR for m in metrics}
    return f" ({bases.pop()})" if len(bases) == 1 else ""


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
    val_basis = _basis(f.val for f in folds if f.val)
    test_basis = _basis(f.test for f in folds)
    items = [
        ("Folds", fmt_integer(len(folds))),
        (f"Mean validation Sharpe{val_basis}",
         fmt_number(_mean(pick(f.val, "sharpe") for f in folds))),
        (f"Mean test Sharpe{test_basis}", fmt_number(_mean(pick(f.test, "sharpe") for f in folds))),
        ("Mean test return", fmt_percent(_mean(pick(f.test, "return") for f in folds))),
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
    extra = sorted({k for f in folds for k in f.windows} - set(names))
    wins = [w for w in names + extra if any(w in f.windows for f in folds)]
    cols = [
        ("val", "sharpe", f"Val Sharpe{_basis(f.val for f in folds if f.val)}"),
        ("val", "return", "Val return"),
        ("test", "sharpe", f"Test Sharpe{_basis(f.test for f in folds)}"),
        ("test", "return", "Test return"),
        ("test", "max_drawdown", "Test max DD"),
        ("test", "trades", "Test trades"),
    ]
    head = (
        "<tr><th>Fold</th>"
        + "".join(f"<th>{escape(label(w))} window</th>" for w in wins)
        + "<th class=num>Best epoch</th><th>Deployed</th><th class=num>Deploy P</th>"
        + "".join(f"<th class=num>{t}</th>" for _, _, t in cols)
        + "</tr>"
    )
    rows = []
    for f in folds:
        cells = [f"<td>{f.fold}</td>"]
        for w in wins:
            pair = f.windows.get(w)
            text = DASH
            if pair is not None:
                text = f"{fmt_window_bound(pair[0])} \u2013 {fmt_window_bound(pair[1])}"
            cells.append(f'<td class="win">{escape(text)}</td>')
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
        + _table(head, rows)
        + _basis_note(m for f in folds for m in (f.val, f.test) if m)
        + baselines_table(folds)
        + "</section>"
    )


def baselines_table(folds: list[Fold]) -> str:
    names: list[str] = []
    for f in folds:
        names += [b for b in f.baselines if b not in names]
    if not names:
        return ""
    policies = ["agent", *names]
    tested = [m for f in folds for m in (f.test, *f.baselines.values())]
    groups = (("sharpe", f"Test Sharpe{_basis(tested)}"), ("return", "Test return"))
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
        + _table(head, rows)
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
        finite = e[np.isfinite(e)]
        ret = finite[-1] / finite[0] - 1 if finite.size and finite[0] > 0 else None
        items.append((f"Return {p}", fmt_percent(ret)))
    cells = "".join(
        f'<div class="stat"><span class="k">{escape(k)}</span>'
        f'<span class="v">{escape(v)}</span></div>'
        for k, v in items
    )
    return f'<div class="stats">{cells}</div>'


def trade_list(s: Series) -> str:
    if not s.trades:
        return ""
    head = (
        "<tr><th class=num>#</th><th>Side</th><th>Entry</th><th class=num>Entry price</th>"
        "<th>Exit</th><th class=num>Exit price</th><th class=num>Contracts</th>"
        "<th class=num>PnL</th><th>Exit reason</th></tr>"
    )
    rows = []
    for k, t in enumerate(s.trades[:MAX_TRADE_ROWS]):
        exit_time = DASH if t.exit_ts is None else fmt_time(t.exit_ts)
        rows.append(
            f'<tr><td class=num>{k + 1}</td><td class="side {t.side}">{t.side}</td>'
            f"<td>{fmt_time(t.entry_ts)}</td>{_num_cell(fmt_number(t.entry_price))}"
            f"<td>{exit_time}</td>{_num_cell(fmt_number(t.exit_price))}"
            f"{_num_cell(fmt_number(t.contracts))}"
            f"{_num_cell(fmt_number(t.pnl), _sign_class(t.pnl))}"
            f"<td>{escape(t.exit_reason) or DASH}</td></tr>"
        )
    more = len(s.trades) - MAX_TRADE_ROWS
    tail = f'<p class="note">{more:,} more trades not listed.</p>' if more > 0 else ""
    return (
        f'<details class="trades"><summary>Trade list ({len(s.trades):,})</summary>'
        f"{_table(head, rows)}{tail}</details>"
    )


def metrics_section(data: ReportData) -> str:
    rows = data.metrics
    if not rows:
        return ""
    names: list[str] = []
    for r in rows:
        names += [k for k in r if k not in ("policy", "window") and k not in names]
    head = (
        "<tr><th>Policy</th><th>Window</th>"
        + "".join(f"<th class=num>{escape(label(n))}</th>" for n in names)
        + "</tr>"
    )
    body = []
    for r in rows:
        cells = [f"<td>{escape(r['policy'])}</td>", f"<td>{escape(r['window'])}</td>"]
        cells += [_num_cell(fmt_metric(n, r.get(n))) for n in names]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<section id="metrics"><h2>Metrics</h2><p class="lead">Fractions (returns, '
        "drawdown, volatility, win rate, exposure) in percent. Sharpe, Sortino and volatility "
        "are the headline figures of each row's Sharpe basis; the per-bar ones are beside them."
        "</p>"
        + _table(head, body, "dense")
        + _basis_note(rows)
        + "</section>"
    )
