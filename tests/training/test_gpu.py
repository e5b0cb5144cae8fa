"""On CUDA the trainer's hot loop never synchronises with the host, and graphs match eager."""

from __future__ import annotations

import pytest
import torch

from foxhunt.training.config import PerformanceConfig
from foxhunt.training.learner import Learner
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec
from .test_pipelined_update import assert_working_weights_are_composed
from .test_regularisers import flat_params

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
CUDA = torch.device("cuda") if torch.cuda.is_available() else None


def learner(tmp_path, graphs: bool, seed: int = 0, **performance):
    """One update per graph replay unless a test asks for blocks: most tests here check what
    a handful of replays of the single-update graph do."""
    performance = {"updates_per_graph": 1, **performance, "cuda_graphs": graphs}
    market = synth(3_000, 0.3, seed=11)
    spec = tiny_spec(seed=seed, performance=performance)
    trainer = WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), tmp_path, CUDA)
    return trainer.start_fold(trainer.folds[0]).steps


def test_hot_loop_has_no_host_sync(tmp_path):
    lr = learner(tmp_path, graphs=True, updates_per_graph=PerformanceConfig().updates_per_graph)
    k, u = lr.fast.collect_block, lr.fast.update_block
    # The defaults: blocks of k collect steps and of u updates, the rest of an epoch single ones.
    assert k > 1 and u > 1
    lr.run_collect(4 * k + 4)  # warm-up and capture of both collect graphs happen here
    for _ in range(4):  # and of both update graphs
        lr.run_updates(u + 1)
    torch.cuda.synchronize()
    assert lr.collect.captured and lr.collect_block.captured
    assert lr.update.captured and lr.update_block.captured
    torch.cuda.set_sync_debug_mode("error")
    try:
        lr.run_collect(2 * k + 3)
        lr.run_updates(8 * u + 3)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    metrics = lr.learner.read_metrics()
    assert metrics.update["updates"] == 4 * (u + 1) + 8 * u + 3
    assert metrics.collect["env_steps"] == (6 * k + 7) * lr.learner.env.n_envs


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
    for (name, a), (_, b) in zip(eager.learner.online.state_dict().items(), graphed.learner.online.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4, msg=f"{name} differs")
    torch.testing.assert_close(eager.learner.replay.priority_alpha, graphed.learner.replay.priority_alpha,
                               rtol=1e-3, atol=1e-5)


def test_replayed_graphs_draw_fresh_noise_every_step(tmp_path):
    lr = learner(tmp_path, graphs=True)
    assert lr.compiled and lr.fast.bf16
    lr.run_collect(8)
    lr.run_updates(5)  # warm-up and capture
    assert lr.update.captured
    noise = lr.learner.online.heads.hidden.eps_in
    seen = []
    for _ in range(3):
        lr.run_updates(1)
        seen.append(noise.clone())
    assert not torch.equal(seen[0], seen[1]) and not torch.equal(seen[1], seen[2])
    starts, acting = [], []
    for _ in range(3):
        lr.run_collect(1)
        starts.append(lr.learner.env._fresh_starts.clone())
        acting.append(noise.clone())
    assert not torch.equal(starts[0], starts[1]) and not torch.equal(starts[1], starts[2])
    assert not torch.equal(acting[0], acting[1]) and not torch.equal(acting[1], acting[2])


def test_compile_updates_compiles_an_updates_steps_only(tmp_path):
    """compile = 'updates' (what 'auto' picks for a long run): the update's steps compiled,
    collect graphed but uncompiled; the run still counts as compiled (nothing fell back)."""
    lr = learner(tmp_path, graphs=True, compile="updates")
    lr.run_collect(2 * lr.fast.collect_block)
    lr.run_updates(2 * lr.fast.update_block)
    torch.cuda.synchronize()
    collect = set(Learner.COLLECT_STEPS)
    assert {n for n in Learner.STEPS if getattr(lr, n).compiled} == set(Learner.STEPS) - collect
    assert lr.compiled and lr.captured


def test_compiled_loss_equals_the_plain_one(tmp_path):
    """Same replay, same seed: the compiled pieces of an update (random ops as in eager, side
    streams as in training) give the same sample, noise and loss as the uncompiled code, and the
    same gradients after backward."""
    import torch._inductor.config as inductor_config

    # Full float32 matmuls: under TF32 the staged a* could flip on a near-tie between the runs.
    lr = learner(tmp_path, graphs=False, autocast="off")
    lr.run_collect(8)
    lr.learner.online.train()
    compiled = {name: getattr(lr, name) for name in Learner.STEPS}
    assert all(step.compiled for step in compiled.values())
    results = []
    # What a run changes and the next one reads: the staged a* uses the online noise (which
    # `prime` then redraws) and the draw count sets the IS exponent.
    noise = [buf.clone() for buf in lr.learner.online.noise_buffers()]
    draws = lr.learner.replay.sample_calls.clone()
    with inductor_config.patch(fallback_random=True):
        for steps in ({name: step.fn for name, step in compiled.items()}, compiled):
            for name, step in steps.items():
                setattr(lr, name, step)
            torch._foreach_copy_(lr.learner.online.noise_buffers(), noise)
            lr.learner.replay.sample_calls.copy_(draws)
            torch.cuda.manual_seed(5)
            lr.prime()
            batch = lr.batch
            out = lr.loss(batch)
            lr.learner.online.zero_grad(set_to_none=True)
            out.loss.backward()
            grads = [g.clone() for g in lr.learner.online.gradients()]
            results.append((batch.index.clone(), batch.target.clone(), out.loss.detach(),
                            out.td_abs, grads))
    assert lr.compiled
    (i0, t0, l0, td0, g0), (i1, t1, l1, td1, g1) = results
    assert torch.equal(i0, i1)
    torch.testing.assert_close(t1, t0, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(l1, l0, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(td1, td0, rtol=1e-4, atol=1e-5)
    for a, b in zip(g0, g1, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-5)


def test_side_streams_change_no_result(tmp_path):
    """The update's branches on side streams compute what the same update does in one stream:
    a missing wait between them would show up as a different model or different priorities."""
    runs = []
    for streams in (False, True):
        lr = learner(tmp_path / str(streams), graphs=True, side_streams=streams, autocast="off")
        assert bool(lr.fast.streams.streams) == streams
        lr.run_collect(8)
        lr.run_updates(6)
        torch.cuda.synchronize()
        runs.append(lr)
    one, side = runs
    for (name, a), (_, b) in zip(one.learner.online.state_dict().items(), side.learner.online.state_dict().items()):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4, msg=f"{name} differs")
    torch.testing.assert_close(side.learner.replay.priority_alpha, one.learner.replay.priority_alpha,
                               rtol=1e-3, atol=1e-5)
    torch.testing.assert_close(side.learner.update_acc, one.learner.update_acc, rtol=1e-3, atol=1e-5)


def test_collect_blocks_store_what_single_steps_store(tmp_path):
    """k collect steps per graph replay: same transitions, same metrics, as one step per replay."""
    runs = []
    for block in (1, 4):
        lr = learner(tmp_path / str(block), graphs=True, collect_steps_per_graph=block)
        lr.run_collect(14)  # 3 blocks of 4 and 2 single steps (warm-up, capture, replay)
        lr.run_collect(14)
        torch.cuda.synchronize()
        assert lr.collect_block.captured == (block > 1)
        runs.append(lr)
    one, blocks = runs
    for name in ("bar", "action", "reward", "terminated", "truncated", "next_bar"):
        torch.testing.assert_close(getattr(blocks.learner.replay, name), getattr(one.learner.replay, name),
                                   msg=f"replay.{name} differs")
    assert torch.equal(blocks.learner.replay.cursor, one.learner.replay.cursor)
    assert blocks.learner.read_metrics() == one.learner.read_metrics()


def test_update_blocks_train_as_single_updates(tmp_path):
    """k updates per graph replay: the weights, priorities and metrics of one update per
    replay."""
    runs = []
    for block in (1, 4):
        lr = learner(tmp_path / str(block), graphs=True, updates_per_graph=block)
        torch.cuda.manual_seed(7)
        lr.run_collect(8)
        lr.run_updates(14)  # 3 blocks of 4 (warm-up) and 2 single updates
        lr.run_updates(14)  # capture and replays of the block graph
        torch.cuda.synchronize()
        assert lr.update_block.captured == (block > 1)
        runs.append(lr)
    one, blocks = runs
    for (name, a), (_, b) in zip(one.learner.online.state_dict().items(),
                                 blocks.learner.online.state_dict().items()):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4, msg=f"{name} differs")
    torch.testing.assert_close(blocks.learner.replay.priority_alpha, one.learner.replay.priority_alpha,
                               rtol=1e-3, atol=1e-5)
    torch.testing.assert_close(blocks.learner.update_acc, one.learner.update_acc, rtol=1e-3, atol=1e-5)
    assert blocks.learner.update_acc[-1].item() == one.learner.update_acc[-1].item() == 28


def test_replayed_graphs_keep_the_working_weights_composed(tmp_path):
    """In bf16, after replays of the captured update and collect graphs: a capture that froze a
    stale composition (or missed one) would leave the working copies behind the weights."""
    lr = learner(tmp_path, graphs=True)
    assert lr.learner.online.heads.hidden.weight_work.dtype == torch.bfloat16
    bf16 = 2.0**-7  # one bf16 step: a stale composition (other noise) is far outside it
    for _ in range(3):
        lr.run_collect(2 * lr.fast.collect_block + 4)  # blocks and single steps
        assert_working_weights_are_composed(lr.learner.online, rtol=bf16)
        lr.run_updates(5)
        torch.cuda.synchronize()
        assert_working_weights_are_composed(lr.learner.online, rtol=bf16)
        assert_working_weights_are_composed(lr.learner.target, rtol=bf16)
    assert lr.update.captured and lr.collect_block.captured


def test_the_fused_c51_loss_compiles_and_trains_as_its_torch_reference(tmp_path, monkeypatch):
    """The Triton loss inside the compiled, graphed update (no fall-back to eager) gives the
    weights and priorities that its torch reference (the oracle) gives."""
    from foxhunt.agents.dqn import c51_kernel, losses

    def run(kind: str):
        # Full float32 matmuls: under TF32 a staged a* can flip on a near-tie between the runs.
        lr = learner(tmp_path / kind, graphs=True, autocast="off")
        torch.cuda.manual_seed(7)
        lr.run_collect(8)
        lr.run_updates(6)
        torch.cuda.synchronize()
        return lr

    with monkeypatch.context() as patch:
        patch.setattr(losses, "c51_taken_loss", c51_kernel.c51_taken_loss_reference)
        plain = run("reference")
    fused = run("triton")
    assert fused.compiled and fused.update.captured
    for (name, a), (_, b) in zip(plain.learner.online.state_dict().items(), fused.learner.online.state_dict().items()):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4, msg=f"{name} differs")
    torch.testing.assert_close(fused.learner.replay.priority_alpha, plain.learner.replay.priority_alpha,
                               rtol=1e-3, atol=1e-5)


def test_replayed_graphs_step_the_weight_average(tmp_path):
    """[train] average_epochs on CUDA: the captured update steps the average too, and a whole
    graphed run judges, tests and saves it."""
    market = synth(3_000, 0.3, seed=11)
    spec = tiny_spec(performance={"cuda_graphs": True, "updates_per_graph": 1},
                     average_epochs=2.0)
    trainer = WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), tmp_path, CUDA)
    lr = trainer.start_fold(trainer.folds[0]).steps
    start = flat_params(lr.learner.averaged)
    lr.run_collect(8)
    lr.run_updates(40)
    torch.cuda.synchronize()
    assert lr.update.captured
    averaged, online = flat_params(lr.learner.averaged), flat_params(lr.learner.online)
    assert 0 < (averaged - start).norm() < (online - start).norm()
    result = WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), tmp_path / "run",
                                CUDA).run()
    assert [r["fold"] for r in result.table()] == [0, 1]
