"""One self-contained HTML file: tables rendered here, charts drawn in the page by uPlot.

The page carries everything it needs: uPlot's JS and CSS and foxhunt's own renderer are
inlined, the chart data sits in a `<script type="application/json">` block, and a
Content-Security-Policy forbids every network fetch. The renderer records its progress on the
`<html>` element (`data-charts-expected`, `data-charts-rendered`, `data-errors`,
`data-report-ready`), which the headless-browser test reads back.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from foxhunt.report.data import SIDES, Fold, ReportData, Series, normalise
from foxhunt.report.decimate import (
    MAX_CHART_POINTS,
    decimate,
    mix_window,
    rolling_shares,
    time_segments,
)
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

ASSETS = Path(__file__).with_name("assets")
UPLOT_VERSION = "1.6.32"
MAX_TRADE_MARKERS = 5000
"""Trades drawn on a price chart; beyond it an evenly spaced subset is drawn (and said so)."""
MAX_TRADE_ROWS = 500
"""Rows in a series' trade list; the list says how many it leaves out."""

PALETTE = ("#2563eb", "#f59e0b", "#7c3aed", "#0d9488", "#db2777", "#64748b", "#ea580c", "#0891b2")
LONG, SHORT, FLAT = "#16a34a", "#dc2626", "#cbd5e1"
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)

FOOTER = (
    f"foxhunt \u00b7 self-contained report, works offline \u00b7 charts by uPlot {UPLOT_VERSION} "
    "(MIT License) \u00b7 times in UTC \u00b7 drag on a chart to zoom, double-click to reset"
)

TRAINING_CHARTS = (
    ("loss", "Loss", "num"),
    ("mean_q", "Mean Q", "num"),
    ("val.sharpe", "Validation Sharpe", "num"),
    ("grad_norm", "Gradient norm", "num"),
    ("td_p99", "TD error p99", "num"),
    ("flat", "Time flat while collecting", "pct"),
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
    text = render_report(data, max_points)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _values(a: np.ndarray, sig: int = 7) -> list[float | None]:
    """JSON-ready list: `sig` significant digits, NaN and infinities as null (a gap)."""
    return [
        float(f"{v:.{sig}g}") if math.isfinite(v) else None
        for v in np.asarray(a, dtype=np.float64).tolist()
    ]


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


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _drawdown(equity: np.ndarray) -> np.ndarray:
    peak = np.fmax.accumulate(equity)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(peak > 0, equity / peak - 1.0, np.nan)


def _bar_index(ts: np.ndarray, t: int) -> int:
    return int(min(np.searchsorted(ts, t, side="left"), ts.size - 1))


def _direction_from_trades(s: Series) -> np.ndarray:
    """Bars held long (1) or short (2) from entry bar up to the exit bar; flat elsewhere."""
    n = s.ts.size
    marks = np.zeros((3, n + 1), dtype=np.int64)
    for t in s.trades:
        a = int(np.searchsorted(s.ts, t.entry_ts, side="left"))
        b = n if t.exit_ts is None else int(np.searchsorted(s.ts, t.exit_ts, side="left"))
        if b > a:
            code = SIDES[t.side]
            marks[code, a] += 1
            marks[code, b] -= 1
    held = np.cumsum(marks, axis=1)[:, :n] > 0
    out = np.zeros(n, dtype=np.int8)
    out[held[1]] = 1
    out[held[2] & ~held[1]] = 2
    return out


class _Page:
    """Builds the page: collects chart specs while writing the HTML around them."""

    def __init__(self, data: ReportData, max_points: int):
        self.d = data
        self.max_points = max_points
        self.charts: list[dict[str, Any]] = []
        self.time: dict[str, list[list[Any]]] = {}

    # charts ---------------------------------------------------------------------------------

    def chart(
        self, spec: dict[str, Any], title: str, note: str = "", extra: str = "", wide: bool = True
    ) -> str:
        cid = f"chart-{len(self.charts)}"
        self.charts.append({"id": cid, **spec})
        cls = "chart" + ("" if wide else " half")
        note_html = f'<p class="note">{escape(note)}</p>' if note else ""
        return (
            f'<figure class="{cls}"><figcaption>{escape(title)}</figcaption>'
            f'<div class="plot" id="{cid}" style="min-height:{spec["height"] + 34}px"></div>'
            f"{extra}{note_html}</figure>"
        )

    def bar_chart(
        self,
        group: str,
        kind: str,
        fmt: str,
        height: int,
        columns: dict[str, np.ndarray],
        styles: dict[str, dict[str, Any]],
        **extra: Any,
    ) -> tuple[dict[str, Any], int]:
        idx = decimate(list(columns.values()), self.max_points)
        sig = 5 if fmt == "pct" else 7
        series = [
            {"label": name, **styles.get(name, {}), "y": _values(col[idx], sig)}
            for name, col in columns.items()
        ]
        spec = {
            "kind": kind,
            "group": group,
            "xkind": "bar",
            "fmt": fmt,
            "height": height,
            "x": idx.tolist(),
            "series": series,
            **extra,
        }
        return spec, int(idx.size)

    # sections -------------------------------------------------------------------------------

    def header(self) -> str:
        d = self.d
        meta = "".join(
            f'<span class="meta-item"><span class="k">{k}</span> <b>{escape(v)}</b></span>'
            for k, v in (("Symbol", d.symbol), ("Bars", d.bars), ("Generated", d.generated))
        )
        return (
            f'<header class="top"><div class="wrap"><div class="brand">foxhunt report</div>'
            f'<h1>{escape(d.title)}</h1><div class="meta">{meta}</div></div></header>'
        )

    def toc(self, entries: list[tuple[str, str]]) -> str:
        if len(entries) < 2:
            return ""
        links = "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t in entries)
        return f'<nav class="toc wrap">{links}</nav>'

    def cards(self) -> str:
        folds = self.d.folds
        if not folds:
            return ""
        trades = _finite(pick(f.test, "trades") for f in folds)
        beat = [b for b in (self._beats_baselines(f) for f in folds) if b is not None]
        items = [
            ("Folds", fmt_integer(len(folds))),
            ("Mean validation Sharpe", fmt_number(_mean(pick(f.val, "sharpe") for f in folds))),
            ("Mean test Sharpe", fmt_number(_mean(pick(f.test, "sharpe") for f in folds))),
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

    @staticmethod
    def _beats_baselines(f: Fold) -> bool | None:
        agent = _finite([pick(f.test, "sharpe")])
        others = _finite(pick(b, "sharpe") for b in f.baselines.values())
        if not agent or not others:
            return None
        return bool(agent[0] > max(others))

    def folds_section(self) -> str:
        folds = sorted(self.d.folds, key=lambda f: f.fold)
        if not folds:
            return ""
        names = ["train", "val", "test"]
        extra = sorted({k for f in folds for k in f.windows} - set(names))
        wins = [w for w in names + extra if any(w in f.windows for f in folds)]
        cols = [
            ("val", "sharpe", "Val Sharpe"),
            ("val", "return", "Val return"),
            ("test", "sharpe", "Test Sharpe"),
            ("test", "return", "Test return"),
            ("test", "max_drawdown", "Test max DD"),
            ("test", "trades", "Test trades"),
        ]
        head = (
            "<tr><th>Fold</th>"
            + "".join(f"<th>{escape(label(w))} window</th>" for w in wins)
            + "<th class=num>Best epoch</th>"
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
            for part, name, _ in cols:
                v = pick(getattr(f, part), name)
                signed = name not in ("trades", "max_drawdown")
                cells.append(_num_cell(fmt_metric(name, v), _sign_class(v) if signed else ""))
            rows.append("<tr>" + "".join(cells) + "</tr>")
        if len(folds) > 1:
            cells = ["<td>Mean</td>"] + ["<td></td>"] * (len(wins) + 1)
            for part, name, _ in cols:
                mean = _mean(pick(getattr(f, part), name) for f in folds)
                cells.append(_num_cell(fmt_metric(name, mean)))
            rows.append('<tr class="mean">' + "".join(cells) + "</tr>")
        return (
            '<section id="folds"><h2>Walk-forward folds</h2>'
            '<p class="lead">Validation picks the checkpoint (best epoch); the test window is '
            "seen once, after training.</p>"
            + _table(head, rows)
            + self.baselines_table(folds)
            + "</section>"
        )

    def baselines_table(self, folds: list[Fold]) -> str:
        names: list[str] = []
        for f in folds:
            names += [b for b in f.baselines if b not in names]
        if not names:
            return ""
        policies = ["agent", *names]
        groups = (("sharpe", "Test Sharpe"), ("return", "Test return"))
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
        )

    def series_section(self, i: int, s: Series) -> str:
        group = f"s{i}"
        self.time[group] = time_segments(s.ts, self.max_points)
        parts = [self.series_stats(s), self.equity_charts(group, s), self.price_chart(group, s)]
        side = [self.mix_chart(group, s)]
        if s.components:
            side.append(self.components_chart(group, s))
        return (
            f'<section id="series-{i}"><h2>{escape(s.name)}</h2>'
            + "".join(parts)
            + '<div class="grid2">'
            + "".join(side)
            + "</div>"
            + self.trade_list(s)
            + "</section>"
        )

    @staticmethod
    def _decimation_note(kept: int, n: int) -> str:
        if kept >= n:
            return ""
        return f"{kept:,} of {n:,} bars plotted (min/max-preserving decimation)."

    def equity_charts(self, group: str, s: Series) -> str:
        n = s.ts.size
        styles = {
            p: {
                "color": PALETTE[k % len(PALETTE)],
                "width": 2.25 if k == 0 else 1.5,
                **({"dash": [6, 4]} if k >= 4 else {}),
            }
            for k, p in enumerate(s.equity)
        }
        spec, kept = self.bar_chart(group, "line", "money", 300, s.equity, styles)
        equity = self.chart(spec, "Equity: agent against baselines", self._decimation_note(kept, n))
        dd = {p: _drawdown(e) for p, e in s.equity.items()}
        dd_styles = {p: dict(st) for p, st in styles.items()}
        dd_styles[next(iter(s.equity))]["fill"] = _rgba(PALETTE[0], 0.12)
        spec, kept = self.bar_chart(group, "line", "pct", 200, dd, dd_styles, ymax0=True)
        drawdown = self.chart(spec, "Drawdown from running peak", self._decimation_note(kept, n))
        return equity + drawdown

    def price_chart(self, group: str, s: Series) -> str:
        markers, shown = self.markers(s)
        style = {"close": {"color": "#334155", "width": 1.25}}
        spec, kept = self.bar_chart(
            group, "price", "price", 320, {"close": s.close}, style, markers=markers
        )
        legend = (
            '<div class="marker-legend">'
            '<span class="mk long">\u25b2</span> long entry'
            '<span class="mk short">\u25bc</span> short entry'
            '<span class="mk exit">\u00d7</span> exit</div>'
        )
        notes = [self._decimation_note(kept, s.ts.size)]
        if shown < len(s.trades):
            notes.append(f"Markers for {shown:,} of {len(s.trades):,} trades (evenly spaced).")
        if not s.trades:
            notes.append("No trades in this window.")
        note = " ".join(x for x in notes if x)
        return self.chart(spec, "Price with entries and exits", note, legend)

    def mix_chart(self, group: str, s: Series) -> str:
        """Stacked rolling shares, plotted as cumulative tops: all, long + short, short."""
        direction = s.direction if s.direction is not None else _direction_from_trades(s)
        w = mix_window(s.ts.size)
        share = rolling_shares(direction, w)
        stacked = {"flat": share.sum(axis=0), "long": share[1] + share[2], "short": share[2]}
        styles = {
            "flat": {"color": "#94a3b8", "fill": FLAT, "width": 0.5},
            "long": {"color": LONG, "fill": _rgba(LONG, 0.85), "width": 0.5},
            "short": {"color": SHORT, "fill": _rgba(SHORT, 0.85), "width": 0.5},
        }
        spec, _ = self.bar_chart(group, "mix", "pct", 200, stacked, styles)
        src = "position per bar" if s.direction is not None else "derived from the trade list"
        note = f"Share of the last {w:,} bars spent flat / long / short ({src})."
        return self.chart(spec, "Action mix over time", note, wide=False)

    def components_chart(self, group: str, s: Series) -> str:
        cum = {k: np.cumsum(np.nan_to_num(v, nan=0.0)) for k, v in s.components.items()}
        styles = {k: {"color": PALETTE[j % len(PALETTE)], "width": 1.5} for j, k in enumerate(cum)}
        spec, _ = self.bar_chart(group, "line", "money", 200, cum, styles)
        note = "Running sum of each component as recorded."
        return self.chart(spec, "Cumulative reward components", note, wide=False)

    def series_stats(self, s: Series) -> str:
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

    def markers(self, s: Series) -> tuple[dict[str, list[Any]], int]:
        """Entry/exit marker positions (bar index, price) for the trades inside the series."""
        trades = [t for t in s.trades if s.ts[0] <= t.entry_ts <= s.ts[-1]]
        if len(trades) > MAX_TRADE_MARKERS:
            keep = np.unique(np.linspace(0, len(trades) - 1, MAX_TRADE_MARKERS).astype(int))
            trades = [trades[k] for k in keep]
        m: dict[str, list[Any]] = {"ei": [], "ep": [], "es": [], "xi": [], "xp": []}
        for t in trades:
            if not math.isfinite(t.entry_price):
                continue
            m["ei"].append(_bar_index(s.ts, t.entry_ts))
            m["ep"].append(t.entry_price)
            m["es"].append(SIDES[t.side])
            if t.exit_ts is not None and math.isfinite(t.exit_price) and t.exit_ts <= s.ts[-1]:
                m["xi"].append(_bar_index(s.ts, t.exit_ts))
                m["xp"].append(t.exit_price)
        return m, len(trades)

    def trade_list(self, s: Series) -> str:
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

    def training_section(self) -> str:
        lines: dict[tuple[int, int], dict[str, Any]] = {}
        for line in self.d.training:
            lines[(line["fold"], line["epoch"])] = line
        if not lines:
            return ""
        folds = sorted({f for f, _ in lines})
        epochs = sorted({e for _, e in lines})
        best = {f.fold: f.best_epoch for f in self.d.folds}
        figures = []
        for key, title, fmt in TRAINING_CHARTS:
            series = []
            for j, f in enumerate(folds):
                ys = [self._training_value(lines.get((f, e)), key) for e in epochs]
                if any(math.isfinite(y) for y in ys):
                    series.append(
                        {
                            "label": f"fold {f}",
                            "color": PALETTE[j % len(PALETTE)],
                            "width": 1.75,
                            "y": _values(np.asarray(ys)),
                        }
                    )
            if not series:
                continue
            spec = {
                "kind": "line",
                "group": None,
                "xkind": "epoch",
                "fmt": fmt,
                "height": 220,
                "x": epochs,
                "series": series,
            }
            figures.append(self.chart(spec, title, wide=False))
        if not figures:
            return ""
        marks = ", ".join(f"fold {f}: {b}" for f, b in sorted(best.items()) if b is not None)
        lead = "Per-epoch diagnostics from run.jsonl."
        if marks:
            lead += f" Best epoch by validation Sharpe \u2014 {marks}."
        return (
            f'<section id="training"><h2>Training</h2><p class="lead">{escape(lead)}</p>'
            f'<div class="grid3">{"".join(figures)}</div></section>'
        )

    @staticmethod
    def _training_value(line: dict[str, Any] | None, key: str) -> float:
        if line is None:
            return math.nan
        if key.startswith("val."):
            v = (line.get("val") or {}).get(key[4:])
        else:
            v = line.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan

    def metrics_section(self) -> str:
        rows = self.d.metrics
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
            "drawdown, volatility, win rate, exposure) in percent.</p>"
            + _table(head, body, "dense")
            + "</section>"
        )

    # page -----------------------------------------------------------------------------------

    def html(self) -> str:
        d = self.d
        toc: list[tuple[str, str]] = []
        body = [self.cards()]
        if d.folds:
            body.append(self.folds_section())
            toc.append(("folds", "Folds"))
        for i, s in enumerate(d.series):
            body.append(self.series_section(i, s))
            toc.append((f"series-{i}", s.name))
        training = self.training_section()
        if training:
            body.append(training)
            toc.append(("training", "Training"))
        if d.metrics:
            body.append(self.metrics_section())
            toc.append(("metrics", "Metrics"))
        if not toc:
            body.append(
                '<section><p class="lead">This report has no folds, series, training log or '
                "metrics to show.</p></section>"
            )
        payload = json.dumps(
            {"charts": self.charts, "time": self.time}, separators=(",", ":"), allow_nan=False
        ).replace("<", "\\u003c")
        return f"""<!DOCTYPE html>
<html lang="en" data-charts-expected="{len(self.charts)}" data-charts-rendered="0" data-errors="">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="generator" content="foxhunt">
<title>{escape(d.title)}</title>
<script>{asset("errors.js")}</script>
<style>/* uPlot {UPLOT_VERSION} | MIT License | Copyright (c) 2022 Leon Sorokin */
{asset("uPlot.min.css")}</style>
<style>{asset("report.css")}</style>
</head>
<body>
{self.header()}
{self.toc(toc)}
<main class="wrap">
{"".join(body)}
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
