"""A training run's epochs and fold verdicts where users already look: TensorBoard event files
beside run.jsonl, an MLflow run where `MLFLOW_TRACKING_URI` is set, OpenTelemetry spans and
metrics where `foxhunt.telemetry` is on (docs/training.md, "Tracking"; docs/telemetry.md).

run.jsonl stays the record; every sink here is a view of it, written once per epoch and per
fold (never inside the collect/update loops), and a sink that fails warns once and turns
itself off rather than stopping training.

TensorBoard: `RUN_DIR/tensorboard/fold{k}` holds fold k's epochs (TensorBoard shows each fold
as a run, tags `train/loss`, `val/sharpe`, `speed/updates_per_s`, `time/training_ms`, ... at
step = epoch), `RUN_DIR/tensorboard/folds` the verdicts (`fold/test_sharpe`, ... at step =
fold). A fold's event files are rewritten from run.jsonl when this process first trains it,
and the verdicts when the run starts, so a resumed run shows each epoch once.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from foxhunt import telemetry

TENSORBOARD_DIR = "tensorboard"
MLFLOW_URI_ENV = "MLFLOW_TRACKING_URI"
MLFLOW_EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
MLFLOW_EXPERIMENT = "foxhunt"
MLFLOW_RUN_FILE = "mlflow.json"
ARTIFACTS = ("spec.json", "folds.json", "phases.json", "report.html", "report.md")
SERVICE_NAME = "foxhunt-train"
TRACER = "foxhunt.training"

NESTED = ("val", "train_eval")
SELECTION = ("gap", "gap_p", "select_sharpe")  # validation figures kept at the line's top level
NOT_SCALARS = ("fold", "epoch", "best")
TIMES = ("experience_ms", "training_ms", "validation_ms", "compile_ms")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v)


def rates(line: dict[str, Any], timing: dict[str, Any]) -> dict[str, float]:
    """Updates and env steps per second of the epoch's update and collect phases."""
    out = {}
    if timing.get("training_ms", 0) > 0:
        out["updates_per_s"] = 1e3 * float(line.get("updates", 0.0)) / timing["training_ms"]
    if timing.get("experience_ms", 0) > 0:
        out["env_steps_per_s"] = 1e3 * float(line.get("env_steps", 0.0)) / timing["experience_ms"]
    return out


def epoch_scalars(line: dict[str, Any], timing: dict[str, Any]) -> dict[str, float]:
    """The epoch's numbers as tags: `train/*` (the update and collect diagnostics), `val/*`
    and `train_eval/*` (the greedy rollouts; `val/gap` too), `speed/*`, `time/*`."""
    out: dict[str, float] = {}
    for key, value in line.items():
        if key in NESTED and isinstance(value, dict):
            out.update({f"{key}/{k}": float(v) for k, v in value.items() if _number(v)})
        elif key not in NOT_SCALARS and _number(value):
            out[f"{'val' if key in SELECTION else 'train'}/{key}"] = float(value)
    out.update({f"speed/{k}": v for k, v in rates(line, timing).items()})
    out.update({f"time/{k}": float(timing[k]) for k in TIMES if _number(timing.get(k))})
    return out


def verdict_scalars(row: dict[str, Any]) -> dict[str, float]:
    """A fold's verdict (its `FoldReport.row()`) as `fold/*` numbers; `fold/deployed` is 1 for
    the agent, 0 for flat."""
    out = {f"fold/{k}": float(v) for k, v in row.items() if k != "fold" and _number(v)}
    out["fold/deployed"] = 1.0 if row.get("deployed") == "agent" else 0.0
    return out


def flatten(doc: Any, prefix: str = "") -> dict[str, str]:
    """A nested document as dotted keys of strings: the run's spec as MLflow params."""
    if not isinstance(doc, dict):
        return {prefix: json.dumps(doc) if isinstance(doc, list | dict) else str(doc)}
    out: dict[str, str] = {}
    for k, v in doc.items():
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x] if path.exists() else []


class _Sink:
    """One destination; `RunTracker` calls these and turns a sink off at its first error."""

    name = "sink"

    def epoch(self, line: dict[str, Any], timing: dict[str, Any]) -> None:
        pass

    def fold_done(self, report: dict[str, Any], row: dict[str, Any]) -> None:
        pass

    def close(self, status: str) -> None:
        pass


class TensorBoardSink(_Sink):
    """Event files under RUN_DIR/tensorboard: one writer per fold trained in this process
    (its directory rewritten from run.jsonl at its first epoch here) and one for verdicts."""

    name = "TensorBoard"

    def __init__(self, run_dir: Path, resume: bool):
        from torch.utils.tensorboard import SummaryWriter

        self._writer_type = SummaryWriter
        self.run_dir, self.root = run_dir, run_dir / TENSORBOARD_DIR
        if not resume:
            shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.root / "folds", ignore_errors=True)
        self.folds = SummaryWriter(str(self.root / "folds"))
        self.writers: dict[int, Any] = {}

    def _fold_writer(self, fold: int, epoch: int) -> Any:
        writer = self.writers.get(fold)
        if writer is None:
            shutil.rmtree(self.root / f"fold{fold}", ignore_errors=True)
            writer = self.writers[fold] = self._writer_type(str(self.root / f"fold{fold}"))
            timings = {(t["fold"], t["epoch"]): t for t in read_lines(self.run_dir / "timings.jsonl")}
            for line in read_lines(self.run_dir / "run.jsonl"):
                if line["fold"] == fold and line["epoch"] < epoch:
                    self._write(writer, line, timings.get((fold, line["epoch"]), {}))
        return writer

    @staticmethod
    def _write(writer: Any, line: dict[str, Any], timing: dict[str, Any]) -> None:
        for tag, value in epoch_scalars(line, timing).items():
            writer.add_scalar(tag, value, line["epoch"])

    def epoch(self, line: dict[str, Any], timing: dict[str, Any]) -> None:
        self._write(self._fold_writer(line["fold"], line["epoch"]), line, timing)

    def fold_done(self, report: dict[str, Any], row: dict[str, Any]) -> None:
        fold = report["fold"]
        for tag, value in verdict_scalars(row).items():
            self.folds.add_scalar(tag, value, fold)
        self.folds.add_text("fold/verdict", report["verdict"], fold)
        self.folds.flush()
        if fold in self.writers:
            self.writers[fold].flush()

    def close(self, status: str) -> None:
        for writer in [*self.writers.values(), self.folds]:
            writer.close()


class MLflowSink(_Sink):
    """An MLflow run named after the run directory: the spec as params, each epoch's scalars as
    `fold{k}/<tag>` metrics at step = epoch, verdicts as `fold/*` metrics at step = fold and
    `fold{k}.verdict` tags, the run's JSON files as artifacts. A resumed run continues the
    MLflow run recorded in RUN_DIR/mlflow.json; epochs a crash made the run train again are
    logged again at the same step (MLflow keeps both)."""

    name = "MLflow"

    def __init__(self, run_dir: Path, uri: str, spec: dict[str, Any], resume: bool):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.run_dir, self.client = run_dir, MlflowClient(uri)
        record = run_dir / MLFLOW_RUN_FILE
        known = json.loads(record.read_text()) if resume and record.exists() else {}
        self.trained: set[int] | None = None  # None: a new MLflow run, which gets every verdict
        if known.get("tracking_uri") == uri:
            self.run_id, self.trained = known["run_id"], set()
            self.client.update_run(self.run_id, status="RUNNING")
            return
        name = os.environ.get(MLFLOW_EXPERIMENT_ENV) or MLFLOW_EXPERIMENT
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = (experiment.experiment_id if experiment is not None
                         else self.client.create_experiment(name))
        self.run_id = self.client.create_run(
            experiment_id, run_name=run_dir.name,
            tags={"foxhunt.run_dir": str(run_dir.resolve())}).info.run_id
        record.write_text(json.dumps({"tracking_uri": uri, "run_id": self.run_id}))
        params = [Param(k, v[:6000]) for k, v in flatten(spec).items()]
        for i in range(0, len(params), 100):  # MLflow's limit per batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def _metrics(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in values.items()]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def epoch(self, line: dict[str, Any], timing: dict[str, Any]) -> None:
        scalars = epoch_scalars(line, timing)
        if self.trained is not None:
            self.trained.add(line["fold"])
        self._metrics({f"fold{line['fold']}/{k}": v for k, v in scalars.items()}, line["epoch"])

    def fold_done(self, report: dict[str, Any], row: dict[str, Any]) -> None:
        fold = report["fold"]
        if self.trained is not None and fold not in self.trained:
            return  # logged by the process that trained it
        self._metrics(verdict_scalars(row), fold)
        self.client.set_tag(self.run_id, f"fold{fold}.verdict", report["verdict"][:8000])
        self._artifacts()

    def _artifacts(self) -> None:
        for name in ARTIFACTS:
            if (self.run_dir / name).exists():
                self.client.log_artifact(self.run_id, str(self.run_dir / name))

    def close(self, status: str) -> None:
        self._artifacts()
        self.client.set_terminated(self.run_id, status=status)


class TelemetrySink(_Sink):
    """Spans `foxhunt.train.run` > `foxhunt.train.fold` > `foxhunt.train.epoch` and the
    histograms `foxhunt.train.updates_per_s` and `foxhunt.train.env_steps_per_s`."""

    name = "OpenTelemetry"

    def __init__(self, run_dir: Path, resume: bool):
        from opentelemetry import context, trace

        self._trace, self._context = trace, context
        self.tracer = telemetry.tracer(TRACER)
        meter = telemetry.meter(TRACER)
        self.histograms = {
            "updates_per_s": meter.create_histogram(
                "foxhunt.train.updates_per_s", unit="{update}/s",
                description="gradient updates per second of an epoch's update phase"),
            "env_steps_per_s": meter.create_histogram(
                "foxhunt.train.env_steps_per_s", unit="{step}/s",
                description="env transitions collected per second of an epoch's collect phase"),
        }
        self.run_span = self.tracer.start_span("foxhunt.train.run", attributes={
            "foxhunt.run_dir": str(run_dir), "foxhunt.resume": resume})
        self._run_token = context.attach(trace.set_span_in_context(self.run_span))
        self.fold_span: Any = None

    @contextmanager
    def fold(self, fold: int) -> Iterator[None]:
        """The fold's span, current while it trains and left open for its verdict."""
        span = self.tracer.start_span("foxhunt.train.fold", attributes={"foxhunt.fold": fold})
        token = self._context.attach(self._trace.set_span_in_context(span))
        try:
            yield
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(self._trace.StatusCode.ERROR, type(exc).__name__)
            span.end()
            raise
        else:
            self.fold_span = span
        finally:
            self._context.detach(token)

    def epoch(self, line: dict[str, Any], timing: dict[str, Any]) -> None:
        end = time.time_ns()
        took = sum(float(timing.get(k, 0.0)) for k in TIMES)
        attributes = {"foxhunt.fold": line["fold"], "foxhunt.epoch": line["epoch"],
                      "foxhunt.updates": int(line.get("updates", 0)),
                      "foxhunt.env_steps": int(line.get("env_steps", 0)),
                      "foxhunt.best": bool(line.get("best"))}
        for key, value in (("foxhunt.val.sharpe", line["val"].get("sharpe")),
                           ("foxhunt.loss", line.get("loss"))):
            if _number(value):
                attributes[key] = float(value)
        span = self.tracer.start_span("foxhunt.train.epoch", attributes=attributes,
                                      start_time=end - int(took * 1e6))
        span.end(end_time=end)
        for key, value in rates(line, timing).items():
            self.histograms[key].record(value, {"foxhunt.fold": line["fold"]})

    def fold_done(self, report: dict[str, Any], row: dict[str, Any]) -> None:
        span, self.fold_span = self.fold_span, None
        if span is None:  # a fold finished before a resume: not trained in this process
            return
        span.set_attributes({k: v for k, v in {
            "foxhunt.deployed": report["deployed"], "foxhunt.best_epoch": report["best_epoch"],
            "foxhunt.val.sharpe": row.get("val_sharpe"), "foxhunt.test.sharpe": row.get("test_sharpe"),
            "foxhunt.verdict": report["verdict"]}.items() if v is not None})
        span.end()

    def close(self, status: str) -> None:
        if self.fold_span is not None:
            self.fold_span.end()
        if status != "FINISHED":
            self.run_span.set_status(self._trace.StatusCode.ERROR, status)
        self._context.detach(self._run_token)
        self.run_span.end()


class RunTracker:
    """What `WalkForwardTrainer.run` reports to at the points it writes run.jsonl and
    folds.json: `epoch` after each epoch's line, `fold` around a fold's training, `fold_done`
    after folds.json; a context manager around the run. `RunTracker.off()` has no sinks (a
    trainer used outside `run`)."""

    def __init__(self, run_dir: Path, spec: dict[str, Any], resume: bool):
        self.run_dir = Path(run_dir)
        self.sinks: list[_Sink] = []
        self._telemetry: TelemetrySink | None = None
        self._open("TensorBoard", lambda: TensorBoardSink(self.run_dir, resume))
        uri = os.environ.get(MLFLOW_URI_ENV, "").strip()
        if uri:
            self._open("MLflow", lambda: MLflowSink(self.run_dir, uri, spec, resume))
        if telemetry.enabled() or telemetry.configure(SERVICE_NAME):
            self._telemetry = self._open("OpenTelemetry", lambda: TelemetrySink(self.run_dir, resume))

    @classmethod
    def off(cls) -> RunTracker:
        tracker = cls.__new__(cls)
        tracker.run_dir, tracker.sinks, tracker._telemetry = Path(), [], None
        return tracker

    def _open(self, name: str, build: Any) -> Any:
        try:
            sink = build()
        except ImportError as exc:
            warnings.warn(f"{name} tracking is off: {exc.name or exc} is not installed "
                          "(pip install 'foxhunt[track]')", stacklevel=3)
            return None
        except Exception as exc:  # noqa: BLE001 - tracking never stops a run
            warnings.warn(f"{name} tracking is off: {type(exc).__name__}: {exc}", stacklevel=3)
            return None
        self.sinks.append(sink)
        return sink

    def _each(self, call: str, *args: Any) -> None:
        for sink in list(self.sinks):
            try:
                getattr(sink, call)(*args)
            except Exception as exc:  # noqa: BLE001 - tracking never stops a run
                self.sinks.remove(sink)
                if sink is self._telemetry:
                    self._telemetry = None
                warnings.warn(f"{sink.name} tracking is off: {type(exc).__name__}: {exc}",
                              stacklevel=3)

    @contextmanager
    def fold(self, fold: int) -> Iterator[None]:
        if self._telemetry is None:
            yield
            return
        with self._telemetry.fold(fold):
            yield

    def epoch(self, line: dict[str, Any], timing: dict[str, Any]) -> None:
        self._each("epoch", line, timing)

    def fold_done(self, report: Any) -> None:
        """After folds.json has `report` (a `FoldReport`: its fields and `row()`)."""
        if self.sinks:
            self._each("fold_done", dict(report.__dict__), report.row())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        status = ("FINISHED" if kind is None
                  else "KILLED" if issubclass(kind, KeyboardInterrupt) else "FAILED")
        self._each("close", status)
        self.sinks, self._telemetry = [], None
