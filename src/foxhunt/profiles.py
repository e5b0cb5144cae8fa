"""GPU profiles, picked by CUDA device name or FOXHUNT_GPU_PROFILE: each fills the keys of `SIZED`
that the config and the command line leave unset (`TrainingSpec.sized_for`) with its sizes and
training budget, for the reasons given there; the values per profile: docs/training.md."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import Field

from foxhunt.configbase import StrictConfig, read_toml, validate_config
from foxhunt.errors import ConfigError

PROFILE_ENV = "FOXHUNT_GPU_PROFILE"

SIZED = {
    "hidden": ("agent.hidden", "the network's width: what the device trains in minutes"),
    "atoms": ("agent.atoms", "C51 atoms: a finer return distribution where the device affords it"),
    "replay_capacity": ("replay.capacity", "the replay's size: what the device's memory holds"),
    "batch_size": ("train.batch_size", "samples an update: what fills the device"),
    "n_envs": ("train.n_envs", "envs collecting in lock-step: what fills the device"),
    "episode_len": ("env.episode_len", "bars an episode: longer where many envs collect at once"),
    "updates_per_fold": ("train.updates_per_fold", "the most updates a fold trains: minutes of the device"),
    "epochs": ("train.epochs", "validation rounds a fold: enough updates between them to move"),
}


class GpuProfile(StrictConfig):
    name: str
    match: list[str] = Field(default_factory=list, description="substrings of the CUDA device name")
    batch_size: int = Field(gt=0)
    atoms: Literal[11, 21, 51]
    replay_capacity: int = Field(gt=0)
    hidden: int = Field(gt=0)
    n_envs: int = Field(gt=0)
    episode_len: int = Field(gt=1)
    updates_per_fold: int = Field(gt=0)
    epochs: int = Field(default=20, gt=0, description="validation rounds a fold (a profile file "
                        "from before 2026-12-07 has none: 20)")


@dataclass(frozen=True)
class ProfileChoice:
    profile: GpuProfile
    reason: str

    def describe(self, fills: dict[str, object]) -> str:
        """A line per key the profile filled (`TrainingSpec.profile_fills`): value and why."""
        why = dict(SIZED.values())
        return "\n".join([f"profile {self.profile.name}: [{key.replace('.', '] ', 1)} = {value} "
                          f"(unset; {why[key]})" for key, value in fills.items()] or [
            f"profile {self.profile.name}: fills nothing (the config sets every key it sizes)"])


def shipped_profiles() -> dict[str, GpuProfile]:
    out = {}
    for entry in resources.files("foxhunt.resources").joinpath("profiles").iterdir():
        if entry.name.endswith(".toml"):
            with resources.as_file(entry) as path:
                prof = load_profile_file(path)
            out[prof.name] = prof
    return out


def load_profile_file(path: Path) -> GpuProfile:
    data = read_toml(path)
    data.setdefault("name", path.stem)
    return validate_config(GpuProfile, data, str(path))


def cuda_device_name() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - a broken CUDA install must not stop CPU work
        return None
    return None


def choose_profile(
    override: str | None = None, device_name: str | None = None, *, detect: bool = True
) -> ProfileChoice:
    """`override` (a name or a TOML path) > $FOXHUNT_GPU_PROFILE > device-name match > default."""
    profiles = shipped_profiles()
    source = "--profile"
    if override is None and os.environ.get(PROFILE_ENV):
        override, source = os.environ[PROFILE_ENV], PROFILE_ENV
    if override:
        if override in profiles:
            return ProfileChoice(profiles[override], f"{source}={override}")
        path = Path(override)
        if path.suffix == ".toml" or path.exists():
            return ProfileChoice(load_profile_file(path), f"{source}={override} (file)")
        raise ConfigError(
            f"{source}: unknown GPU profile {override!r}; known: {', '.join(sorted(profiles))} "
            "or a path to a .toml file"
        )
    if device_name is None and detect:
        device_name = cuda_device_name()
    if device_name is None:
        return ProfileChoice(profiles["default"], "no CUDA device")
    for prof in sorted(profiles.values(), key=lambda p: p.name):
        if any(m.lower() in device_name.lower() for m in prof.match):
            return ProfileChoice(prof, f"CUDA device {device_name!r} matches {prof.name!r}")
    return ProfileChoice(profiles["default"], f"CUDA device {device_name!r} matches no profile")
