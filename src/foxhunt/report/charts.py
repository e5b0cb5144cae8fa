"""The report's charts: uPlot specs collected while the page is written, decimated to a
point budget, with their data shaped for the renderer (report.js)."""

from __future__ import annotations

import math
from html import escape
from typing import Any

import numpy as np

from foxhunt.report import perf
from foxhunt.report.data import SIDES, ReportData, Series
from foxhunt.report.decimate import decimate, mix_window, rolling_shares, time_segments

PALETTE = ("#2563eb", "#f59e0b", "#7c3aed", "#0d9488", "#db2777", "#64748b", "#ea580c", "#0891b2")
LONG, SHORT, FLAT = "#16a34a", "#dc2626", "#cbd5e1"
MAX_TRADE_MARKERS = 5000
"""Trades drawn on a price chart; beyond it an evenly spaced subset is drawn (and said so)."""

TRAINING_CHARTS = (
    ("loss", "Loss", "num"),
    ("mean_q", "Mean Q", "num"),
    ("val.sharpe", "Validation Sharpe (per-bar)", "num"),
    ("grad_norm", "Gradient norm", "num"),
    ("td_p99", "TD error p99", "num"),
    ("flat", "Time flat while collecting", "pct"),
)


def _values(a: np.ndarray, sig: int = 7) -> list[float | None]:
    """JSON-ready list: `sig` significant digits, NaN and infinities as null (a gap)."""
    return [
        float(f"{v:.{sig}g}") if math.isfinite(v) else None
        for v in np.asarray(a, dtype=np.float64).tolist()
    ]


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _drawdown(equity: np.ndarray) -> np.ndarray:
    peak = np.fmax.accumulate(equity)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(peak > 0, equity / peak - 1.0, np.nan)


def policies_caption(policies: list[str]) -> str:
    """What an equity chart compares: "agent against baselines", "buy-and-hold",
    "buy-and-hold, sma:10,30 and flat"."""
    if "agent" in policies and len(policies) > 1:
        return "agent against baselines"
    if len(policies) == 1:
        return policies[0]
    if len(policies) <= 4:
        return ", ".join(policies[:-1]) + " and " + policies[-1]
    return f"{len(policies)} policies"


def _styles(policies: list[str]) -> dict[str, dict[str, Any]]:
    """Line style per policy: the first (the agent, where there is one) blue and thicker."""
    return {
        p: {
            "color": PALETTE[k % len(PALETTE)],
            "width": 2.25 if k == 0 else 1.5,
            **({"dash": [6, 4]} if k >= 4 else {}),
        }
        for k, p in enumerate(policies)
    }


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


class Charts:
    """Collects the page's chart specs (and each series' time axis) while returning the HTML
    that places them."""

    def __init__(self, max_points: int):
        self.max_points = max_points
        self.charts: list[dict[str, Any]] = []
        self.time: dict[str, list[list[Any]]] = {}

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

    def series(self, group: str, s: Series) -> tuple[str, str]:
        """(the full-width charts, the half-width ones) of one series, sharing its time axis."""
        self.time[group] = time_segments(s.ts, self.max_points)
        main = self.equity_charts(group, s) + self.price_chart(group, s)
        side = [self.mix_chart(group, s)]
        if s.components:
            side.append(self.components_chart(group, s))
        return main, "".join(side)

    @staticmethod
    def _decimation_note(kept: int, n: int) -> str:
        if kept >= n:
            return ""
        return f"{kept:,} of {n:,} bars plotted (min/max-preserving decimation)."

    def equity_charts(self, group: str, s: Series) -> str:
        n = s.ts.size
        styles = _styles(list(s.equity))
        grown = {p: perf.compounded(e) for p, e in s.equity.items()}
        spec, kept = self.bar_chart(group, "line", "money", 300, grown, styles)
        title = f"Equity (compounded): {policies_caption(list(s.equity))}"
        equity = self.chart(spec, title, self._decimation_note(kept, n))
        dd = {p: _drawdown(e) for p, e in grown.items()}
        dd_styles = {p: dict(st) for p, st in styles.items()}
        dd_styles[next(iter(s.equity))]["fill"] = _rgba(PALETTE[0], 0.12)
        spec, kept = self.bar_chart(group, "line", "pct", 200, dd, dd_styles, ymax0=True)
        drawdown = self.chart(spec, "Drawdown from running peak", self._decimation_note(kept, n))
        return equity + drawdown

    def chain_equity(self, chain: perf.Chain, start: float) -> str:
        """The out-of-sample equity: the test windows one after the other, compounded."""
        self.time["oos"] = time_segments(chain.ts, self.max_points)
        policies = list(chain.returns)
        columns = {p: chain.equity(p, start) for p in policies}
        spec, kept = self.bar_chart("oos", "line", "money", 300, columns, _styles(policies))
        note = ("Each window's bar returns compounded onto the last window's end; the gaps "
                "between windows (training and validation) are left out. "
                + self._decimation_note(kept, chain.ts.size))
        return self.chart(spec, "Out-of-sample equity, test windows chained (compounded)",
                          note.strip())

    def rolling_sharpe(self, chain: perf.Chain, ppy: float, basis: str) -> str:
        """Rolling Sharpe (`metrics.sharpe` of a trailing window of bar returns) per policy."""
        if "oos" not in self.time:
            self.time["oos"] = time_segments(chain.ts, self.max_points)
        n = chain.ts.size - 1
        window = perf.rolling_window(n)
        series, ends = [], None
        for p, style in _styles(list(chain.returns)).items():
            ends, values = perf.rolling_sharpe(chain.returns[p], ppy, window)
            series.append({"label": p, **style, "y": _values(values, 5)})
        if ends is None or ends.size == 0:
            return ""
        spec = {"kind": "line", "group": "oos", "xkind": "bar", "fmt": "num", "height": 220,
                "x": (ends + 1).tolist(), "series": series}
        note = (f"metrics.sharpe of the trailing {window:,} bar returns ({basis}, "
                f"N = {ppy:,.0f} bars a year), at {ends.size:,} points.")
        return self.chart(spec, f"Rolling Sharpe ({basis})", note)

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

    def training_section(self, data: ReportData) -> str:
        lines: dict[tuple[int, int], dict[str, Any]] = {}
        for line in data.training:
            lines[(line["fold"], line["epoch"])] = line
        if not lines:
            return ""
        folds = sorted({f for f, _ in lines})
        epochs = sorted({e for _, e in lines})
        best = {f.fold: f.best_epoch for f in data.folds}
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
