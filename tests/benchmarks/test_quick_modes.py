"""Every benchmark's `--quick` mode, as CI runs it: a benchmark that breaks fails CI.

Each script in benchmarks/ runs as `python benchmarks/<script>.py --quick` in a subprocess (with
a timeout), on the CPU (CUDA hidden), one torch thread, its own FOXHUNT_HOME and temp folder,
and no PostgreSQL server (bench_oms --quick starts none): it must exit 0 and print one JSON
document with the top-level keys its full mode prints, `"quick": true`, and no measurement
reported as failed (`"error"`). GPU-only figures say `"skipped": "no CUDA..."`.

The scripts are parametrised one test each, so pytest-xdist spreads them over its workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from _run import NO_CUDA, errors, run_main

TIMEOUT_S = 300
"""Far above any quick mode's run time on CI's 2 cores: only a hang or a runaway gets there."""

COMMON = {"benchmark", "meta", "quick"}
KEYS = {
    "bench_api": COMMON | {"versions", "server", "rest", "fan_out", "server_stop"},
    "bench_data": COMMON | {"date", "host", "timing", "resample", "features"},
    "bench_backtest": COMMON | {"greedy", "sma"},
    "bench_train": COMMON | {"mode", "config", "update", "collect", "sb3", "notes"},
    "bench_learning": COMMON | {"complete", "settings", "markets"},
    "bench_live": COMMON | {"versions", "exchange", "tick_to_order", "host_probe", "orders_per_s",
                            "orders_per_s_memory_log", "breakdown", "throughput_profile"},
    "bench_oms": {"benchmark", "quick", "date", "python", "machine", "cpus", "loadavg_1m",
                  "risk_check", "submit_durable_sqlite", "submit_durable_postgresql", "agent",
                  "paper_replay_memory_log", "paper_replay_sqlite_file",
                  "paper_replay_sqlite_file_and_venue_journal", "paper_breakdown_us_per_bar"},
    "bench_risk": {"benchmark", "quick", "date", "python", "machine", "cpus", "loadavg_1m",
                   "check_order", "submit_memory_log", "submit_sqlite_wal_file"},
    "bench_tune": COMMON | {"bars", "budget", "config", "results", "fastest"},
    "probe_grad_norm": COMMON | {"results"},
    "probe_graph_branches": COMMON | {"config", "results", "notes"},
    "probe_rollouts": COMMON | {"profile", "bars", "results"},
    "supervised_ceiling": {"quick", "features", "horizons", "markets"},
}
"""Each benchmark script and the top-level keys of its document (full mode prints the same)."""


def scripts() -> list[str]:
    """The runnable scripts in benchmarks/ (helper modules have no `__main__` block)."""
    return sorted(p.stem for p in BENCHMARKS.glob("*.py")
                  if not p.name.startswith("_") and "__main__" in p.read_text())


def test_every_benchmark_script_has_a_quick_run_here():
    assert scripts() == sorted(KEYS), "a new benchmark script needs a --quick mode and a row in KEYS"


def run_quick(script: str, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {**os.environ, "FOXHUNT_HOME": str(home), "TMPDIR": str(tmp),
           "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("FOXHUNT_GPU_PROFILE", None)
    try:
        return subprocess.run([sys.executable, str(BENCHMARKS / f"{script}.py"), "--quick", *argv],
                              cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"benchmarks/{script}.py --quick ran past {TIMEOUT_S} s")


def quick_document(script: str, done: subprocess.CompletedProcess) -> dict:
    """The one JSON document a quick run that exited 0 printed."""
    stderr = done.stderr.strip().splitlines()
    assert done.returncode == 0, f"{script} --quick exited {done.returncode}: " + (
        stderr[-1] if stderr else "(no stderr)")
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{script} --quick: stdout is not one JSON document ({exc}): "
                    f"{done.stdout[:300]!r}")
    assert KEYS[script] <= set(doc), f"missing: {sorted(KEYS[script] - set(doc))}"
    return doc


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(KEYS))
def test_quick_mode_runs_and_prints_the_full_modes_document(script, tmp_path):
    doc = quick_document(script, run_quick(script, tmp_path))
    assert doc["quick"] is True
    assert list(errors(doc)) == []
    if "benchmark" in KEYS[script] and "meta" in KEYS[script]:
        assert doc["meta"]["device"]["type"] == "cpu"
    if script == "bench_train":  # the eager mode measured, the graphed one skipped
        assert doc["update"]["headline"] == "eager" and doc["update"]["eager"]["iters"] > 0
        assert doc["collect"]["policy"]["eager"]["env_steps_per_s"] > 0
        assert doc["update"]["graphed"]["skipped"].startswith(NO_CUDA)
    if script == "probe_graph_branches":
        assert all(r["skipped"].startswith(NO_CUDA) for r in doc["results"].values())
    if script == "probe_grad_norm":
        assert doc["skipped"].startswith(NO_CUDA) and len(doc["results"]) == 3
    if script == "bench_oms":
        assert doc["submit_durable_postgresql"]["skipped"].startswith("--quick")
        assert doc["paper_replay_sqlite_file_and_venue_journal"]["bars"] > 0
    if script == "bench_api":  # every request answered, every event at every client
        assert doc["rest"]["errors"] == 0 and doc["rest"]["latency_from_due"]["n"] > 0
        f = doc["fan_out"]
        assert f["lost"] == 0 and f["deliveries"] == f["expected_deliveries"] > 0
        assert doc["server_stop"].startswith("stopped")
    if script == "bench_live":  # every latency run timed orders; every order acknowledged
        assert all(r["decisions_timed"] > 0 and isinstance(r["p99_us"], float)
                   for r in doc["tick_to_order"].values())
        t = doc["orders_per_s"]
        assert t["exchange_received"] == t["orders"] + t["warmup_orders"] and t["denied"] == 0
        assert doc["breakdown"]["skipped"].startswith("--quick")


@pytest.mark.slow
def test_the_learning_benchmarks_false_deploy_mode_runs_quick(tmp_path):
    doc = quick_document("bench_learning",
                         run_quick("bench_learning", tmp_path, "--false-deploys"))
    assert doc["complete"] is True and doc["settings"]["mode"] == "false_deploys"
    assert [m["market"] for m in doc["markets"]] == ["walk", "trend"]
    for m in doc["markets"]:
        s = m["summary"]
        assert (s["seeds"], s["folds"]) == (1, 3)
        for rule in (doc["settings"]["deploy_rule"], "psr"):
            lo, hi = s[rule]["interval_95"]
            assert 0 <= lo <= s[rule]["rate"] <= hi <= 1
        assert s["targets"] and all(isinstance(t["target_met"], bool) for t in s["targets"])


# -- how a benchmark ends ---------------------------------------------------------------------


def test_a_failure_is_one_line_naming_where_it_was_raised():
    def main():
        raise ValueError("no bars\nsecond line")

    with pytest.raises(SystemExit) as stop:
        run_main(main, "bench_x")
    message = str(stop.value.code)
    assert message.startswith("error: bench_x: ValueError: no bars (at test_quick_modes.py:")
    assert "\n" not in message and "in main)" in message


def test_a_measurement_reported_as_failed_exits_1_after_the_whole_document(capsys):
    import torch
    from _common import emit

    results = {"quick": True, "update": {"eager": {"error": "ConfigError: unset"},
                                         "graphed": {"skipped": NO_CUDA}}}
    with pytest.raises(SystemExit) as stop:
        emit("x", torch.device("cpu"), results, None)
    assert json.loads(capsys.readouterr().out)["update"] == results["update"]
    assert str(stop.value.code) == "error: x: a measurement failed: .update.eager: ConfigError: unset"
