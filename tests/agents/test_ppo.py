"""PPO's math: GAE on a hand-computed example and its lambda = 0 and 1 limits, the clipped
surrogate and the clipped value loss against hand-computed values, one update as one Adam step,
the factored policy, and the recurrent state zeroed where an episode begins."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.agents.dqn import AgentConfig
from foxhunt.agents.ppo import (
    ActorCritic,
    PPOConfig,
    Rollout,
    gae,
    log_prob_entropy,
    ppo_loss,
    ppo_update,
    truncation_bootstrap,
)
from foxhunt.training.ppo import sample

GAMMA = 0.9


def flags(*rows: str) -> torch.Tensor:
    """[T, N] bool from one string per step, one character per env ('1' set)."""
    return torch.tensor([[c == "1" for c in row] for row in rows])


def test_gae_by_hand_with_a_done_in_the_middle():
    """Three steps of two envs at gamma 0.9, lambda 0.5, the same rewards and values; env 1's
    episode ends at step 1, so step 1 bootstraps from nothing and step 0 does not look past it.
        delta = (1 + .9 * 1 - .5, 2 + .9 * 1.5 - 1, 3 + .9 * 2 - 1.5) = (1.4, 2.35, 3.3)
        env 0: A2 = 3.3, A1 = 2.35 + .45 * 3.3 = 3.835, A0 = 1.4 + .45 * 3.835 = 3.12575
        env 1: A2 = 3.3, A1 = 2 - 1 = 1.0 (done), A0 = 1.4 + .45 * 1.0 = 1.85"""
    rewards = torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    values = torch.tensor([[0.5, 0.5], [1.0, 1.0], [1.5, 1.5]])
    advantages, returns = gae(rewards, values, flags("00", "01", "00"), torch.tensor([2.0, 2.0]),
                              GAMMA, 0.5)
    expected = torch.tensor([[3.12575, 1.85], [3.835, 1.0], [3.3, 3.3]])
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, expected + values)


rollouts = st.tuples(st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**31 - 1))


def random_rollout(steps: int, envs: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(steps, envs, generator=gen, dtype=torch.float64),
            torch.randn(steps, envs, generator=gen, dtype=torch.float64),
            torch.rand(steps, envs, generator=gen) < 0.3,
            torch.randn(envs, generator=gen, dtype=torch.float64))


@settings(max_examples=40, deadline=None)
@given(rollouts)
def test_gae_at_lambda_one_is_the_monte_carlo_return_minus_the_value(shape):
    rewards, values, dones, last_value = random_rollout(*shape)
    advantages, returns = gae(rewards, values, dones, last_value, GAMMA, 1.0)
    steps, envs = rewards.shape
    for n in range(envs):
        for t in range(steps):
            total, discount = 0.0, 1.0
            for k in range(t, steps):
                total += discount * rewards[k, n].item()
                if dones[k, n]:
                    break
                discount *= GAMMA
            else:
                total += discount * last_value[n].item()
            assert returns[t, n].item() == pytest.approx(total)
            assert advantages[t, n].item() == pytest.approx(total - values[t, n].item())


@settings(max_examples=40, deadline=None)
@given(rollouts)
def test_gae_at_lambda_zero_is_the_one_step_td_error(shape):
    rewards, values, dones, last_value = random_rollout(*shape)
    advantages, _ = gae(rewards, values, dones, last_value, GAMMA, 0.0)
    next_values = torch.cat((values[1:], last_value[None]))
    torch.testing.assert_close(advantages,
                               rewards + GAMMA * (~dones) * next_values - values)


def test_a_truncated_step_is_credited_with_the_discounted_value_of_its_own_next_state():
    rewards = torch.tensor([[1.0, 1.0]])
    out = truncation_bootstrap(rewards, flags("01"), torch.tensor([[5.0, 5.0]]), GAMMA)
    torch.testing.assert_close(out, torch.tensor([[1.0, 1.0 + GAMMA * 5.0]]))


RAW = PPOConfig(clip_coef=0.2, norm_adv=False, vf_coef=0.0, ent_coef=0.0)


def policy_loss(ratio: float, advantage: float) -> tuple[float, float]:
    """(L_pi, d L_pi / d log pi) of one sample at this ratio and advantage."""
    new = torch.tensor([math.log(ratio)], requires_grad=True)
    out = ppo_loss(new, torch.zeros(1), torch.tensor([advantage]), torch.zeros(1),
                   torch.zeros(1), torch.zeros(1), torch.zeros(1), RAW)
    out.loss.backward()
    return out.policy.item(), new.grad.item()


@pytest.mark.parametrize("ratio, advantage, expected, gradient", [
    (1.1, 1.0, -1.1, -1.1),  # inside the range: the plain surrogate -A ratio
    (0.9, -1.0, 0.9, 0.9),
    (1.5, 2.0, -2.4, 0.0),  # A > 0 above 1 + eps: clipped at -A (1.2), no gradient
    (0.5, 1.0, -0.5, -0.5),  # A > 0 below 1 - eps: the unclipped term is the pessimistic one
    (0.5, -1.0, 0.8, 0.0),  # A < 0 below 1 - eps: clipped at -A (0.8), no gradient
    (1.5, -1.0, 1.5, 1.5),  # A < 0 above 1 + eps: unclipped, the gradient pushes it back
])
def test_the_clipped_surrogate_by_hand(ratio, advantage, expected, gradient):
    loss, grad = policy_loss(ratio, advantage)
    assert loss == pytest.approx(expected)
    assert grad == pytest.approx(gradient)  # d(-A ratio)/d log pi = -A ratio


@pytest.mark.parametrize("new_value, clip_vloss, expected", [
    (1.1, True, 0.5 * 0.81),  # inside old +- eps: both terms equal
    (1.5, True, 0.5 * 0.64),  # moved 0.5 towards R = 2: clipped to 1.2, the larger error counts
    (0.0, True, 0.5 * 4.0),  # moved away: the unclipped error is the larger
    (1.5, False, 0.5 * 0.25),  # no clipping: 1/2 (V - R)^2
])
def test_the_clipped_value_loss_by_hand(new_value, clip_vloss, expected):
    config = PPOConfig(clip_coef=0.2, clip_vloss=clip_vloss)
    out = ppo_loss(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.tensor([new_value]),
                   torch.tensor([1.0]), torch.tensor([2.0]), torch.zeros(1), config)
    assert out.value.item() == pytest.approx(expected)


def test_the_loss_sums_its_terms_and_reports_kl_and_the_clipped_share():
    config = PPOConfig(clip_coef=0.2, norm_adv=False, vf_coef=0.5, ent_coef=0.01,
                       clip_vloss=False)
    ratio = torch.tensor([1.1, 1.5, 0.5, 1.0])
    out = ppo_loss(ratio.log(), torch.zeros(4), torch.tensor([1.0, 1.0, -1.0, 2.0]),
                   torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.zeros(4), torch.zeros(4),
                   torch.tensor([2.0, 2.0, 2.0, 2.0]), config)
    policy = (-1.1 - 1.2 + 0.8 - 2.0) / 4
    assert out.policy.item() == pytest.approx(policy)
    assert out.value.item() == pytest.approx(0.5 * 0.25)
    assert out.loss.item() == pytest.approx(policy + 0.5 * 0.125 - 0.01 * 2.0)
    assert out.clipfrac.item() == pytest.approx(0.5)
    assert out.approx_kl.item() == pytest.approx(((ratio - 1) - ratio.log()).mean().item())


def test_advantages_are_normalised_per_minibatch():
    """With norm_adv the surrogate sees (A - mean) / std: scaling and shifting A changes
    nothing."""
    gen = torch.Generator().manual_seed(3)
    new, adv = torch.randn(8, generator=gen) * 0.3, torch.randn(8, generator=gen)
    zeros = torch.zeros(8)
    a = ppo_loss(new, zeros, adv, zeros, zeros, zeros, zeros, PPOConfig())
    b = ppo_loss(new, zeros, 5 * adv + 3, zeros, zeros, zeros, zeros, PPOConfig())
    torch.testing.assert_close(a.policy, b.policy)
    normalised = (adv - adv.mean()) / (adv.std() + 1e-8)
    c = ppo_loss(new, zeros, normalised, zeros, zeros, zeros, zeros,
                 PPOConfig(norm_adv=False))
    torch.testing.assert_close(a.policy, c.policy)


AGENT = AgentConfig(hidden=16)


def network(recurrent: bool = False, obs_dim: int = 7, seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    return ActorCritic(obs_dim, AGENT, PPOConfig(recurrent=recurrent))


def test_the_policy_is_factored_over_the_dqns_branches_and_acts_by_its_mode_ties_low():
    net = network()
    obs = torch.randn(4, 7)
    logits, value = net(obs)
    assert logits.shape == (4, 3, 3) and value.shape == (4,)
    assert torch.equal(net.act(obs), logits.argmax(-1))
    action = torch.randint(3, (4, 3))
    logprob, entropy = log_prob_entropy(logits, action)
    by_branch = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(logprob, by_branch.log_prob(action).sum(-1))
    torch.testing.assert_close(entropy, by_branch.entropy().sum(-1))
    assert entropy.min() > 0.99 * 3 * math.log(3)  # the first policy is near uniform
    for p in net.policy.parameters():  # ties go to the lowest, safe-default index
        torch.nn.init.zeros_(p)
    assert torch.equal(net.act(obs), torch.zeros(4, 3, dtype=torch.long))


def test_gumbel_max_draws_follow_the_softmax():
    logits = torch.tensor([[[0.0, 1.0, -1.0]]]).expand(20_000, 1, 3)
    draws = sample(logits, torch.Generator().manual_seed(0))
    share = torch.bincount(draws.flatten(), minlength=3) / 20_000
    torch.testing.assert_close(share, logits[0, 0].softmax(-1), atol=0.015, rtol=0)


def test_the_lstm_state_is_zeroed_where_an_episode_begins():
    net = network(recurrent=True)
    obs = torch.randn(5, 2, 7)
    starts = flags("11", "00", "00", "01", "00")
    state, outs = None, []
    for t in range(5):
        logits, _, state = net.step(obs[t], state, starts[t])
        outs.append(logits)
    fresh = net.step(obs[3, 1:], net.initial_state(1), None)[0]
    torch.testing.assert_close(outs[3][1:], fresh)  # env 1 begins again at step 3: no memory
    alone = net.step(obs[3, :1], net.initial_state(1), None)[0]
    assert not torch.allclose(outs[3][:1], alone)  # env 0 remembers steps 0-2
    logits, _ = net.sequence(obs, starts, state=(torch.randn(2, 16), torch.randn(2, 16)))
    torch.testing.assert_close(logits, torch.stack(outs))  # the update replays what acted


def test_greedy_acting_carries_the_lstm_state_until_a_mode_switch():
    net = network(recurrent=True).eval()
    obs = torch.randn(4, 3, 7)
    state, modes = None, []
    for t in range(4):
        logits, _, state = net.step(obs[t], state)
        modes.append(logits.argmax(-1))
    first = [net.act(obs[t]) for t in range(4)]
    assert all(torch.equal(a, b) for a, b in zip(first, modes, strict=True))
    net.eval()  # a new evaluation starts from zeros again
    with torch.inference_mode():  # as paper trading acts
        assert all(torch.equal(net.act(obs[t]), modes[t]) for t in range(4))
    net.eval()  # and the state paper carried resets outside its mode too
    assert all(torch.equal(net.act(obs[t]), modes[t]) for t in range(4))
    assert net.layout_info()["recurrent"] is True and net.layout_info()["kind"] == "ppo"


def random_ppo_rollout(net: ActorCritic, steps: int = 4, envs: int = 3, seed: int = 1) -> Rollout:
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn(steps, envs, 7, generator=gen)
    starts = torch.rand(steps, envs, generator=gen) < 0.3
    action = torch.randint(3, (steps, envs, 3), generator=gen)
    with torch.no_grad():
        logits, value = net.sequence(obs, starts, None)
        logprob = log_prob_entropy(logits, action)[0]
    advantage = torch.randn(steps, envs, generator=gen)
    return Rollout(obs, starts, action, logprob, value, advantage, advantage + value, None)


@pytest.mark.parametrize("recurrent", [False, True])
def test_an_update_of_one_epoch_and_one_minibatch_is_one_adam_step_on_the_clipped_loss(recurrent):
    net = network(recurrent)
    rollout = random_ppo_rollout(net)
    config = PPOConfig(update_epochs=1, minibatches=1, lr=1e-2, max_grad_norm=1e6,
                       recurrent=recurrent)
    by_hand = copy.deepcopy(net)
    logits, value = by_hand.sequence(rollout.obs, rollout.starts, None)
    logprob, entropy = log_prob_entropy(logits, rollout.action)
    loss = ppo_loss(logprob.flatten(), rollout.logprob.flatten(), rollout.advantage.flatten(),
                    value.flatten(), rollout.value.flatten(), rollout.returns.flatten(),
                    entropy.flatten(), config)
    torch.testing.assert_close(loss.approx_kl, torch.tensor(0.0))  # ratio 1 before any step
    adam = torch.optim.Adam(by_hand.parameters(), lr=1e-2)
    loss.loss.backward()
    adam.step()

    order = torch.Generator().manual_seed(0)
    out = ppo_update(net, torch.optim.Adam(net.parameters(), lr=1e-2), rollout, config, order)
    assert out.steps == 1
    if not recurrent:  # one minibatch in the permutation's order: the same mean, reordered
        torch.testing.assert_close(out.loss, loss.loss.detach())
    for (name, a), b in zip(net.state_dict().items(), by_hand.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


@pytest.mark.parametrize("recurrent, sizes", [(False, [7, 7, 6] * 2), (True, [8, 8, 4] * 2)])
def test_minibatches_cover_every_transition_or_every_envs_whole_sequence(recurrent, sizes):
    """20 transitions (4 steps of 5 envs) in 3 minibatches; or the 5 envs in 3 minibatches of
    2, 2 and 1 whole sequences of 4 steps."""
    net = network(recurrent)
    rollout = random_ppo_rollout(net, steps=4, envs=5)
    seen: list[int] = []
    net.value.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[:-1].numel()))
    out = ppo_update(net, torch.optim.Adam(net.parameters()), rollout,
                     PPOConfig(update_epochs=2, minibatches=3, recurrent=recurrent),
                     torch.Generator().manual_seed(0))
    assert out.steps == 6
    assert seen == sizes
