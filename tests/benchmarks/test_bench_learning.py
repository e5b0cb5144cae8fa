"""The learning benchmark end to end at CI size: its JSON's shape and the rule results' sanity."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_learning

pytestmark = pytest.mark.slow
POLICIES = {"flat", "buy_and_hold", "rule", "oracle"}


def _run(tmp_path: Path, *argv: str) -> dict:
    out = tmp_path / "learning.json"
    bench_learning.main([*argv, "--device", "cpu", "--out", str(out),
                         "--markdown", str(tmp_path / "learning.md")])
    return json.loads(out.read_text())


def test_rules_only_reports_every_fold_and_finds_the_trend(tmp_path, capsys):
    doc = _run(tmp_path, "--rules-only", "--quick", "--markets", "trend,garch_noise",
               "--seeds", "0,1", "--bars", "12000")
    assert json.loads(capsys.readouterr().out) == doc
    assert doc["benchmark"] == "learning" and doc["meta"]["device"]["type"] == "cpu"
    assert doc["settings"]["rules_only"] and "agent_spec" not in doc["settings"]
    by_name = {m["market"]: m for m in doc["markets"]}
    assert set(by_name) == {"trend", "garch_noise"}
    for m in doc["markets"]:
        assert [s["seed"] for s in m["seeds"]] == [0, 1]
        for s in m["seeds"]:
            assert len(s["folds"]) == 3
            for f in s["folds"]:
                w = f["windows"]
                assert w["train"][1] <= w["val"][0] < w["val"][1] <= w["test"][0] < w["test"][1]
                assert f["chosen"] in f["val"] and f["val"][f["chosen"]] == max(f["val"].values())
                want = POLICIES if m["market"] == "trend" else POLICIES - {"oracle"}
                assert set(f["test"]) == want
                assert f["test"]["flat"] == {**f["test"]["flat"], "sharpe": 0.0, "trades": 0}
                assert f["test"]["rule"]["bars"] == w["test"][1] - w["test"][0] - 1
        s = m["summary"]
        assert s["agent"] is None and s["pass"] is None
        assert all(t["pass"] is None for t in s["targets"])
    trend = by_name["trend"]["summary"]
    assert trend["oracle"]["mean"] > 0 and trend["rule"]["mean"] > 0
    assert abs(by_name["garch_noise"]["summary"]["t"]["rule"]) < 3
    table = (tmp_path / "learning.md").read_text()
    assert table.startswith("| market |") and "| trend |" in table


def test_a_tiny_agent_is_judged_on_the_rules_test_windows(tmp_path):
    doc = _run(tmp_path, "--quick", "--markets", "trend", "--seeds", "0", "--folds", "1",
               "--epochs", "1")
    (m,) = doc["markets"]
    (seed,) = m["seeds"]
    (fold,) = seed["folds"]
    agent = fold["test"]["agent"]
    assert agent["bars"] == fold["test"]["rule"]["bars"]
    assert fold["trainer_buy_and_hold_sharpe"] == pytest.approx(
        fold["test"]["buy_and_hold"]["sharpe"], rel=1e-6, abs=1e-9)
    s = m["summary"]
    assert s["agent"]["n"] == 1 and isinstance(s["pass"], bool)
    assert doc["settings"]["agent_spec"]["train"]["epochs"] == 1


def test_each_finished_fold_is_written_before_the_run_ends(tmp_path, monkeypatch):
    """A run stopped by a time limit keeps the folds it finished: `--out` holds the document so
    far after every fold, marked incomplete, and the whole document at the end."""
    written: list[dict] = []
    real_write = bench_learning.write_json

    def spy(path: Path, doc: dict) -> None:
        real_write(path, doc)
        written.append(json.loads(path.read_text()))

    monkeypatch.setattr(bench_learning, "write_json", spy)
    doc = _run(tmp_path, "--quick", "--markets", "trend", "--seeds", "0", "--folds", "2",
               "--epochs", "1")
    partial = [d for d in written if d["complete"] is False]
    assert len(partial) == 2
    first = partial[0]["markets"][0]
    assert first["summary"] is None
    assert "agent" in first["seeds"][0]["folds"][0]["test"]
    assert "agent" not in first["seeds"][0]["folds"][1]["test"]
    assert all("agent" in f["test"] for f in partial[1]["markets"][0]["seeds"][0]["folds"])
    assert doc["complete"] is True and doc["markets"][0]["summary"]["agent"]["n"] == 1
    assert not list(tmp_path.glob(".*.tmp"))
