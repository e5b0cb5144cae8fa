"""Issue 33, point 3: budgets from the data. A fold whose `[train] updates_per_fold` is left to
the GPU profile trains `samples_per_bar` gradient samples per bar of its training window, at
most the profile's updates (`TrainConfig.for_fold`); a set `updates_per_fold` is trained as is.
The default keeps each profile's budget on the market it was sized for (30,000 one-minute bars
in 3 folds) and gives the bundled ES sample (2,264 bars) a small one."""

from __future__ import annotations

import pytest
import torch

from foxhunt.cli.train import budget_lines
from foxhunt.config import load_settings
from foxhunt.env.observation import ObservationSpec
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.profiles import shipped_profiles
from foxhunt.training.config import TrainingSpec
from foxhunt.training.walkforward import Fold, WalkForwardSplit, Window

PROFILES = shipped_profiles()
H100 = PROFILES["h100"]


def train_windows(n_bars: int, spec: TrainingSpec) -> list[int]:
    """The training windows' bars of the default walk-forward split of `n_bars` bars, as the
    trainer cuts them (the default features' warm-up first)."""
    first = ObservationSpec.of(spec.env, FeaturePipeline(FeatureConfig())).first_decision()
    split = WalkForwardSplit(spec.walkforward, n_bars, first=first,
                             min_window=spec.train.eval_windows + 1)
    return [len(f.train) for f in split.folds()]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_30000_bars_in_3_folds_keep_every_profiles_budget(name):
    spec = TrainingSpec().sized_for(PROFILES[name])
    windows = train_windows(30_000, spec)
    assert windows == [12_582] * 3  # 30,000 - 512 warm-up - 2 purges of 64: 7 tests of 4,194
    for bars in windows:
        train, why = spec.train.for_fold(bars)
        assert train.updates_per_fold == PROFILES[name].updates_per_fold
        assert train.budget().total_updates == PROFILES[name].updates_per_fold
        assert f"updates_per_fold = {PROFILES[name].updates_per_fold:,}, the cap" in why


def test_the_bundled_samples_folds_train_for_their_700_bars():
    """2,264 bars: 696-bar training windows train 10,240 x 696 / 512 = 13,920 updates on an H100
    (an 18th of its 250,000), in 20 epochs of 696; the CPU's 8,000 stay under the data's."""
    spec = TrainingSpec().sized_for(H100)
    windows = train_windows(2_264, spec)
    assert windows == [696] * 3
    train, why = spec.train.for_fold(696)
    assert train.budget().updates == (696,) * 20
    assert why == ("updates_per_fold = 13,920 = 10,240 samples per training bar x 696 bars / "
                   "batch 512 (20 epochs of 696; under the cap of 250,000)")
    cpu = TrainingSpec().sized_for(PROFILES["default"]).train.for_fold(696)[0]
    assert cpu.updates_per_fold == 8_000


@pytest.mark.parametrize("bars", [1, 50, 696, 5_000, 12_500, 100_000])
def test_an_unset_budget_is_the_datas_at_most_the_profiles(bars):
    train = TrainingSpec().sized_for(H100).train
    updates = train.for_fold(bars)[0].updates_per_fold
    per_epoch = -(-10_240 * bars // (512 * 20))
    assert updates == min(250_000, 20 * per_epoch) and updates >= 20


def test_a_set_budget_is_never_resized(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[train]\nupdates_per_fold = 7\n")
    from_file = load_settings(config).settings.training_spec()
    from_cli = TrainingSpec().with_overrides({"train": {"updates_per_fold": 7}}, "command line")
    for spec in (from_file, from_cli):
        for profile in PROFILES.values():
            train = spec.sized_for(profile).train
            for bars in (10, 696, 12_582, 1_000_000):
                assert train.for_fold(bars) == (train, "updates_per_fold = 7 (set: used as is)")


def test_the_rule_survives_the_runs_spec_json():
    """spec.json (and a checkpoint's spec) hold both keys: read back, a profile's budget is still
    a cap and a set one still as is."""
    for spec in (TrainingSpec().sized_for(H100),
                 TrainingSpec().with_overrides({"train": {"updates_per_fold": 7}}, "cli")
                 .sized_for(H100)):
        again = TrainingSpec(**spec.model_dump(mode="json"))
        assert again.train.for_fold(696) == spec.train.for_fold(696)


def test_samples_per_bar_set_with_updates_per_fold_makes_it_the_cap():
    spec = TrainingSpec().with_overrides({"train": {"samples_per_bar": 512, "batch_size": 512,
                                                    "updates_per_fold": 1_000}}, "test")
    assert spec.sized_for(H100).train.for_fold(696)[0].updates_per_fold == 700  # 35 x 20
    assert spec.sized_for(H100).train.for_fold(5_000)[0].updates_per_fold == 1_000


def test_the_folds_config_carries_its_budget_to_the_weight_average():
    """`average_rate` spans `average_epochs` of the fold's own epochs, not the cap's."""
    train, _ = TrainingSpec().sized_for(H100).train.for_fold(696)
    assert train.average_rate() == 20 / (0.5 * 13_920)
    assert train.for_fold(10)[0] == train  # a fold's config is final


def test_the_header_says_each_distinct_budget_once():
    train = TrainingSpec().sized_for(H100).train
    folds = [Fold(i, Window(0, bars), Window(0, 1), Window(0, 1))
             for i, bars in enumerate((696, 696, 20_000))]
    assert budget_lines(train, folds) == [
        f"budget: folds 0, 1: {train.for_fold(696)[1]}",
        ("budget: fold 2: updates_per_fold = 250,000, the cap (10,240 samples per training bar "
         "x 20,000 bars / batch 512 would be 400,000)")]


def test_auto_compiles_the_updates_of_a_run_whose_updates_pay_for_it():
    """Compiling an update's steps costs about 30 s cold and saves about 1 ms an update (an
    H100): a run of 40,000 updates or more compiles them (the bundled sample's 3 x 13,920), a
    shorter one runs graphed but uncompiled. Collect steps and the validation rollout, a few
    per cent of a run's wall, are compiled only when asked (compile = true): their ~20 s of
    compiling never paid. A set value is kept."""
    perf = TrainingSpec().train.performance
    assert perf.compile == "auto"
    on, why = perf.resolved(3 * 13_920)
    assert on.compile == "updates" and why.startswith(
        "compile the updates: the run trains 41,760 updates")
    assert on.compiles_updates and not on.compiles_everything
    off, why = perf.resolved(3 * 10_000)
    assert off.compile is False and why.startswith("compile off: the run trains 30,000 updates")
    assert not off.compiles_updates and not off.compiles_everything
    forced = perf.model_copy(update={"compile": True})
    assert forced.resolved(10) == (forced, "compile = true (set)")
    assert forced.compiles_updates and forced.compiles_everything
    with pytest.raises(ValueError, match="compile"):
        type(perf).model_validate({"compile": "collect"})


def test_the_trainer_decides_compile_from_its_folds_budgets(tmp_path):
    """The resolved value is what the run records (spec.json) and what each fold trains with."""
    from foxhunt.training.trainer import WalkForwardTrainer

    from .builders import instrument, pipeline, synth

    spec = TrainingSpec().sized_for(H100).with_overrides(
        {"train": {"performance": {"compile_min_updates": 50_000}}}, "test")
    trainer = WalkForwardTrainer(spec, synth(2_264, 0.3, seed=1).bars, pipeline(), instrument(),
                                 tmp_path, torch.device("cpu"))
    run_updates = sum(b.total_updates for b in trainer.budgets.values())
    assert run_updates < 50_000
    assert trainer.spec.train.performance.compile is False
    assert all(t.performance.compile is False for t in trainer.fold_train.values())
    assert f"the run trains {run_updates:,} updates" in trainer.compile_reason
