"""Run tracking (training/tracking.py): TensorBoard event files equal to run.jsonl, once per
epoch across a resume; MLflow runs; OpenTelemetry spans and metrics of a training run; all of
it optional."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from foxhunt import telemetry
from foxhunt.training import trainer as trainer_module
from foxhunt.training.tracking import (
    MLFLOW_RUN_FILE,
    MLFLOW_URI_ENV,
    TENSORBOARD_DIR,
    epoch_scalars,
    flatten,
)
from foxhunt.training.trainer import WalkForwardTrainer

from ..test_telemetry import metric_points
from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def market():
    return synth(900, 0.3, seed=11)


@pytest.fixture(autouse=True)
def no_tracking_env(monkeypatch):
    for name in (MLFLOW_URI_ENV, telemetry.ENDPOINT_ENV, telemetry.TRACES_ENDPOINT_ENV,
                 telemetry.METRICS_ENDPOINT_ENV):
        monkeypatch.delenv(name, raising=False)
    yield
    telemetry.shutdown()


def make(market, run_dir, spec=None, **kw):
    return WalkForwardTrainer(spec or tiny_spec(), market.bars, pipeline(), instrument(), run_dir,
                              CPU, **kw)


def read_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def scalars(folder) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(folder), purge_orphaned_data=False)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def assert_tensorboard_is_run_jsonl(run_dir):
    lines = read_lines(run_dir / "run.jsonl")
    timings = {(t["fold"], t["epoch"]): t for t in read_lines(run_dir / "timings.jsonl")}
    for fold in sorted({x["fold"] for x in lines}):
        logged = scalars(run_dir / TENSORBOARD_DIR / f"fold{fold}")
        mine = [x for x in lines if x["fold"] == fold]
        expected: dict[str, list[tuple[int, float]]] = {}
        for x in mine:
            for tag, value in epoch_scalars(x, timings[(fold, x["epoch"])]).items():
                expected.setdefault(tag, []).append((x["epoch"], value))
        assert set(logged) == set(expected)
        for tag, points in expected.items():
            assert [s for s, _ in logged[tag]] == [s for s, _ in points], tag
            assert [v for _, v in logged[tag]] == pytest.approx([v for _, v in points], rel=1e-6)
        assert [v for _, v in logged["val/sharpe"]] == pytest.approx(
            [x["val"]["sharpe"] for x in mine], rel=1e-6)
        assert [v for _, v in logged["train/loss"]] == pytest.approx(
            [x["loss"] for x in mine], rel=1e-6)


def test_epoch_scalars_name_the_tags():
    line = {"fold": 0, "epoch": 3, "loss": 1.5, "updates": 10.0, "env_steps": 128.0, "best": True,
            "action_mix": [[1.0]], "gap": 0.5, "val": {"sharpe": 2.0, "psr": None, "flat": 0.25},
            "train_eval": {"sharpe": 2.5}}
    timing = {"experience_ms": 500.0, "training_ms": 100.0, "validation_ms": 5.0,
              "compile_ms": 0.0, "compiled": False}
    assert epoch_scalars(line, timing) == {
        "train/loss": 1.5, "train/updates": 10.0, "train/env_steps": 128.0, "val/gap": 0.5,
        "val/sharpe": 2.0, "val/flat": 0.25, "train_eval/sharpe": 2.5,
        "speed/updates_per_s": 100.0, "speed/env_steps_per_s": 256.0,
        "time/experience_ms": 500.0, "time/training_ms": 100.0, "time/validation_ms": 5.0,
        "time/compile_ms": 0.0}


def test_flatten_gives_dotted_params():
    assert flatten({"train": {"epochs": 2, "perf": {"compile": "auto"}}, "f": [1, 2]}) == {
        "train.epochs": "2", "train.perf.compile": "auto", "f": "[1, 2]"}


def test_tensorboard_scalars_equal_run_jsonl_and_verdicts(market, tmp_path):
    result = make(market, tmp_path).run()
    assert_tensorboard_is_run_jsonl(tmp_path)
    folds = scalars(tmp_path / TENSORBOARD_DIR / "folds")
    rows = result.table()
    assert [s for s, _ in folds["fold/val_sharpe"]] == [0, 1]
    assert [v for _, v in folds["fold/val_sharpe"]] == pytest.approx([r["val_sharpe"] for r in rows])
    assert [v for _, v in folds["fold/deployed"]] == [float(r["deployed"] == "agent") for r in rows]


def interrupt_at(fold: int, epoch: int):
    def stop(line):
        if (line["fold"], line["epoch"]) == (fold, epoch):
            raise KeyboardInterrupt
    return stop


@pytest.mark.parametrize("resume_every_s", [0.0, 1e9], ids=["from-its-epoch", "fold-again"])
def test_a_resumed_run_logs_each_epoch_once(market, tmp_path, monkeypatch, resume_every_s):
    """Stopped after fold 1's second epoch: resumed from that epoch's checkpoint (its earlier
    epochs replayed from run.jsonl) or, with no checkpoint yet, the fold trained again."""
    monkeypatch.setattr(trainer_module, "RESUME_EVERY_S", resume_every_s)
    spec = tiny_spec(epochs=3)
    with pytest.raises(KeyboardInterrupt):
        make(market, tmp_path, spec, on_epoch=interrupt_at(1, 1)).run()
    assert len(scalars(tmp_path / TENSORBOARD_DIR / "fold1")["val/sharpe"]) == 2
    make(market, tmp_path, spec).run(resume=True)
    assert sorted({(x["fold"], x["epoch"]) for x in read_lines(tmp_path / "run.jsonl")}) == [
        (f, e) for f in (0, 1) for e in range(3)]
    assert_tensorboard_is_run_jsonl(tmp_path)
    folds = scalars(tmp_path / TENSORBOARD_DIR / "folds")
    assert [s for s, _ in folds["fold/val_sharpe"]] == [0, 1]


def test_without_tensorboard_training_runs_and_says_so_once(market, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.warns(UserWarning, match="TensorBoard tracking is off") as caught:
        make(market, tmp_path, tiny_spec(epochs=1, folds=1)).run()
    assert len([w for w in caught if "tracking is off" in str(w.message)]) == 1
    assert not (tmp_path / TENSORBOARD_DIR).exists()
    assert len(read_lines(tmp_path / "run.jsonl")) == 1


def test_a_broken_mlflow_uri_warns_and_training_goes_on(market, tmp_path, monkeypatch):
    monkeypatch.setenv(MLFLOW_URI_ENV, "nosuchscheme://nowhere")
    with pytest.warns(UserWarning, match="MLflow tracking is off"):
        make(market, tmp_path, tiny_spec(epochs=1, folds=1)).run()
    assert len(read_lines(tmp_path / "run.jsonl")) == 1


def test_mlflow_logs_params_metrics_verdicts_and_artifacts(market, tmp_path, monkeypatch):
    """A local file store (MLflow 3 keeps it behind MLFLOW_ALLOW_FILE_STORE; sqlite:/// works
    too but builds its schema for ~10 s)."""
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv(MLFLOW_URI_ENV, uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    run_dir = tmp_path / "run"
    result = make(market, run_dir).run()
    run_id = json.loads((run_dir / MLFLOW_RUN_FILE).read_text())["run_id"]
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.params["train.epochs"] == "2"
    lines = read_lines(run_dir / "run.jsonl")
    for fold in (0, 1):
        history = sorted((m.step, m.value) for m in
                         client.get_metric_history(run_id, f"fold{fold}/val/sharpe"))
        mine = [x for x in lines if x["fold"] == fold]
        assert [s for s, _ in history] == [x["epoch"] for x in mine]
        assert [v for _, v in history] == pytest.approx([x["val"]["sharpe"] for x in mine])
        assert run.data.tags[f"fold{fold}.verdict"] == result.folds[fold].verdict
    tested = client.get_metric_history(run_id, "fold/test_sharpe")
    assert sorted(m.step for m in tested) == [0, 1]
    assert {"spec.json", "folds.json", "phases.json"} <= {
        a.path for a in client.list_artifacts(run_id)}


def test_telemetry_spans_and_metrics_of_a_run(market, tmp_path, otel_memory):
    spans, reader = otel_memory
    result = make(market, tmp_path).run()
    finished = spans.get_finished_spans()
    by_name: dict[str, list] = {}
    for s in finished:
        by_name.setdefault(s.name, []).append(s)
    assert {k: len(v) for k, v in by_name.items()} == {
        "foxhunt.train.run": 1, "foxhunt.train.fold": 2, "foxhunt.train.epoch": 4}
    (run,) = by_name["foxhunt.train.run"]
    folds = {s.attributes["foxhunt.fold"]: s for s in by_name["foxhunt.train.fold"]}
    assert all(s.parent.span_id == run.context.span_id for s in folds.values())
    for f, report in enumerate(result.folds):
        assert folds[f].attributes["foxhunt.deployed"] == report.deployed
        assert folds[f].attributes["foxhunt.verdict"] == report.verdict
    lines = read_lines(tmp_path / "run.jsonl")
    epochs = sorted(by_name["foxhunt.train.epoch"],
                    key=lambda s: (s.attributes["foxhunt.fold"], s.attributes["foxhunt.epoch"]))
    for span, line in zip(epochs, lines, strict=True):
        assert span.parent.span_id == folds[line["fold"]].context.span_id
        assert span.attributes["foxhunt.epoch"] == line["epoch"]
        assert span.attributes["foxhunt.updates"] == int(line["updates"])
        assert span.attributes["foxhunt.val.sharpe"] == pytest.approx(line["val"]["sharpe"])
        assert folds[line["fold"]].start_time <= span.start_time <= span.end_time
    points = metric_points(reader)
    for name in ("foxhunt.train.updates_per_s", "foxhunt.train.env_steps_per_s"):
        assert sum(p.count for p in points[name]) == 4
        assert {p.attributes["foxhunt.fold"] for p in points[name]} == {0, 1}


def test_telemetry_off_imports_and_exports_nothing(tmp_path):
    """The tracker of a run without an OTLP endpoint, in a fresh process."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from foxhunt.training.tracking import RunTracker\n"
        f"with RunTracker(Path({str(tmp_path)!r}), {{}}, False) as t:\n"
        "    with t.fold(0):\n"
        "        t.epoch({'fold': 0, 'epoch': 0, 'loss': 1.0, 'val': {'sharpe': 1.0}},\n"
        "                {'training_ms': 1.0})\n"
        "    assert [type(s).__name__ for s in t.sinks] == ['TensorBoardSink']\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'mlflow'))))\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_") and k != MLFLOW_URI_ENV}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]"
