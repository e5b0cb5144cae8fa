"""The offline HTML page of a `foxhunt tune` study, from its study.json.

Sections: summary cards (best score, trials by state, deflated Sharpe ratio, PBO, throughput),
what the DSR and PBO say, the learners (per kind, where the study searched `[agent] kind`:
trials, completed, best and median score, which kind won), the optimisation history (uPlot, as
the run report's charts), parameter importance and parallel coordinates (inline SVG: no script
needed), the trial table, and the final run's test windows (the only figures from them). Same
page shell, assets,
Content-Security-Policy and readiness attributes as the run report (`report.html`), so the
same headless-Chromium checks apply.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from foxhunt.fileio import write_text_atomic
from foxhunt.report.charts import PALETTE, Charts
from foxhunt.report.decimate import MAX_CHART_POINTS
from foxhunt.report.html import page, top

STATE_COLOURS = {"complete": "#2563eb", "pruned": "#f59e0b", "fail": "#dc2626"}
SVG_WIDTH, SVG_HEIGHT = 1200, 340
MAX_PARALLEL_LINES = 2000
"""Trials drawn in the parallel-coordinates plot; the best ones are kept beyond it."""


def render_study_report(doc: dict[str, Any]) -> str:
    return _StudyPage(doc).html()


def write_study_report(doc: dict[str, Any], path: Path | str) -> Path:
    """Render the study page and write it atomically."""
    return write_text_atomic(render_study_report(doc), path)


def _num(v: Any, fmt: str = ".3f") -> str:
    return "\u2014" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _param(v: Any) -> str:
    if v is None:  # a key the trial's learner kind does not search
        return "\u2014"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _cell(v: Any, column: str = "") -> str:
    if v is None:
        return "\u2014"
    if column.endswith("return") and isinstance(v, float):
        return f"{v:+.2%}"
    return f"{v:+.2f}" if column.endswith("sharpe") and isinstance(v, float) else _param(v)



IMPORTANCE_LEADS = {
    "fanova": "fANOVA share of the score's variance each parameter explains, over the finished "
              "trials.",
    "ped-anova": "PED-ANOVA: how differently the best 10% of the finished trials set each "
                 "parameter from all of them, normalised to sum to 1.",
}
"""What each importance method's figures mean (`tune.study`'s importance_method)."""

class _StudyPage:
    def __init__(self, doc: dict[str, Any]):
        self.d = doc
        self.trials = doc.get("trials", [])
        self.keys = doc.get("space_keys", [])
        self.plots = Charts(MAX_CHART_POINTS)

    def cards(self) -> str:
        d, counts = self.d, {}
        for t in self.trials:
            counts[t["state"]] = counts.get(t["state"], 0) + 1
        best = d.get("best") or {}
        thr = d.get("throughput") or {}
        items = [
            (f"Best validation {d.get('metric', '')}", _num(best.get("value"), "+.3f")),
            ("Trials", " / ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "0"),
            ("Deflated Sharpe ratio", _num((d.get("deflated_sharpe") or {}).get("dsr"))),
            ("PBO (CSCV)", _num((d.get("pbo") or {}).get("pbo"))),
            ("Trials per hour", _num(thr.get("trials_per_hour"), ",.0f")),
        ]
        if d.get("kind_searched"):
            items.insert(1, ("Kind won", str(d.get("kind_won") or "\u2014")))
        cells = "".join(f'<div class="card"><div class="card-k">{escape(k)}</div>'
                        f'<div class="card-v">{escape(v)}</div></div>' for k, v in items)
        return f'<section class="cards">{cells}</section>'

    def selection(self) -> str:
        dsr, pbo = self.d.get("deflated_sharpe") or {}, self.d.get("pbo") or {}
        rows = []
        if dsr.get("dsr") is not None:
            rows.append(f"<p>The best trial's per-bar validation Sharpe ratio is "
                        f"<b>{dsr['sharpe']:.4f}</b> over {dsr['n_obs']:,} bars. The best of "
                        f"{dsr['n_trials']} trials with no skill, whose Sharpe ratios vary as "
                        f"much as these did (variance {dsr['variance']:.3g}), would reach "
                        f"<b>{dsr['sr0']:.4f}</b> by luck. The deflated Sharpe ratio, the "
                        f"probability that the true Sharpe ratio exceeds that, is "
                        f"<b>{dsr['dsr']:.3f}</b>.</p>")
        else:
            rows.append(f"<p>Deflated Sharpe ratio: n/a ({escape(str(dsr.get('reason', '')))})</p>")
        if pbo.get("pbo") is not None:
            rows.append(f"<p>Probability of backtest overfitting <b>{pbo['pbo']:.3f}</b>: in "
                        f"{pbo['splits']:,} splits of {pbo['n_obs']:,} validation bars into "
                        f"{pbo['blocks']} blocks, half in-sample and half out, the trial best "
                        f"in-sample ranked at or below the median out-of-sample this often "
                        f"({pbo['n_trials']} trials; 0.5 is what choosing by noise gives).</p>")
        else:
            rows.append(f"<p>PBO: n/a ({escape(str(pbo.get('reason', '')))})</p>")
        return ('<section id="selection"><h2>How much the choice says</h2><p class="lead">'
                "Both from validation returns only; no test window was read to choose.</p>"
                + "".join(rows) + "</section>")

    def kinds(self) -> str:
        """Per learner kind, where the study searched `[agent] kind`: its trials, how many
        completed, the best and median score, and which kind won."""
        if not self.d.get("kind_searched"):
            return ""
        won = self.d.get("kind_won")
        bold = ' style="font-weight:650"'
        rows = "".join(
            f'<tr{bold if r["kind"] == won else ""}>'
            f'<td>{escape(str(r["kind"]))}</td><td class="num">{r["trials"]}</td>'
            f'<td class="num">{r["completed"]}</td><td class="num">{r["pruned"]}</td>'
            f'<td class="num">{r["failed"]}</td><td class="num">{_num(r["best"], "+.3f")}</td>'
            f'<td class="num">{_num(r["median"], "+.3f")}</td>'
            f'<td class="num">{"" if r["best_trial"] is None else r["best_trial"]}</td></tr>'
            for r in self.d.get("by_kind", []))
        verdict = ("No trial has completed yet." if won is None else
                   f"<b>{escape(str(won))}</b> won: the best trial "
                   f"({(self.d.get('best') or {}).get('number')}) trained it.")
        return ('<section id="kinds"><h2>Learners</h2><p class="lead">Validation '
                f"{escape(str(self.d.get('metric')))} by learner kind: every kind is scored by "
                f"the same objective. {verdict}</p><div class=\"table-wrap\"><table><thead><tr>"
                "<th>kind</th><th class=\"num\">trials</th><th class=\"num\">completed</th>"
                "<th class=\"num\">pruned</th><th class=\"num\">failed</th>"
                "<th class=\"num\">best</th><th class=\"num\">median</th>"
                f"<th class=\"num\">best trial</th></tr></thead><tbody>{rows}</tbody></table>"
                "</div></section>")

    def history(self) -> str:
        scored = [t for t in self.trials if t["value"] is not None]
        if not scored:
            return ""
        xs = [t["number"] for t in self.trials]
        values = {t["number"]: t["value"] for t in scored}
        running, best = [], None
        for n in xs:
            if n in values:
                best = values[n] if best is None else max(best, values[n])
            running.append(best)
        spec = {"kind": "line", "group": None, "xkind": "trial", "xlabel": "Trial", "fmt": "num",
                "height": 260, "x": xs,
                "series": [
                    {"label": "trial score", "color": PALETTE[0], "width": 1, "markers": True,
                     "y": [values.get(n) for n in xs]},
                    {"label": "best so far", "color": PALETTE[1], "width": 2, "y": running}]}
        chart = self.plots.chart(spec, f"Validation {self.d.get('metric', '')} by trial "
                                 "(pruned trials show their last running score)")
        return f'<section id="history"><h2>Optimisation history</h2>{chart}</section>'

    def importance(self) -> str:
        imp = self.d.get("importance") or {}
        note = self.d.get("importance_note")
        if not imp:
            return ("" if not note else '<section id="importance"><h2>Parameter importance</h2>'
                    f'<p class="lead">n/a: {escape(note)}</p></section>')
        lead = IMPORTANCE_LEADS.get(self.d.get("importance_method") or "fanova",
                                    IMPORTANCE_LEADS["fanova"])
        rows = "".join(
            f'<tr><td>{escape(k)}</td><td class="num">{v:.3f}</td><td style="width:60%">'
            f'<div style="background:{PALETTE[0]};height:12px;width:{100 * v:.1f}%"></div></td></tr>'
            for k, v in sorted(imp.items(), key=lambda kv: -kv[1]))
        return ('<section id="importance"><h2>Parameter importance</h2><p class="lead">'
                f"{lead}{'' if not note else ' (' + escape(note) + ')'}</p>"
                "<div class=\"table-wrap\"><table><thead><tr><th>parameter</th>"
                f'<th class="num">importance</th><th></th></tr></thead><tbody>{rows}</tbody>'
                "</table></div></section>")

    def parallel(self) -> str:
        scored = sorted((t for t in self.trials if t["value"] is not None),
                        key=lambda t: t["value"])[-MAX_PARALLEL_LINES:]
        if not scored or not self.keys:
            return ""
        axes = [*self.keys, "score"]
        pad_l, pad_r, top, bottom = 60, 60, 30, 40
        step = (SVG_WIDTH - pad_l - pad_r) / max(len(axes) - 1, 1)
        scales = [_Scale([t["params"].get(k) for t in scored]) for k in self.keys]
        scales.append(_Scale([t["value"] for t in scored]))
        lo, hi = scored[0]["value"], scored[-1]["value"]
        lines = []
        for t in scored:
            pts = []
            for j, (k, sc) in enumerate(zip(axes, scales)):
                u = sc.unit(t["value"] if k == "score" else t["params"].get(k))
                if u is None:
                    continue
                pts.append(f"{pad_l + j * step:.1f},{top + (1 - u) * (SVG_HEIGHT - top - bottom):.1f}")
            share = 0.5 if hi == lo else (t["value"] - lo) / (hi - lo)
            colour = f"hsl({int(220 - 200 * share)},75%,{int(60 - 15 * share)}%)"
            lines.append(f'<polyline fill="none" stroke="{colour}" stroke-opacity="0.75" '
                         f'stroke-width="1.4" points="{" ".join(pts)}"/>')
        ticks = []
        for j, (k, sc) in enumerate(zip(axes, scales)):
            x = pad_l + j * step
            ticks.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{SVG_HEIGHT - bottom}" '
                         'stroke="#475569" stroke-width="1"/>')
            ticks.append(f'<text x="{x:.1f}" y="{SVG_HEIGHT - bottom + 18}" text-anchor="middle" '
                         f'font-size="12" fill="#0f172a">{escape(k)}</text>')
            top_label, bottom_label = sc.labels()
            ticks.append(f'<text x="{x + 4:.1f}" y="{top - 8}" font-size="11" fill="#64748b">'
                         f'{escape(top_label)}</text>')
            ticks.append(f'<text x="{x + 4:.1f}" y="{SVG_HEIGHT - bottom + 32}" font-size="11" '
                         f'fill="#64748b">{escape(bottom_label)}</text>')
        svg = (f'<svg class="parallel" viewBox="0 0 {SVG_WIDTH} {SVG_HEIGHT}" width="100%" '
               f'role="img" aria-label="parallel coordinates">{"".join(lines)}{"".join(ticks)}</svg>')
        return ('<section id="parallel"><h2>Parallel coordinates</h2><p class="lead">One line per '
                "finished trial through its parameter values and its score; warmer and darker "
                "lines scored higher.</p>" + svg + "</section>")

    def table(self) -> str:
        head = ("<tr><th>trial</th><th>state</th><th class=\"num\">score</th>"
                + "".join(f"<th>{escape(k)}</th>" for k in self.keys)
                + "<th class=\"num\">fold val Sharpe</th><th class=\"num\">seconds</th>"
                  "<th>PSO</th><th>note</th></tr>")
        rows = []
        best = (self.d.get("best") or {}).get("number")
        for t in self.trials:
            folds = " / ".join(_num(f.get("sharpe"), "+.2f") for f in t.get("folds", []))
            pso = t.get("pso")
            slot = f"gen {pso['gen']} p{pso['particle']}" if pso else ""
            note = t.get("error") or ("interrupted" if t.get("interrupted") else "")
            mark = ' style="font-weight:650"' if t["number"] == best else ""
            rows.append(
                f"<tr{mark}><td>{t['number']}</td>"
                f'<td style="color:{STATE_COLOURS.get(t["state"], "#334155")}">{escape(t["state"])}</td>'
                f'<td class="num">{_num(t["value"], "+.3f")}</td>'
                + "".join(f"<td>{escape(_param(t['params'].get(k)))}</td>" for k in self.keys)
                + f'<td class="num">{escape(folds)}</td><td class="num">{_num(t.get("seconds"), ".1f")}</td>'
                f"<td>{slot}</td>"
                f"<td>{escape(note)}</td></tr>")
        return ('<section id="trials"><h2>Trials</h2><p class="lead">Score: mean over folds of '
                f"each fold's chosen model's validation {escape(str(self.d.get('metric')))}; "
                "the best trial in bold.</p><div class=\"table-wrap\"><table><thead>"
                f"{head}</thead><tbody>{''.join(rows)}</tbody></table></div></section>")

    def final(self) -> str:
        final = self.d.get("final")
        if not final:
            return ('<section id="final"><h2>Test windows</h2><p class="lead">Not rolled out: '
                    "the study ran with --no-final or has not finished.</p></section>")
        cols = ["fold", "best_epoch", "val_sharpe", "deployed", "test_sharpe", "test_return",
                "test_trades", "buy_and_hold_sharpe"]
        rows = "".join("<tr>" + "".join(f"<td>{escape(_cell(r.get(c), c))}</td>" for c in cols)
                       + "</tr>" for r in final["folds"])
        head = "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in cols)
        return ('<section id="final"><h2>Test windows, once</h2><p class="lead">The chosen '
                f"configuration trained again as a normal run ({escape(final['run_dir'])}); its "
                "test windows were read here and nowhere else.</p><div class=\"table-wrap\">"
                f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div></section>")

    def html(self) -> str:
        d = self.d
        body = [self.cards(), self.selection(), self.kinds(), self.history(), self.importance(),
                self.parallel(), self.table(), self.final()]
        title = study_title(d)
        meta = (("Symbol", d.get("symbol", "")), ("Bars", d.get("bars", "")),
                ("Sampler", d.get("sampler", "")), ("Metric", d.get("metric", "")),
                ("Generated", datetime.now(UTC).isoformat(timespec="seconds")))
        n = len(self.trials)
        subtitle = (f"Hyperparameter search: {n} trial{'s' * (n != 1)} scored on validation "
                    f"{d.get('metric', '')}; the chosen configuration's test windows read once.")
        header = top("foxhunt \u00b7 tuning study report", title, meta, subtitle)
        return page(title, header, "".join(body), self.plots)


def study_title(doc: dict[str, Any]) -> str:
    """"ES 1min tuning study NAME" (what the page holds: a study, not a run or a backtest)."""
    market = " ".join(str(doc[k]) for k in ("symbol", "bars") if doc.get(k))
    name = doc.get("study", "")
    return f"{market} tuning study {name}".strip() if market else f"Tuning study {name}".strip()


class _Scale:
    """Maps one axis's values to [0, 1]: numbers linearly (log where all positive and spanning
    over a decade), anything else by its rank among the distinct values."""

    def __init__(self, values: list[Any]):
        present = [v for v in values if v is not None]
        self.numeric = bool(present) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              for v in present)
        if self.numeric:
            lo, hi = min(present), max(present)
            self.log = lo > 0 and hi / lo > 10
            self.lo, self.hi = (math.log(lo), math.log(hi)) if self.log else (lo, hi)
            self.ends = (lo, hi)
        else:
            self.levels = sorted({repr(v): v for v in present}.values(), key=repr)
            self.ends = (self.levels[0], self.levels[-1]) if self.levels else ("", "")

    def unit(self, v: Any) -> float | None:
        if v is None:
            return None
        if self.numeric:
            x = math.log(v) if self.log else v
            return 0.5 if self.hi == self.lo else (x - self.lo) / (self.hi - self.lo)
        n = len(self.levels)
        return 0.5 if n < 2 else self.levels.index(v) / (n - 1)

    def labels(self) -> tuple[str, str]:
        return _param(self.ends[1]), _param(self.ends[0])
