"""`TwinPass`: the online and the target network at the same observations in one pass gives each
network's own log-probabilities, and leaves both networks working as before."""

from __future__ import annotations

import copy

import pytest
import torch

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.agents.dqn.twin import TwinPass
from foxhunt.errors import ConfigError

OBS = 13  # padded to 16 inside the network


def pair(config: AgentConfig, seed: int = 0) -> tuple[BranchingQNetwork, BranchingQNetwork]:
    """An online network and a target that differs from it (other weights, other noise), both
    with float32 working weights, in training mode."""
    torch.manual_seed(seed)
    online = BranchingQNetwork(OBS, config)
    target = copy.deepcopy(online).requires_grad_(False)
    with torch.no_grad():
        for p in target.parameters():
            p.add_(0.05 * torch.randn_like(p))
    for net, noise_seed in ((online, 1), (target, 2)):
        net.use_working_weights(torch.float32)
        net.reset_noise(torch.Generator().manual_seed(noise_seed))
    return online, target


CONFIGS = {
    "default": AgentConfig(hidden=16, atoms=11),
    "noisy_trunk_three_layers": AgentConfig(hidden=16, atoms=11, noisy_trunk=True, trunk_layers=3),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_the_twin_pass_gives_each_networks_own_log_probabilities(name):
    online, target = pair(CONFIGS[name])
    twin = TwinPass(online, target)
    obs = torch.randn(9, OBS)
    log_probs = twin.log_probs(obs)
    assert log_probs.shape == (2, 9, 3, 3, 11)
    with torch.no_grad():
        torch.testing.assert_close(log_probs[0], online.distributions(obs), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(log_probs[1], target.distributions(obs), rtol=1e-5, atol=1e-5)


def test_both_networks_keep_composing_and_training_through_their_shared_working_weights():
    """After the pairing each network still composes its own half (a change of weights or noise
    shows in the twin pass) and the online network's gradients still arrive."""
    online, target = pair(CONFIGS["default"])
    reference = copy.deepcopy(online)  # unpaired, same weights and noise
    twin = TwinPass(online, target)
    obs = torch.randn(5, OBS)
    for net in (online, reference):
        out = net(obs)
        (out.log_probs.exp()[..., 0].sum() + out.aux_logits.sum()).backward()
    for (name, _), a, b in zip(online.named_parameters(), reference.gradients(), online.gradients(),
                               strict=True):
        assert torch.equal(a, b), name
    with torch.no_grad():
        for p in target.parameters():
            p.mul_(0.5)
    target.compose_working_weights()
    target.reset_noise(torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(twin.log_probs(obs)[1], target.distributions(obs),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("setting", [{"head": "iqn"}, {"dueling": False}, {"noisy": False}])
def test_heads_it_cannot_pair_are_a_config_error(setting):
    online, target = pair(AgentConfig(hidden=16, atoms=11, **setting))
    with pytest.raises(ConfigError, match="train.twin_target_pass needs"):
        TwinPass(online, target)


def test_it_needs_working_weights():
    online = BranchingQNetwork(OBS, AgentConfig(hidden=16, atoms=11))
    with pytest.raises(ValueError, match="working weights"):
        TwinPass(online, copy.deepcopy(online))


def test_it_refuses_a_network_in_eval_mode():
    online, target = pair(CONFIGS["default"])
    twin = TwinPass(online, target)
    target.eval()
    with pytest.raises(RuntimeError, match="training mode"):
        twin.log_probs(torch.randn(2, OBS))
