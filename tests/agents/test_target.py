"""Polyak target updates and layout fingerprints for checkpoint compatibility."""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.agents.dqn.layout import describe_layout_diff, layout_description, layout_fingerprint
from foxhunt.agents.dqn.target import PolyakUpdate


def pair(**kw):
    torch.manual_seed(0)
    a = BranchingQNetwork(10, AgentConfig(hidden=16, **kw))
    torch.manual_seed(1)
    b = BranchingQNetwork(10, AgentConfig(hidden=16, **kw))
    return a, b


def states_equal(x: nn.Module, y: nn.Module) -> bool:
    return all(torch.equal(t, y.state_dict()[k]) for k, t in x.state_dict().items())


def test_tau_one_copies_and_tau_zero_keeps():
    target, online = pair()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    PolyakUpdate(target, online, 0.0)()
    assert all(torch.equal(v, target.state_dict()[k]) for k, v in before.items())
    PolyakUpdate(target, online, 1.0)()
    assert states_equal(target, online)


def test_tau_blends_parameters_and_float_buffers_and_copies_integer_buffers():
    class WithBuffers(nn.Module):
        def __init__(self, seed):
            super().__init__()
            torch.manual_seed(seed)
            self.lin = nn.Linear(3, 2)
            self.register_buffer("stat", torch.randn(4))
            self.register_buffer("count", torch.tensor(seed))

    target, online = WithBuffers(0), WithBuffers(5)
    w0, s0 = target.lin.weight.detach().clone(), target.stat.clone()
    PolyakUpdate(target, online, 0.25)()
    torch.testing.assert_close(
        target.lin.weight.detach(), w0 + 0.25 * (online.lin.weight.detach() - w0)
    )
    torch.testing.assert_close(target.stat, s0 + 0.25 * (online.stat - s0))
    assert target.count.item() == 5


def test_fingerprint_is_stable_for_one_layout_and_ignores_values():
    a, b = pair()
    assert layout_fingerprint(a) == layout_fingerprint(b)
    assert describe_layout_diff(a, b) == ""


def test_fingerprint_changes_with_layout():
    base = layout_fingerprint(pair()[0])
    for change in [
        {"hidden": 32},
        {"atoms": 21},
        {"head": "iqn"},
        {"v_max": 20.0},
        {"dueling": False},
    ]:
        kw = {"hidden": 16, **change}
        net = BranchingQNetwork(10, AgentConfig(**kw))
        assert layout_fingerprint(net) != base, change
    assert layout_fingerprint(BranchingQNetwork(11, AgentConfig(hidden=16))) != base


def test_describe_diff_names_the_parameter_and_the_settings():
    old = BranchingQNetwork(10, AgentConfig(hidden=16, atoms=51))
    new = BranchingQNetwork(10, AgentConfig(hidden=16, atoms=21))
    msg = describe_layout_diff(layout_description(old), new)
    assert "parameter 'heads.advantage.weight_mu' is (3, 153, 16) float32 in the checkpoint" in msg
    assert "but (3, 63, 16) float32 in the model" in msg
    assert "atoms 51 vs 21" in msg


def test_describe_diff_names_a_missing_parameter():
    a = BranchingQNetwork(10, AgentConfig(hidden=16))
    b = BranchingQNetwork(10, AgentConfig(hidden=16, noisy=False))
    assert (
        "parameter 'heads.hidden.weight_sigma' is (4, 16, 16) float32 in the checkpoint but absent"
        in (describe_layout_diff(a, b))
    )
