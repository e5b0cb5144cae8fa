"""GPU profiles: chosen by device name, overridden by name or file, `default` without CUDA."""

from __future__ import annotations

import pytest

from foxhunt.errors import ConfigError
from foxhunt.profiles import choose_profile, shipped_profiles


def test_all_named_profiles_ship():
    assert {"default", "rtx3050", "a100", "h100", "h200"} <= set(shipped_profiles())


@pytest.mark.parametrize(
    "device, expected",
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA GeForce RTX 3050 Laptop GPU", "rtx3050"),
        ("Some Future GPU", "default"),
    ],
)
def test_chosen_by_device_name(device, expected):
    choice = choose_profile(device_name=device)
    assert choice.profile.name == expected
    assert device in choice.reason


def test_no_cuda_means_default():
    choice = choose_profile(device_name=None, detect=False)
    assert choice.profile.name == "default" and choice.reason == "no CUDA device"


def test_env_var_overrides_device(monkeypatch):
    monkeypatch.setenv("FOXHUNT_GPU_PROFILE", "a100")
    choice = choose_profile(device_name="NVIDIA H200")
    assert choice.profile.name == "a100" and "FOXHUNT_GPU_PROFILE" in choice.reason


def test_override_by_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text("batch_size = 64\natoms = 21\nreplay_capacity = 1000\nhidden = 32\nn_envs = 8\n"
                 "episode_len = 50\nupdates_per_fold = 500\n")
    choice = choose_profile(str(f))
    assert choice.profile.name == "mine" and choice.profile.atoms == 21
    assert choice.profile.updates_per_fold == 500


def test_a_profile_file_without_a_budget_says_which_key_is_missing(tmp_path):
    f = tmp_path / "old.toml"
    f.write_text("batch_size = 64\natoms = 21\nreplay_capacity = 1000\nhidden = 32\nn_envs = 8\n"
                 "episode_len = 50\n")
    with pytest.raises(ConfigError, match=r"old\.toml: missing key 'updates_per_fold'"):
        choose_profile(str(f))


def test_bad_profiles_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown GPU profile 'h300'.*known: a100"):
        choose_profile("h300")
    f = tmp_path / "bad.toml"
    f.write_text("batch_size = 64\natoms = 7\nreplay_capacity = 1000\nhidden = 32\nn_envs = 8\n"
                 "episode_len = 50\nupdates_per_fold = 500\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: key 'atoms'"):
        choose_profile(str(f))


def test_profiles_hold_what_the_trainer_needs():
    for prof in shipped_profiles().values():
        assert prof.atoms in (11, 21, 51)
        assert prof.batch_size > 0 and prof.replay_capacity >= prof.batch_size
        assert prof.hidden > 0 and prof.n_envs > 0 and prof.episode_len > 1


def test_fast_gpus_train_at_least_250k_updates_a_fold_and_the_cpu_trains_what_learns():
    """The fold's update budget follows the device: an H100 or H200 does 250,000 updates in
    about a minute; the CPU trains the 8,000 (20 epochs x 400) that its column of the learning
    table measured (1,280 did not learn); the cards between sit in order of speed."""
    budget = {name: prof.updates_per_fold for name, prof in shipped_profiles().items()}
    assert budget["h200"] >= 250_000 and budget["h100"] >= 250_000
    assert budget["default"] == 8_000
    assert budget["default"] < budget["rtx3050"] < budget["a100"] <= budget["h100"]
