"""Issue 36, point 3: walk-forward folds trained at once in worker processes
(`WalkForwardTrainer.run(parallel=ParallelFolds(N))`, `foxhunt train --parallel-folds N`)."""

from __future__ import annotations

import json
import time

import pytest
import torch

from foxhunt.errors import ConfigError
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.training.parallel import FoldWorkerError, ParallelFolds, fold_threads
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def market():
    return synth(1_500, 0.3, seed=11)


def make(market, run_dir, spec=None, pipe=None, **kw):
    return WalkForwardTrainer(spec or tiny_spec(epochs=1), market.bars, pipe or pipeline(),
                              instrument(), run_dir, CPU, **kw)


def read_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def folds_doc(run_dir):
    """folds.json with the run directory taken out of its checkpoint paths."""
    return json.loads((run_dir / "folds.json").read_text().replace(str(run_dir), "RUN"))


def state(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def _same(x, y):
    return torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y


def test_folds_at_once_write_the_run_the_sequential_path_writes(market, tmp_path):
    """A CPU run is reproduced bit for bit at the same threads a process, which a parallel run's
    workers take as `fold_threads`: folds.json, every checkpoint and run.jsonl are the
    sequential run's; phases.json sums the folds' phases beside the wall."""
    threads = torch.get_num_threads()
    torch.set_num_threads(fold_threads(2))
    try:
        make(market, tmp_path / "seq").run()
    finally:
        torch.set_num_threads(threads)
    seen = []
    result = make(market, tmp_path / "par", on_epoch=seen.append).run(parallel=ParallelFolds(2))
    seq, par = tmp_path / "seq", tmp_path / "par"
    assert folds_doc(par) == folds_doc(seq)
    assert [f.fold for f in result.folds] == [0, 1]
    for name in ("fold0.pt", "fold0_last.pt", "fold1.pt", "fold1_last.pt"):
        a, b = state(seq / "checkpoints" / name), state(par / "checkpoints" / name)
        nets = ["state_dict"] if name.endswith("_last.pt") else ["state_dict", "extra"]
        if name.endswith("_last.pt"):
            a["target"], b["target"] = a["extra"]["target"], b["extra"]["target"]
            nets.append("target")
        for net in nets:
            assert a[net].keys() == b[net].keys()
            assert all(_same(a[net][k], b[net][k]) for k in a[net]), (name, net)
    assert (par / "run.jsonl").read_text() == (seq / "run.jsonl").read_text()
    assert [(t["fold"], t["epoch"]) for t in read_lines(par / "timings.jsonl")] == [(0, 0), (1, 0)]
    assert sorted((x["fold"], x["epoch"]) for x in seen) == [(0, 0), (1, 0)]
    phases = json.loads((par / "phases.json").read_text())
    assert phases == result.phases and phases["parallel_folds"] == 2
    assert 0 < phases["wall_s"] and phases["updates_s"] > 0
    assert json.loads((par / "spec.json").read_text()) == json.loads((seq / "spec.json").read_text())
    assert (par / "tensorboard" / "fold1").is_dir()


def test_a_resumed_run_skips_finished_folds_and_resumes_the_rest_at_once(market, tmp_path,
                                                                         monkeypatch):
    """Interrupted in fold 1 (fold 0 finished, fold 1 saved after its epoch 0, fold 2 not
    begun), the run resumes with two at once: fold 0 is kept, fold 1 goes on from epoch 1,
    fold 2 starts; the logs hold every epoch once, grouped by fold."""
    import foxhunt.training.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "RESUME_EVERY_S", 0.0)
    spec = tiny_spec(epochs=2, folds=3)

    def crash_after_fold1_epoch0(line):
        if line["fold"] == 1 and line["epoch"] == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make(market, tmp_path, spec, on_epoch=crash_after_fold1_epoch0).run()
    kept = (tmp_path / "checkpoints" / "fold0.pt").read_bytes()
    seen, told = [], []
    result = make(market, tmp_path, spec, on_epoch=seen.append,
                  on_fold=lambda r: told.append(r.fold)).run(
        resume=True, parallel=ParallelFolds(2))
    assert sorted((x["fold"], x["epoch"]) for x in seen) == [(1, 1), (2, 0), (2, 1)]
    assert told[0] == 0 and sorted(told) == [0, 1, 2]
    lines = read_lines(tmp_path / "run.jsonl")
    assert [(x["fold"], x["epoch"]) for x in lines] == [(f, e) for f in range(3) for e in range(2)]
    assert [f["fold"] for f in json.loads((tmp_path / "folds.json").read_text())] == [0, 1, 2]
    assert [f.fold for f in result.folds] == [0, 1, 2]
    assert (tmp_path / "checkpoints" / "fold0.pt").read_bytes() == kept


class FailingPipeline(FeaturePipeline):
    """Fold 1's features fail to build (in whichever worker trains it)."""

    fail_at: int = -1

    def transform(self, bars, fit_until=None):
        if fit_until == self.fail_at:
            raise RuntimeError("features broke\nsecond line")
        return super().transform(bars, fit_until=fit_until)


def test_a_fold_failing_in_a_worker_fails_the_run_with_its_one_line_error(market, tmp_path):
    pipe = FailingPipeline(pipeline().config, instrument().session)
    trainer = make(market, tmp_path, spec=tiny_spec(epochs=1, folds=2), pipe=pipe)
    pipe.fail_at = trainer.folds[1].train.stop
    start = time.perf_counter()
    with pytest.raises(FoldWorkerError) as caught:
        trainer.run(parallel=ParallelFolds(2))
    assert str(caught.value) == "fold 1: RuntimeError: features broke"
    assert time.perf_counter() - start < 60  # the other worker was stopped, nothing hung


@pytest.mark.parametrize("n", [0, -2])
def test_no_folds_at_once_is_a_one_line_error(market, tmp_path, n):
    with pytest.raises(ConfigError, match=f"parallel folds: {n} is not a number of folds"):
        make(market, tmp_path).run(parallel=ParallelFolds(n))
    assert not (tmp_path / "spec.json").exists()


def test_the_cli_caps_folds_at_once_at_the_runs_folds_and_refuses_zero():
    from foxhunt.cli.train import parallel_width

    assert parallel_width(1, 3) == (1, None)
    assert parallel_width(2, 3) == (2, None)
    width, note = parallel_width(5, 3)
    assert width == 3 and note == "--parallel-folds 5: the run has 3 folds, trained 3 at once"
    with pytest.raises(ConfigError, match="--parallel-folds: 0 is not"):
        parallel_width(0, 3)


def test_the_parallel_clock_counts_each_folds_updates(monkeypatch):
    """Folds report out of order; a fold finished before a resume counts as done, not as
    this process's rate."""
    from foxhunt.cli.train import FoldsClock

    class Budget:
        def __init__(self, updates):
            self.updates, self.total_updates = tuple(updates), sum(updates)

    now = iter([0.0, 10.0, 20.0])
    monkeypatch.setattr("foxhunt.cli.train.time.perf_counter", lambda: next(now))
    clock = FoldsClock({0: Budget([10, 10]), 1: Budget([30, 30]), 2: Budget([5, 5])})
    clock.fold_done(2)  # finished before this process
    assert clock.total == 90
    assert clock.tick(1, 0) == (40, 3.0, 50 / 3.0)
    assert clock.tick(0, 0) == (50, 2.0, 20.0)


@pytest.mark.parametrize("n", ["0", "-1"])
def test_foxhunt_train_refuses_no_folds_at_once_in_one_line_before_any_work(capsys, n):
    from ..cli.test_cli import run

    code, _, err = run(capsys, "train", "NOSUCH", "--bars", "1min", "--parallel-folds", n)
    assert code == 1
    assert err.strip() == f"error: --parallel-folds: {n} is not a number of folds at once (1 or more)"
