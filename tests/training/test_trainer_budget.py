"""A fold's training budget: `[train] updates_per_fold` gradient updates (the GPU profile's unless
set) and the env transitions `replay_ratio` asks for, split evenly over `epochs` validation
rounds; the keys of the old per-epoch budget are errors that name their replacement."""

from __future__ import annotations

import json

import pytest
import torch

from foxhunt.config import load_settings
from foxhunt.errors import ConfigError
from foxhunt.profiles import shipped_profiles
from foxhunt.training.config import TrainConfig, TrainingSpec, fold_budget
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")


def test_the_cpu_profile_trains_8000_updates_a_fold():
    """8 epochs of 1,000 updates of 128 and 500 collect steps of 64 envs: 4 samples per
    transition."""
    budget = TrainingSpec().sized_for(shipped_profiles()["default"]).train.budget()
    assert budget.updates == (1_000,) * 8 and budget.collect_steps == (500,) * 8
    assert budget.total_updates == 8_000 and budget.transitions == 8 * 500 * 64
    assert budget.replay_ratio == 4.0


def test_the_h200_profile_trains_250k_updates_a_fold_on_32m_transitions():
    budget = TrainingSpec().sized_for(shipped_profiles()["h200"]).train.budget()
    assert budget.updates == (12_500,) * 20 and budget.total_updates == 250_000
    # 12,500 x 512 / 4 = 1.6M transitions an epoch: 195.3 steps of 8192 envs, in whole steps
    # that keep the running total at the ratio.
    assert set(budget.collect_steps) == {195, 196}
    assert sum(budget.collect_steps) == -(-250_000 * 512 // (4 * 8192)) == 3_907
    assert budget.replay_ratio == pytest.approx(4.0, rel=1e-3)


def test_updates_spread_evenly_over_the_epochs_and_collects_follow_the_ratio():
    budget = fold_budget(updates=10, epochs=4, batch_size=32, n_envs=16, replay_ratio=2.0)
    assert budget.updates == (2, 3, 2, 3) and budget.total_updates == 10
    # After each epoch: ceil(updates so far x 32 / 2) transitions, in steps of 16 envs; the
    # first epoch at least one batch (32 transitions).
    assert budget.collect_steps == (2, 3, 2, 3)
    assert budget.transitions == 10 * 32 / 2.0


def test_the_first_epoch_collects_what_the_first_update_needs_and_every_epoch_collects():
    warm = fold_budget(updates=40, epochs=4, batch_size=32, n_envs=16, replay_ratio=8.0,
                       learning_starts=500)
    assert warm.collect_steps[0] == 32  # ceil(500 / 16), not the ratio's 10 x 32 / 8 / 16 = 2.5
    assert warm.collect_steps[1:] == (1, 1, 1)  # the ratio is met already; one step each
    sparse = fold_budget(updates=2, epochs=4, batch_size=32, n_envs=16, replay_ratio=100.0)
    assert sparse.updates == (0, 1, 0, 1) and min(sparse.collect_steps) == 1


def test_the_budget_is_the_profiles_unless_set():
    h200 = shipped_profiles()["h200"]
    assert TrainingSpec().sized_for(h200).train.updates_per_fold == h200.updates_per_fold
    mine = TrainingSpec().with_overrides({"train": {"updates_per_fold": 7}}, "test")
    assert mine.sized_for(h200).train.updates_per_fold == 7


def test_an_unsized_spec_says_what_is_missing():
    with pytest.raises(ConfigError, match=r"\[train\] updates_per_fold, batch_size, n_envs unset"):
        TrainConfig().budget()


@pytest.mark.parametrize("key, replacement", [
    ("updates_per_epoch", "[train] updates_per_fold (gradient updates per fold"),
    ("collect_steps", "[train] replay_ratio (gradient samples per collected transition"),
])
def test_the_old_budget_keys_are_one_line_errors_naming_their_replacement(tmp_path, key,
                                                                          replacement):
    config = tmp_path / "old.toml"
    config.write_text(f"[train]\nepochs = 20\n{key} = 32\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    assert "\n" not in message and str(config) in message
    assert f"'{key}' was replaced by {replacement}" in message
    assert "docs/training.md" in message
    with pytest.raises(ConfigError, match=f"'{key}' was replaced by"):
        TrainingSpec().with_overrides({"train": {key: 32}}, "command-line options")


@pytest.mark.parametrize("key, told", [
    ("cuda_graphs", "'cuda_graphs' moved to [train.performance] (as 'cuda_graphs'; see docs"),
    ("matmul_precision", "'matmul_precision' moved to [train.performance] (as 'autocast'"),
    ("twin_target_pass", "'twin_target_pass' was removed: it was never faster and is gone"),
])
def test_keys_moved_or_removed_by_the_learning_core_are_one_line_errors(key, told):
    with pytest.raises(ConfigError) as err:
        TrainingSpec().with_overrides({"train": {key: True}}, "test")
    assert "\n" not in str(err.value) and told in str(err.value)


def test_a_run_trains_exactly_its_budget(tmp_path):
    """7 updates over 3 epochs: 2, 2 and 3 updates, each epoch's collect steps as scheduled
    (run.jsonl counts both)."""
    spec = tiny_spec(epochs=3, folds=1, updates_per_fold=7)
    trainer = WalkForwardTrainer(spec, synth(3_000, 0.3, seed=11).bars, pipeline(), instrument(),
                                 tmp_path, CPU)
    assert trainer.budgets[0].updates == (2, 2, 3)
    trainer.run()
    lines = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [x["updates"] for x in lines] == [2, 2, 3]
    assert [x["env_steps"] for x in lines] == [s * 16 for s in trainer.budgets[0].collect_steps]


def test_each_fold_trains_the_budget_of_its_own_training_window(tmp_path):
    """Anchored folds grow their training windows: with the budget from the data
    (`samples_per_bar`, capped by `updates_per_fold`) each trains its own `for_fold` budget, and
    its learner's weight average spans epochs of that budget."""
    spec = tiny_spec(epochs=2, folds=2, updates_per_fold=1_000, samples_per_bar=2,
                     average_epochs=0.5)
    spec = spec.with_overrides({"walkforward": {"anchored": True}}, "test")
    trainer = WalkForwardTrainer(spec, synth(3_000, 0.3, seed=11).bars, pipeline(), instrument(),
                                 tmp_path, CPU)
    wanted = {f.index: spec.train.for_fold(len(f.train))[0].updates_per_fold for f in trainer.folds}
    assert wanted[0] < wanted[1] < 1_000
    learners = []
    trainer.on_epoch = lambda line: None
    start_fold = trainer.start_fold
    trainer.start_fold = lambda fold: learners.append(start_fold(fold)) or learners[-1]
    trainer.run()
    lines = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text().splitlines()]
    for fold, updates in wanted.items():
        assert sum(x["updates"] for x in lines if x["fold"] == fold) == updates
        assert learners[fold].learner.spec.train.average_rate() == 2 / (0.5 * updates)
