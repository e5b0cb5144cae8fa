"""The study page (`foxhunt report STUDY_DIR`): offline, no console errors, its chart drawn, in
headless Chromium like the run report; its sections from a constructed study.json."""

from __future__ import annotations

import re

import pytest

from foxhunt.report.browser import dump_dom, find_chromium
from foxhunt.report.study import render_study_report, write_study_report


def study_doc(n: int = 12) -> dict:
    trials = []
    for k in range(n):
        state = "pruned" if k % 5 == 4 else "fail" if k == 7 else "complete"
        value = None if state == "fail" else round(0.5 * k - (k % 3), 3)
        trials.append({
            "number": k, "state": state, "value": value,
            "params": {"agent.lr": 1e-4 * (k + 1), "agent.hidden": [64, 128][k % 2],
                       "replay.n_step": 1 + k % 4},
            "seconds": 1.5, "interrupted": k == 7, "error": "worker lost" if k == 7 else None,
            "pso": {"gen": k // 4, "particle": k % 4},
            "folds": [] if state != "complete" else [{"fold": 0, "best_epoch": 1, "sharpe": value}],
        })
    return {
        "study": "ES-1min-pso", "symbol": "ES", "bars": "1min", "sampler": "pso",
        "metric": "sharpe", "space_keys": ["agent.lr", "agent.hidden", "replay.n_step"],
        "trials": trials, "best": {"number": n - 1, "value": trials[-1]["value"], "params": {}},
        "deflated_sharpe": {"dsr": 0.91, "sharpe": 0.12, "sr0": 0.08, "n_trials": n,
                            "variance": 0.002, "n_obs": 1500, "skew": 0.1, "kurtosis": 3.4},
        "pbo": {"pbo": 0.21, "splits": 12870, "blocks": 16, "n_trials": 9, "n_obs": 1500},
        "importance": {"agent.lr": 0.7, "agent.hidden": 0.2, "replay.n_step": 0.1},
        "throughput": {"trials_per_hour": 900.0, "trials": n, "wall_s": 48.0, "parallel": 2,
                       "backend": "process"},
        "final": {"run_dir": "/x/final", "folds": [
            {"fold": 0, "best_epoch": 1, "val_sharpe": 1.2, "deployed": "agent",
             "test_sharpe": 0.4, "test_return": 0.01, "test_trades": 3,
             "buy_and_hold_sharpe": 0.1}]},
    }


def test_the_page_holds_every_section():
    html = render_study_report(study_doc())
    for heading in ("How much the choice says", "Optimisation history", "Parameter importance",
                    "Parallel coordinates", "Trials", "Test windows, once"):
        assert heading in html
    assert "<b>0.910</b>" in html and "<b>0.210</b>" in html  # DSR and PBO
    assert html.count("<polyline") == 11  # one line per scored trial (the failed one has none)
    assert "+1.00%" in html  # the final run's test return
    assert "https://" not in html.split("</style>")[-1].split("<script>/*! uPlot")[0]


def test_a_study_without_finished_trials_still_renders():
    doc = study_doc(1)
    doc["trials"][0].update(state="fail", value=None)
    doc.update(best=None, importance={}, final=None,
               deflated_sharpe={"dsr": None, "reason": "no finished trial"},
               pbo={"pbo": None, "reason": "needs 2 finished trials"})
    html = render_study_report(doc)
    assert "no finished trial" in html and 'data-charts-expected="0"' in html


@pytest.mark.skipif(find_chromium() is None, reason="headless Chromium not installed")
def test_the_importance_section_names_its_method_or_why_it_has_none():
    doc = study_doc()
    assert "fANOVA share of the score's variance" in render_study_report(doc)
    doc.update(importance_method="ped-anova",
               importance_note="fANOVA needs scikit-learn: pip install scikit-learn")
    html = render_study_report(doc)
    assert "PED-ANOVA: how differently the best 10%" in html and "needs scikit-learn" in html
    doc.update(importance={}, importance_method=None, importance_note="needs 2 different scores")
    assert "n/a: needs 2 different scores" in render_study_report(doc)


def test_the_page_loads_in_chromium_with_its_chart_and_no_errors(tmp_path):
    path = write_study_report(study_doc(), tmp_path / "study.html")
    run = dump_dom(path)
    tag = re.search(r"<html[^>]*>", run.stdout).group(0)
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', tag))
    assert attrs["data-errors"] == "" and run.console_messages() == []
    assert attrs["data-report-ready"] == "1"
    assert attrs["data-charts-expected"] == attrs["data-charts-rendered"] == "1"
    assert run.stdout.count('class="uplot') == 1 and "<svg" in run.stdout
