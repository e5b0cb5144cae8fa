"""On CUDA the validation and test rollouts replay a captured step (graphed; validation's also
compiled) with no host sync per step, and agree with the eager rollout; the compiled step is
compiled once per run, not once per fold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.training.evaluate import Rollouts, constant_policy, greedy_policy
from foxhunt.training.trainer import FULL_LONG, WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
CUDA = torch.device("cuda") if torch.cuda.is_available() else None


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    market = synth(3_000, 0.3, seed=11)
    return WalkForwardTrainer(tiny_spec(folds=3), market.bars, pipeline(), instrument(),
                              tmp_path_factory.mktemp("run"), CUDA)


def judge_runner(trainer, ctx, graphs, compile=False):
    ctx.learner.online.eval()
    f = ctx.fold
    return Rollouts(greedy_policy(ctx.learner.online), ctx.val_market, trainer.spec.env,
                    [f.val, trainer.train_slice(f)], 1e5, 8, CUDA, graphs=graphs,
                    compile=compile)


def same(got, want, exact=True):
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a.action, b.action) and np.array_equal(a.bar, b.bar)
        if exact:
            assert np.array_equal(a.pnl, b.pnl) and a.summary() == b.summary()
        else:
            np.testing.assert_allclose(a.pnl, b.pnl, rtol=1e-9, atol=1e-6)
            assert a.trades == b.trades


def test_a_graphed_rollout_is_the_eager_one_run_after_run(trainer):
    """The captured step replays the eager step's kernels: the same records, before and after
    the weights change in place (as training changes them between validations)."""
    ctx = trainer.start_fold(trainer.folds[0])
    eager, graphed = judge_runner(trainer, ctx, False), judge_runner(trainer, ctx, True)
    for _ in range(2):
        same(graphed.run(), eager.run())
        assert graphed.captured
        with torch.no_grad():
            for p in ctx.learner.online.parameters():
                p.add_(torch.randn_like(p) * 0.3)


def test_a_compiled_rollout_agrees_with_the_eager_one(trainer):
    ctx = trainer.start_fold(trainer.folds[0])
    eager, compiled = judge_runner(trainer, ctx, False), judge_runner(trainer, ctx, True, True)
    same(compiled.run(), eager.run(), exact=False)
    same(compiled.run(), eager.run(), exact=False)
    assert compiled.captured and compiled.compiled


def test_the_step_loop_never_syncs_with_the_host(trainer):
    ctx = trainer.start_fold(trainer.folds[0])
    runner = judge_runner(trainer, ctx, True, True)
    runner.run()  # warm-up, compile, capture
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for group in runner._groups:
            group.step_all()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_the_baselines_stepped_together_are_each_their_own_rollout(trainer):
    ctx = trainer.start_fold(trainer.folds[0])
    f, env = ctx.fold, trainer.spec.env
    flat, held = constant_policy((0, 0, 0)), constant_policy(FULL_LONG)
    together = Rollouts([flat, held], ctx.test_market, env, [f.test, f.test], 1e5, 1, CUDA,
                        graphs=True)
    got = together.run()
    assert together.captured
    same([got[0]], Rollouts(flat, ctx.test_market, env, [f.test], 1e5, 1, CUDA).run())
    same([got[1]], Rollouts(held, ctx.test_market, env, [f.test], 1e5, 1, CUDA).run())


def test_later_folds_reuse_the_compiled_rollout_step(trainer):
    """Rolling folds validate on windows of equal length: fold 2's compiled step is fold 1's."""
    counters = torch._dynamo.utils.counters["frames"]
    for fold in trainer.folds[:2]:
        ctx = trainer.start_fold(fold)
        before = counters["total"]
        judge_runner(trainer, ctx, True, True).run()
        compiled = counters["total"] - before
        if fold.index == 0:
            assert compiled >= 0
        else:
            assert compiled == 0


def test_a_cuda_run_splits_its_wall_into_phases(trainer, tmp_path):
    spec = tiny_spec(epochs=2, folds=2)
    run = WalkForwardTrainer(spec, trainer.bars, pipeline(), instrument(), tmp_path, CUDA).run()
    phases = run.phases
    assert phases["setup_compile_s"] > 0 and phases["validation_s"] > 0 and phases["test_s"] > 0
    assert 0 < phases["experience_updates_share"] <= 1
