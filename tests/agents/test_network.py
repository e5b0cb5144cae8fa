"""Branching network: shapes, per-branch centring, greedy acting, IQN head, variable selection."""

from __future__ import annotations

import pydantic
import pytest
import torch

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.agents.dqn.network import VariableSelection
from foxhunt.errors import ConfigError

OBS = 12


def make(seed: int = 0, obs_dim: int = OBS, **kw) -> BranchingQNetwork:
    torch.manual_seed(seed)
    return BranchingQNetwork(obs_dim, AgentConfig(hidden=32, **kw))


@pytest.mark.parametrize("atoms", [11, 21, 51])
def test_c51_shapes_and_normalised_distributions(atoms):
    net = make(atoms=atoms)
    obs = torch.randn(7, OBS)
    out = net(obs)
    assert out.log_probs.shape == (7, 3, 3, atoms) and out.aux_logits.shape == (7, 2)
    torch.testing.assert_close(out.log_probs.exp().sum(-1), torch.ones(7, 3, 3))
    assert net.q_values(obs).shape == (7, 3, 3)
    action = net.act(obs)
    assert action.shape == (7, 3) and action.dtype == torch.long


def test_q_values_are_expectations_over_the_support():
    net = make().eval()
    obs = torch.randn(4, OBS)
    expected = (net(obs).log_probs.exp() * torch.linspace(-10, 10, 51)).sum(-1)
    torch.testing.assert_close(net.q_values(obs), expected)


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_each_branch_advantage_is_centred_on_its_own_mean(head):
    net = make(head=head)
    h = net.features(torch.randn(6, OBS))
    if head == "iqn":
        h = h.unsqueeze(1).expand(6, 5, 32)
    value, adv = net.heads.streams(h)
    assert value is not None
    torch.testing.assert_close(
        adv.mean(dim=-2), torch.zeros_like(adv.mean(dim=-2)), atol=1e-6, rtol=0
    )


def test_shifting_one_branch_advantage_leaves_every_output_unchanged():
    # With centring on the branch's own mean, a constant added to all of branch 1's advantages
    # cancels; centring over all branches jointly would leak it into the other branches.
    net = make().eval()
    obs = torch.randn(5, OBS)
    before = net(obs).log_probs
    with torch.no_grad():
        net.heads.advantage.bias_mu[1] += 3.0
    torch.testing.assert_close(net(obs).log_probs, before)


def test_act_picks_the_argmax_in_each_branch():
    net = make().eval()
    preferred = [2, 0, 1]
    atoms = 51
    with torch.no_grad():
        net.heads.advantage.weight_mu.zero_()
        for b in range(3):
            bias = torch.zeros(3, atoms)
            bias[preferred[b]] = torch.linspace(0, 4, atoms)
            net.heads.advantage.bias_mu[b].copy_(bias.flatten())
    obs = torch.randn(9, OBS)
    assert net.act(obs).tolist() == [preferred] * 9
    torch.testing.assert_close(net.act(obs), net.q_values(obs).argmax(-1))


def test_without_dueling_there_is_no_value_stream():
    net = make(dueling=False, noisy=False)
    assert net.heads.value is None
    assert net(torch.randn(3, OBS)).log_probs.shape == (3, 3, 3, 51)


def test_noisy_trunk_and_reset_noise_change_the_training_output():
    net = make(noisy_trunk=True)
    obs = torch.randn(3, OBS)
    first = net.q_values(obs)
    net.reset_noise()
    assert not torch.allclose(first, net.q_values(obs))
    net.eval()
    torch.testing.assert_close(net.q_values(obs), net.q_values(obs), rtol=0, atol=0)


def test_iqn_shapes_and_deterministic_eval():
    net = make(head="iqn", iqn_taus=8)
    obs = torch.randn(4, OBS)
    out = net(obs)
    assert (
        out.log_probs is None and out.quantiles.shape == (4, 3, 3, 8) and out.taus.shape == (4, 8)
    )
    assert net(obs, torch.rand(4, 5)).quantiles.shape == (4, 3, 3, 5)
    net.eval()
    torch.testing.assert_close(net.q_values(obs), net.q_values(obs), rtol=0, atol=0)
    torch.testing.assert_close(net(obs).taus[0], (torch.arange(8) + 0.5) / 8)
    torch.testing.assert_close(net.q_values(obs), net(obs).quantiles.mean(-1))
    assert net.act(obs).shape == (4, 3)


def test_config_is_strict_and_validated():
    with pytest.raises(pydantic.ValidationError):
        AgentConfig(branches=(3, 2))
    with pytest.raises(pydantic.ValidationError):
        AgentConfig(v_min=5.0, v_max=5.0)
    with pytest.raises(pydantic.ValidationError):
        AgentConfig(atoms=17)
    with pytest.raises(pydantic.ValidationError):
        AgentConfig(hiden=64)
    cfg = AgentConfig(branches=(4, 4))
    assert (cfg.n_branches, cfg.n_actions) == (2, 4)
    assert make(branches=(4, 4))(torch.randn(2, OBS)).log_probs.shape == (2, 2, 4, 51)


GROUPS = {"returns": [0, 1], "vol": [2], "time": [3, 4]}
WINDOW, F, POS = 3, 5, 2


def test_variable_selection_weights_sum_to_one():
    torch.manual_seed(0)
    vs = VariableSelection(GROUPS, F, WINDOW, POS, out_dim=16)
    obs = torch.randn(8, WINDOW * F + POS)
    w = vs.group_weights(obs)
    assert w.shape == (8, 3) and (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(8))
    assert vs(obs).shape == (8, 16 + POS)
    torch.testing.assert_close(vs(obs)[:, 16:], obs[:, -POS:])


def test_masking_a_group_changes_only_its_own_embedding():
    torch.manual_seed(0)
    vs = VariableSelection(GROUPS, F, WINDOW, POS, out_dim=16)
    obs = torch.randn(8, WINDOW * F + POS)
    masked = obs.clone()
    for w in range(WINDOW):
        masked[:, w * F + 2] = 0.0
    e, em = vs.group_embeddings(obs), vs.group_embeddings(masked)
    vol = vs.names.index("vol")
    assert not torch.allclose(e[:, vol], em[:, vol])
    for g in range(3):
        if g != vol:
            torch.testing.assert_close(e[:, g], em[:, g], rtol=0, atol=0)


def test_network_with_variable_selection():
    torch.manual_seed(0)
    cfg = AgentConfig(hidden=32, variable_selection=True)
    net = BranchingQNetwork(
        WINDOW * F + POS, cfg, feature_groups=GROUPS, window=WINDOW, pos_dim=POS
    )
    assert net.q_values(torch.randn(4, WINDOW * F + POS)).shape == (4, 3, 3)


@pytest.mark.parametrize(
    "groups, obs_dim, message",
    [
        (None, WINDOW * F + POS, "no feature groups"),
        ({"a": [0, 1, 2], "b": [3]}, WINDOW * F + POS, "in no feature group"),
        ({"a": [0, 1, 2], "b": [2, 3, 4]}, WINDOW * F + POS, "give it one"),
        ({"a": [0, 1, 2], "b": [3, 4, 5]}, WINDOW * F + POS, "outside"),
        (GROUPS, WINDOW * F + POS + 1, "not window"),
    ],
)
def test_variable_selection_rejects_bad_groups(groups, obs_dim, message):
    cfg = AgentConfig(hidden=8, variable_selection=True)
    with pytest.raises(ConfigError, match=message):
        BranchingQNetwork(obs_dim, cfg, feature_groups=groups, window=WINDOW, pos_dim=POS)


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_the_direction_head_reads_the_trunk_output(head):
    net = make(head=head)
    obs = torch.randn(6, OBS)
    torch.testing.assert_close(net(obs).aux_logits, net.aux_head(net.features(obs)))


@pytest.mark.parametrize("noisy_trunk", [False, True])
def test_the_parameters_state_the_model_and_only_the_working_copies_are_padded(noisy_trunk):
    """The trunk's first layer reads exactly the observation's 12 columns; the working copy
    that the training passes compute with has 16 (whole 16-byte bf16 rows), and its padding
    columns are zero."""
    net = make(noisy_trunk=noisy_trunk)
    first = net.trunk[0]
    weight = first.weight_mu if noisy_trunk else first.weight
    assert weight.shape == (32, OBS)
    obs = torch.randn(5, OBS)
    plain = net(obs).log_probs
    net.use_working_weights(torch.float32)
    assert first.weight_work.shape == (32, 16) and not first.weight_work[:, OBS:].any()
    torch.testing.assert_close(net(obs).log_probs, plain)
