"""Issue 32, point 8: a GPU profile fills only the keys of `profiles.SIZED` that the config and
the command line leave unset, and says which it filled and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from foxhunt.profiles import SIZED, ProfileChoice, choose_profile, shipped_profiles
from foxhunt.training.config import TrainingSpec

H200 = shipped_profiles()["h200"]
ALL_SET = {"agent": {"hidden": 32, "atoms": 21}, "replay": {"capacity": 4096},
           "env": {"episode_len": 64}, "train": {"batch_size": 16, "n_envs": 8,
                                                 "updates_per_fold": 10, "epochs": 2}}


def value(spec: TrainingSpec, key: str):
    section, name = key.split(".")
    return getattr(getattr(spec, section), name)


def test_an_unset_spec_takes_every_sized_value_of_the_profile():
    spec = TrainingSpec()
    fills = spec.profile_fills(H200)
    assert fills == {key: getattr(H200, field) for field, (key, _) in SIZED.items()}
    sized = spec.sized_for(H200)
    for key, filled in fills.items():
        assert value(sized, key) == filled
    assert (sized.agent.hidden, sized.agent.atoms) == (512, 51)


@pytest.mark.parametrize("key", [key for key, _ in SIZED.values()])
def test_a_set_value_is_never_overridden_and_only_the_unset_ones_fill(key):
    section, name = key.split(".")
    mine = {field: 7 for field in ("hidden", "capacity", "batch_size", "n_envs", "episode_len",
                                   "updates_per_fold", "epochs")}
    spec = TrainingSpec().with_overrides({section: {name: mine.get(name, 21)}}, "test")
    fills = spec.profile_fills(H200)
    assert key not in fills and len(fills) == len(SIZED) - 1
    for profile in shipped_profiles().values():
        assert value(spec.sized_for(profile), key) == mine.get(name, 21)


def test_a_fully_set_spec_takes_nothing_and_says_so():
    spec = TrainingSpec().with_overrides(ALL_SET, "test")
    assert spec.profile_fills(H200) == {}
    assert spec.sized_for(H200) == spec
    assert ProfileChoice(H200, "test").describe({}) == (
        "profile h200: fills nothing (the config sets every key it sizes)")


def test_the_block_names_exactly_the_filled_keys_with_value_and_why():
    spec = TrainingSpec().with_overrides({k: v for k, v in ALL_SET.items() if k != "agent"},
                                         "test")
    choice = choose_profile("h100")
    lines = choice.describe(spec.profile_fills(choice.profile)).splitlines()
    why = dict(SIZED.values())
    assert lines == [f"profile h100: [agent] hidden = 512 (unset; {why['agent.hidden']})",
                     f"profile h100: [agent] atoms = 51 (unset; {why['agent.atoms']})"]


def test_the_cpu_profile_sizes_a_small_network():
    choice = choose_profile(device_name=None, detect=False)
    sized = TrainingSpec().sized_for(choice.profile)
    assert choice.profile.name == "default"
    assert (sized.agent.hidden, sized.agent.atoms, sized.train.updates_per_fold) == (128, 11, 8_000)


def test_the_table_covers_every_profile_size_and_names_real_keys():
    assert set(SIZED) == set(type(H200).model_fields) - {"name", "match"}
    spec = TrainingSpec()
    for key, why in SIZED.values():
        section, name = key.split(".")
        assert name in type(getattr(spec, section)).model_fields and why


def test_the_docs_table_gives_each_shipped_profiles_values():
    docs = (Path(__file__).parents[2] / "docs" / "training.md").read_text().splitlines()
    profiles = shipped_profiles()
    for field, (key, _) in SIZED.items():
        section, name = key.split(".")
        row = next(line for line in docs if line.startswith(f"| `[{section}] {name}` |"))
        cells = [cell.strip().replace(",", "") for cell in row.split("|")[2:7]]
        assert cells == [str(getattr(profiles[p], field))
                         for p in ("default", "rtx3050", "a100", "h100", "h200")], key
