"""Checkpoints round-trip, and a layout mismatch is one clear line naming the difference."""

from __future__ import annotations

import pytest
import torch

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.errors import CheckpointError
from foxhunt.training.checkpoint import load_checkpoint, save_checkpoint


def net(atoms=11, hidden=32, obs=20):
    torch.manual_seed(0)
    return BranchingQNetwork(obs, AgentConfig(hidden=hidden, atoms=atoms))


def test_round_trip_restores_weights_and_metadata(tmp_path):
    a = net()
    path = save_checkpoint(tmp_path / "c.pt", a, {"agent": {"atoms": 11}}, {"fold": 3})
    b = BranchingQNetwork(20, AgentConfig(hidden=32, atoms=11))
    payload = load_checkpoint(path, b)
    assert payload["extra"]["fold"] == 3 and payload["spec"]["agent"]["atoms"] == 11
    for (k, v), (_, w) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(v, w), k
    assert not (tmp_path / ".c.pt.tmp").exists()


@pytest.mark.parametrize("other, needle", [
    (dict(atoms=21), "atoms 11 vs 21"),
    (dict(hidden=64), "hidden 32 vs 64"),
    (dict(obs=24), "obs_dim 20 vs 24"),
])
def test_layout_mismatch_names_the_difference(tmp_path, other, needle):
    path = save_checkpoint(tmp_path / "c.pt", net(), {}, {})
    with pytest.raises(CheckpointError, match="does not fit this network") as info:
        load_checkpoint(path, net(**other))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "nope.pt", net())
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(bad, net())
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a foxhunt checkpoint"):
        load_checkpoint(tmp_path / "other.pt", net())
