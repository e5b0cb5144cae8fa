"""The compiled greedy forward (paper.forward, a Numba kernel) against the network's own torch
forward: the same expected Q to float32 rounding, the same actions wherever it answers, and no
answer on a near tie (torch decides those)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.paper.forward import GreedyForward

OBS, POS = 4 * 9 + 6, 6

CONFIGS = [
    AgentConfig(hidden=32, atoms=11),
    AgentConfig(hidden=48, atoms=51, trunk_layers=3, noisy_trunk=True),
    AgentConfig(hidden=16, atoms=21, trunk_layers=1, dueling=False, noisy=False),
    AgentConfig(hidden=32, atoms=11, branches=(5, 5), v_min=-3.0, v_max=7.0),
]


def network(config: AgentConfig, seed: int = 0) -> BranchingQNetwork:
    """A random network with LayerNorm gains and shifts off their 1 and 0 (as after
    training), in eval mode."""
    torch.manual_seed(seed)
    net = BranchingQNetwork(OBS, config, None, 4, POS)
    with torch.no_grad():
        for m in net.trunk:
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(-1.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
        for p in net.parameters():  # larger weights: Q spread over the support
            p.mul_(3.0)
    return net.eval()


def observations(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, OBS)) * 2).astype(np.float32)


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
def test_q_values_equal_torchs_to_float32_rounding_and_actions_agree(config):
    net = network(config)
    fast = GreedyForward(net)
    obs = observations(400)
    with torch.inference_mode():
        q_torch = net.q_values(torch.from_numpy(obs)).double().numpy()
        a_torch = net.act(torch.from_numpy(obs)).numpy()
    q = np.stack([fast.q_values(o) for o in obs])
    assert q.shape == q_torch.shape
    assert np.abs(q - q_torch).max() < fast.margin / 10
    answered = 0
    for o, want in zip(obs, a_torch, strict=True):
        got = fast.act(o)
        if got is not None:
            answered += 1
            assert got == want.tolist()
    assert answered > 350  # near ties are rare


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
def test_q_values_are_the_networks_float64_values(config):
    """The kernel computes in float64 (its float32 inputs and weights widened exactly): it
    equals the same network run by torch in float64 to float64 rounding, far inside MARGIN, so
    the certificate's error is torch's float32 alone."""
    net = network(config)
    fast = GreedyForward(net)
    obs = observations(200)
    with torch.inference_mode():
        q64 = copy.deepcopy(net).double().q_values(torch.from_numpy(obs).double()).numpy()
    q = np.stack([fast.q_values(o) for o in obs])
    width = float(net.support.max() - net.support.min())
    assert np.abs(q - q64).max() < 1e-10 * width


def test_a_near_tie_is_left_to_torch():
    """Advantage streams at zero: every action of a branch has the same Q; torch breaks the tie
    (lowest index), the fast forward declines."""
    net = network(CONFIGS[0])
    with torch.no_grad():
        net.heads.advantage.weight_mu.zero_()
        net.heads.advantage.bias_mu.zero_()
    fast = GreedyForward(net)
    o = observations(1)[0]
    assert fast.act(o) is None
    assert float(fast.lead.min()) < fast.margin


def test_a_margin_above_every_lead_answers_nothing():
    net = network(CONFIGS[0])
    fast = GreedyForward(net, margin=1e9)
    assert all(fast.act(o) is None for o in observations(20))


@pytest.mark.parametrize("change", ["train", "iqn", "selection"])
def test_networks_it_does_not_compute_are_refused(change):
    config = AgentConfig(hidden=16, atoms=11, head="iqn" if change == "iqn" else "c51",
                         variable_selection=change == "selection")
    groups = {"a": list(range(5)), "b": list(range(5, 9))} if change == "selection" else None
    net = BranchingQNetwork(OBS, config, groups, 4, POS)
    net.train(change == "train")
    assert not GreedyForward.supports(net)
    with pytest.raises(ValueError, match="eval-mode C51"):
        GreedyForward(net)
