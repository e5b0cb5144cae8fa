"""On CUDA the trainer's hot loop never synchronises with the host, and graphs match eager."""

from __future__ import annotations

import pytest
import torch

from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
CUDA = torch.device("cuda") if torch.cuda.is_available() else None


def learner(tmp_path, graphs: bool, seed: int = 0):
    market = synth(3_000, 0.3, seed=11)
    spec = tiny_spec(cuda_graphs=graphs, seed=seed)
    trainer = WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), tmp_path, CUDA)
    return trainer.start_fold(trainer.folds[0]).learner


def test_hot_loop_has_no_host_sync(tmp_path):
    lr = learner(tmp_path, graphs=True)
    lr.run_collect(8)
    lr.run_updates(8)  # warm-up and capture happen here
    torch.cuda.synchronize()
    assert lr.collect.captured and lr.update.captured
    torch.cuda.set_sync_debug_mode("error")
    try:
        lr.run_collect(16)
        lr.run_updates(32)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    metrics = lr.read_metrics()
    assert metrics.update["updates"] == 40 and metrics.collect["env_steps"] == 24 * lr.env.n_envs


def test_eager_hot_loop_has_no_host_sync(tmp_path):
    lr = learner(tmp_path, graphs=False)
    lr.run_collect(4)
    lr.run_updates(2)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        lr.run_collect(4)
        lr.run_updates(4)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_graphed_and_eager_updates_agree(tmp_path):
    eager, graphed = learner(tmp_path / "e", graphs=False), learner(tmp_path / "g", graphs=True)
    for lr in (eager, graphed):
        torch.cuda.manual_seed(123)
        lr.run_collect(8)
        lr.run_updates(6)
    torch.cuda.synchronize()
    for (name, a), (_, b) in zip(eager.online.state_dict().items(), graphed.online.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4, msg=f"{name} differs")
    torch.testing.assert_close(eager.replay.priority_alpha, graphed.replay.priority_alpha,
                               rtol=1e-3, atol=1e-5)
