"""Checkpoints round-trip; a layout mismatch, and every file `load_policy` cannot use, is one
clear line naming the file and the difference."""

from __future__ import annotations

import pytest
import torch

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.env.observation import POS_STATE, ObservationSpec
from foxhunt.errors import CheckpointError
from foxhunt.features import FeaturePipeline
from foxhunt.training import checkpoint
from foxhunt.training.checkpoint import load_checkpoint, load_policy, save_checkpoint

from ..backtest.builders import instrument, synth, write_checkpoint

load = torch.load


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
    ({"atoms": 21}, "atoms 11 vs 21"),
    ({"hidden": 64}, "hidden 32 vs 64"),
    ({"obs": 24}, "obs_dim 20 vs 24"),
])
def test_layout_mismatch_names_the_difference(tmp_path, other, needle):
    path = save_checkpoint(tmp_path / "c.pt", net(), {}, {})
    with pytest.raises(CheckpointError, match="does not fit this network") as info:
        load_checkpoint(path, net(**other))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_load_policy_reads_the_file_once_and_returns_what_it_holds(tmp_path, monkeypatch):
    bars, inst = synth(2000).bars, instrument()
    path = write_checkpoint(tmp_path / "fold0.pt", bars, inst)
    reads = []
    monkeypatch.setattr(checkpoint.torch, "load", lambda *a, **k: reads.append(a) or load(*a, **k))
    policy = load_policy(path)
    assert len(reads) == 1
    saved = load(path, weights_only=True)
    assert policy.spec.env.window == 4 and policy.metadata["fold"] == 0
    assert policy.observation == ObservationSpec.of(policy.spec.env, FeaturePipeline())
    assert policy.observation.size == 4 * policy.observation.n_features + len(POS_STATE)
    assert not policy.network.training
    for k, v in policy.network.state_dict().items():
        assert torch.equal(v, saved["state_dict"][k]), k


def _cut(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage, needle", [
    (lambda p: p.unlink(), "no such checkpoint"),
    (lambda p: p.write_bytes(b"not a checkpoint" * 100), "not a readable checkpoint"),
    (_cut, "truncated or damaged"),
    (lambda p: torch.save({"weights": torch.zeros(3)}, p), "not a foxhunt checkpoint"),
    (lambda p: torch.save({"format": "foxhunt-checkpoint/0", "foxhunt": "0.1"}, p),
     "layout foxhunt-checkpoint/0 (foxhunt 0.1)"),
    (lambda p: save_checkpoint(p, net(), {}, {}), "no usable training spec, feature names"),
    (lambda p: save_checkpoint(p, net(), {"train": {"epochs": 0}}, {}), "train.epochs"),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path, damage, needle):
    path = save_checkpoint(tmp_path / "fold0.pt", net(), {}, {})
    damage(path)
    with pytest.raises(CheckpointError) as info:
        load_policy(path)
    message = str(info.value)
    assert needle in message and str(path) in message and "\n" not in message
