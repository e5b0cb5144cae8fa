"""Every compiled step of the learner traces as one whole graph through dynamo and AOTAutograd.

On CUDA a graph break or an input-aliasing problem would not fail: the step would run in pieces
(more kernels, less fusion) or with extra copies, and show only as a slower update. Here each
step goes through `torch.compile(fullgraph=True)` with the `aot_eager` backend (dynamo's capture
and AOTAutograd's functionalisation, without code generation), so such a problem fails on the
CPU, in seconds, before a GPU session."""

from __future__ import annotations

import math

import pytest
import torch

from foxhunt.training.compiled import CompiledSteps
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec


def whole_graph(fn, dynamic, **options):
    return torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=dynamic)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a failed compile falls back with a warning
@pytest.mark.parametrize("support", ["fixed", "adaptive"])
def test_every_compiled_step_traces_as_one_graph(tmp_path, support):
    torch._dynamo.reset()
    spec = tiny_spec()
    spec = spec.model_copy(update={"agent": spec.agent.model_copy(update={"support": support})})
    trainer = WalkForwardTrainer(spec, synth(3_000, 0.3, seed=11).bars, pipeline(),
                                 instrument(), tmp_path, torch.device("cpu"))
    lr = trainer.start_fold(trainer.folds[0]).learner
    # As on CUDA, where the steps draw from the device's default generator.
    lr.generator = lr.replay.generator = lr.env.generator = None
    steps = CompiledSteps(lr, compiler=whole_graph)
    steps.run_collect(16)
    steps.run_updates(3)
    assert steps.compiled
    metrics = lr.read_metrics().update
    assert metrics["updates"] == 3 and all(math.isfinite(v) for v in metrics.values())
