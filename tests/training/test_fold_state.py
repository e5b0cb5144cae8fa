"""Nothing leaks across a fold boundary: fold k+1 starts as if fold k never ran."""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.training.fold_state import FOLD_BOUNDARY, Boundary
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")
STATEFUL = (nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Generator)


def snapshot(ctx) -> dict[str, object]:
    """Every piece of state a fold starts with, as comparable values."""
    lr = ctx.learner
    out = {f"online.{k}": v.clone() for k, v in lr.online.state_dict().items()}
    out |= {f"target.{k}": v.clone() for k, v in lr.target.state_dict().items()}
    out |= {f"averaged.{k}": v.clone() for k, v in lr.averaged.state_dict().items()}
    out |= {f"replay.{i}": t.clone() for i, t in enumerate(lr.replay._tensors())}
    out |= {"env.state": torch.cat([x.float().reshape(-1) for x in lr.env.state()]),
            "generator": lr.generator.get_state(), "features": torch.as_tensor(ctx.features.values),
            "val_market": ctx.val_market.features.clone(), "optimizer": str(lr.optimizer.state_dict())}
    return out


def test_every_stateful_learner_attribute_declares_its_boundary_rule():
    market = synth(3_000, 0.0)
    trainer = WalkForwardTrainer(tiny_spec(average_epochs=0.5), market.bars, pipeline(),
                                 instrument(), "/tmp/unused", CPU)
    ctx = trainer.start_fold(trainer.folds[0])
    stateful = {name for name, v in vars(ctx.learner).items()
                if isinstance(v, STATEFUL) and not name.startswith("_")}
    stateful |= {"replay", "env", "market", "best_state", "normaliser"}
    assert stateful <= set(FOLD_BOUNDARY), stateful - set(FOLD_BOUNDARY)
    assert all(isinstance(rule.boundary, Boundary) and rule.why for rule in FOLD_BOUNDARY.values())


def test_fold_k_plus_1_starts_exactly_as_if_fold_k_never_ran(tmp_path):
    market = synth(3_000, 0.3)
    spec = tiny_spec(average_epochs=0.5)  # the weight average is fold state too
    after = WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), tmp_path / "a", CPU)
    folds = after.folds
    ctx0 = after.start_fold(folds[0])
    after.train_fold(ctx0)
    assert ctx0.learner.transitions > 0
    continued = snapshot(after.start_fold(folds[1]))

    alone = WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), tmp_path / "b", CPU)
    fresh = snapshot(alone.start_fold(folds[1]))
    assert continued.keys() == fresh.keys()
    for key in fresh:
        a, b = continued[key], fresh[key]
        same = torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
        assert same, f"fold 1 inherited state from fold 0 in {key}"


def test_normaliser_sees_only_the_training_window():
    market = synth(3_000, 0.3)
    trainer = WalkForwardTrainer(tiny_spec(), market.bars, pipeline(), instrument(), "/tmp/unused", CPU)
    fold = trainer.folds[0]
    norm = trainer.start_fold(fold).features.normaliser
    assert norm.stop == fold.train.stop


def test_phases_see_no_bar_beyond_their_window():
    market = synth(3_000, 0.3)
    trainer = WalkForwardTrainer(tiny_spec(), market.bars, pipeline(), instrument(), "/tmp/unused", CPU)
    fold = trainer.folds[0]
    ctx = trainer.start_fold(fold)
    # The learner's market is the training window from its first observation on: its last bar
    # is the window's last.
    base, window = trainer.learner_window(fold)
    assert ctx.learner.market.ts[-1] == market.bars.ts[fold.train.stop - 1]
    assert base + len(ctx.learner.market) == fold.train.stop and window.stop == len(ctx.learner.market)
    assert len(ctx.val_market) == fold.val.stop
    assert len(ctx.test_market) == fold.test.stop
