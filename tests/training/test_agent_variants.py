"""Every agent variant the config offers trains end to end through the learner: its loss is
finite, its weights move, and its noisy layers' working weights stay composed."""

from __future__ import annotations

import math

import pytest
import torch

from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec
from .test_pipelined_update import assert_working_weights_are_composed

VARIANTS = {
    "defaults": {},
    "no_noise": {"noisy": False},
    "noisy_trunk": {"noisy_trunk": True},
    "no_dueling": {"dueling": False},
    "variable_selection": {"variable_selection": True},
    "iqn": {"head": "iqn"},
    "iqn_noisy_trunk_no_dueling": {"head": "iqn", "noisy_trunk": True, "dueling": False},
}


@pytest.mark.parametrize("agent", VARIANTS.values(), ids=VARIANTS.keys())
def test_the_variant_trains_end_to_end(tmp_path, agent):
    spec = tiny_spec()
    spec = spec.model_copy(update={"agent": spec.agent.model_copy(update=agent)})
    trainer = WalkForwardTrainer(spec, synth(3_000, 0.3, seed=11).bars, pipeline(), instrument(),
                                 tmp_path, torch.device("cpu"))
    ctx = trainer.start_fold(trainer.folds[0])
    lr = ctx.learner
    before = {k: v.clone() for k, v in lr.online.state_dict().items()}
    ctx.steps.run_collect(8)
    ctx.steps.run_updates(4)
    metrics = lr.read_metrics().update
    assert metrics["updates"] == 4
    assert all(math.isfinite(metrics[k]) for k in ("loss", "q_loss", "aux_loss", "grad_norm"))
    assert metrics["grad_norm"] > 0
    moved = [k for k, v in lr.online.state_dict().items() if not torch.equal(v, before[k])]
    assert len(moved) == len(list(lr.online.parameters()))  # every parameter took a step
    for net in (lr.online, lr.target):
        assert_working_weights_are_composed(net)
    assert bool(lr.online.noisy_layers()) == (agent.get("noisy", True) or
                                              agent.get("noisy_trunk", False))
