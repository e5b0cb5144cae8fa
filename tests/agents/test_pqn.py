"""PQN's math: Q(lambda) returns on hand-computed examples and their limits, the update as one
gradient step, the network's actions and the epsilon schedule."""

from __future__ import annotations

import copy

import pytest
import torch

from foxhunt.agents.dqn import AgentConfig
from foxhunt.agents.pqn import PQNConfig, QNetwork, Rollout, lambda_returns, pqn_update

GAMMA = 0.9


def flags(*rows: str) -> torch.Tensor:
    """[T, N] bool from one string per step, one character per env ('1' set)."""
    return torch.tensor([[c == "1" for c in row] for row in rows])


def test_lambda_returns_by_hand_with_a_termination_and_a_truncation():
    """Three steps of three envs at gamma 0.9, lambda 0.5. Env 0 runs through; env 1 terminates
    at step 1 (no bootstrap there, and step 0 does not look past it); env 2 is truncated at
    step 0 (it bootstraps from its own s'_0 only: step 1 is a new episode)."""
    reward = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]])
    next_q = torch.tensor([[10.0, 10.0, 10.0], [20.0, 20.0, 20.0], [30.0, 30.0, 30.0]])
    terminated = flags("000", "010", "000")
    truncated = flags("001", "000", "000")
    g = lambda_returns(reward, next_q, terminated, truncated, GAMMA, 0.5)
    # env 0: G2 = 3 + .9 * 30 = 30; G1 = 2 + .9 (20 + .5 (30 - 20)) = 24.5;
    #        G0 = 1 + .9 (10 + .5 (24.5 - 10)) = 16.525
    # env 1: G2 = 30; G1 = 2 (terminated); G0 = 1 + .9 (10 + .5 (2 - 10)) = 6.4
    # env 2: G2 = 30; G1 = 24.5; G0 = 1 + .9 * 10 = 10 (truncated: s'_0 alone)
    expected = torch.tensor([[16.525, 6.4, 10.0], [24.5, 2.0, 24.5], [30.0, 30.0, 30.0]])
    torch.testing.assert_close(g, expected)


def test_a_termination_at_the_rollouts_last_step_does_not_bootstrap():
    g = lambda_returns(torch.tensor([[1.0], [2.0]]), torch.tensor([[5.0], [7.0]]),
                       flags("0", "1"), flags("0", "0"), GAMMA, 0.5)
    torch.testing.assert_close(g, torch.tensor([[1 + GAMMA * (5 + 0.5 * (2 - 5))], [2.0]]))


def random_rollout(steps: int = 6, envs: int = 5, branches: int = 3, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    reward = torch.randn(steps, envs, generator=gen)
    next_q = torch.randn(steps, envs, branches, generator=gen)
    terminated = torch.rand(steps, envs, generator=gen) < 0.15
    truncated = (torch.rand(steps, envs, generator=gen) < 0.15) & ~terminated
    return reward, next_q, terminated, truncated


def test_lambda_zero_is_one_step_td():
    reward, next_q, terminated, truncated = random_rollout()
    g = lambda_returns(reward, next_q, terminated, truncated, GAMMA, 0.0)
    expected = reward[..., None] + GAMMA * (~terminated)[..., None] * next_q
    torch.testing.assert_close(g, expected)


def test_lambda_one_is_the_monte_carlo_return_bootstrapped_where_the_episode_or_rollout_ends():
    reward, next_q, terminated, truncated = random_rollout()
    g = lambda_returns(reward, next_q, terminated, truncated, GAMMA, 1.0)
    steps, envs, branches = next_q.shape
    for n in range(envs):
        for t in range(steps):
            total, discount = torch.zeros(branches), 1.0
            for k in range(t, steps):
                total = total + discount * reward[k, n]
                if terminated[k, n]:
                    break
                if truncated[k, n] or k == steps - 1:
                    total = total + discount * GAMMA * next_q[k, n]
                    break
                discount *= GAMMA
            torch.testing.assert_close(g[t, n], total)


def test_returns_are_per_branch():
    reward, next_q, terminated, truncated = random_rollout()
    g = lambda_returns(reward, next_q, terminated, truncated, GAMMA, 0.7)
    for b in range(next_q.shape[-1]):
        alone = lambda_returns(reward, next_q[..., b], terminated, truncated, GAMMA, 0.7)
        torch.testing.assert_close(g[..., b], alone)


AGENT = AgentConfig(hidden=16)


def network(obs_dim: int = 7, seed: int = 0) -> QNetwork:
    torch.manual_seed(seed)
    return QNetwork(obs_dim, AGENT)


def test_the_network_has_the_dqns_factored_heads_and_acts_greedily_per_branch():
    net = network()
    obs = torch.randn(4, 7)
    q = net(obs)
    assert q.shape == (4, 3, 3)
    assert torch.equal(net.act(obs), q.argmax(-1))
    assert any(isinstance(m, torch.nn.LayerNorm) for m in net.trunk)


def test_ties_go_to_the_lowest_safe_default_index():
    net = network()
    for p in net.heads.parameters():
        torch.nn.init.zeros_(p)
    assert torch.equal(net.act(torch.randn(5, 7)), torch.zeros(5, 3, dtype=torch.long))


def test_an_update_of_one_epoch_and_one_minibatch_is_one_adam_step_on_the_halved_squared_td_error():
    steps, envs = 4, 3
    gen = torch.Generator().manual_seed(1)
    reward, _, terminated, truncated = random_rollout(steps, envs)
    rollout = Rollout(torch.randn(steps, envs, 7, generator=gen),
                      torch.randint(3, (steps, envs, 3), generator=gen), reward, terminated,
                      truncated, torch.randn(steps, envs, 7, generator=gen))
    config = PQNConfig(update_epochs=1, minibatches=1, gamma=GAMMA, q_lambda=0.5, lr=1e-2,
                       max_grad_norm=1e6)
    net = network()
    by_hand = copy.deepcopy(net)
    with torch.no_grad():
        next_q = by_hand(rollout.next_obs.flatten(0, 1)).amax(-1).view(steps, envs, 3)
    target = lambda_returns(reward, next_q, terminated, truncated, GAMMA, 0.5).flatten(0, 1)
    q = by_hand(rollout.obs.flatten(0, 1)).gather(-1, rollout.action.flatten(0, 1)[..., None])
    loss = 0.5 * (q.squeeze(-1) - target).square().mean()
    adam = torch.optim.Adam(by_hand.parameters(), lr=1e-2)
    loss.backward()
    adam.step()

    out = pqn_update(net, torch.optim.Adam(net.parameters(), lr=1e-2), rollout, config)
    assert out.steps == 1
    torch.testing.assert_close(out.loss, loss.detach())
    torch.testing.assert_close(out.target_q, target.mean())
    for (name, a), b in zip(net.state_dict().items(), by_hand.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_an_update_takes_epochs_x_minibatches_steps_over_every_transition():
    steps, envs = 4, 5
    reward, _, terminated, truncated = random_rollout(steps, envs)
    rollout = Rollout(torch.randn(steps, envs, 7), torch.randint(3, (steps, envs, 3)), reward,
                      terminated, truncated, torch.randn(steps, envs, 7))
    net = network()
    seen = []
    net.register_forward_hook(lambda m, args, out: seen.append(len(args[0])))
    out = pqn_update(net, torch.optim.Adam(net.parameters()), rollout,
                     PQNConfig(update_epochs=2, minibatches=3), torch.Generator().manual_seed(0))
    assert out.steps == 6
    assert seen[0] == steps * envs  # the bootstrap pass over every s'
    assert seen[1:] == [7, 7, 6] * 2  # then each epoch covers the 20 transitions once


@pytest.mark.parametrize("rollout, expected", [(0, 1.0), (5, 0.505), (10, 0.01), (99, 0.01)])
def test_epsilon_falls_linearly_over_its_share_of_the_rollouts(rollout, expected):
    config = PQNConfig(eps_start=1.0, eps_finish=0.01, eps_decay=0.25)
    assert config.epsilon(rollout, 40) == pytest.approx(expected)


def test_epsilon_must_not_rise():
    with pytest.raises(ValueError, match="eps_finish"):
        PQNConfig(eps_start=0.1, eps_finish=0.5)
