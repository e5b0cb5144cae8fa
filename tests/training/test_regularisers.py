"""Regularisers against memorising the training window: Gaussian noise on the sampled
observations' market features ([agent] input_noise) and decoupled weight decay
([agent] weight_decay, `ClippedAdam`)."""

from __future__ import annotations

import pytest
import torch

from foxhunt.errors import ConfigError

from .builders import tiny_spec
from .test_reference_update import make_learner


def staged_obs(steps):
    torch.manual_seed(0)
    state = steps.learner.generator.get_state()
    fields, _ = steps.learner.stage()
    steps.learner.generator.set_state(state)
    return fields[3]


def test_input_noise_blurs_the_market_features_and_leaves_the_position_state_exact(tmp_path):
    clean = make_learner(tmp_path / "a", {})
    noisy = make_learner(tmp_path / "b", {"input_noise": 0.5})
    x, y = staged_obs(clean), staged_obs(noisy)
    pos = clean.learner.env.pos_dim
    assert torch.equal(x[:, -pos:], y[:, -pos:])
    diff = (y - x)[:, :-pos]
    assert abs(diff.mean().item()) < 0.05 and abs(diff.std().item() - 0.5) < 0.05


def test_no_input_noise_draws_nothing_and_stages_the_clean_observations(tmp_path):
    plain = make_learner(tmp_path / "a", {})
    zero = make_learner(tmp_path / "b", {"input_noise": 0.0})
    assert torch.equal(staged_obs(plain), staged_obs(zero))
    assert torch.equal(plain.learner.generator.get_state(), zero.learner.generator.get_state())


def test_a_run_with_weight_decay_keeps_smaller_weights(tmp_path):
    def weight_norm(agent):
        steps = make_learner(tmp_path / str(len(agent)), agent)
        steps.run_updates(30)
        return sum(p.detach().pow(2).sum() for p in steps.learner.online.parameters()).sqrt().item()

    assert weight_norm({"weight_decay": 50.0, "lr": 1e-3}) < weight_norm({"lr": 1e-3})


def staged(steps):
    state = steps.learner.generator.get_state()
    fields, _ = steps.learner.stage()
    steps.learner.generator.set_state(state)
    return fields


def test_mirror_stages_half_the_transitions_as_the_mirrored_market_gives_them(tmp_path):
    clean = make_learner(tmp_path / "a", {})
    mirrored = make_learner(tmp_path / "b", {"mirror": True})
    _, _, action, obs, labels = staged(clean)
    _, _, m_action, m_obs, m_labels = staged(mirrored)
    sign, offset, clip = mirrored.learner._mirror
    features = sign.numel()
    flipped = (m_action[:, 0] != action[:, 0]) | (m_obs != obs).any(dim=1)
    assert 0.3 < flipped.float().mean().item() < 0.7
    f, k = flipped, ~flipped
    assert torch.equal(m_obs[k], obs[k]) and torch.equal(m_action[k], action[k])
    assert torch.equal(m_labels[k], labels[k])
    expected = (obs[f, :features] * sign + offset).clamp(-clip, clip)
    torch.testing.assert_close(m_obs[f, :features], expected)
    assert torch.equal(m_obs[f, features], -obs[f, features])  # the position, negated
    assert torch.equal(m_obs[f, features + 1:], obs[f, features + 1:])
    assert torch.equal(m_action[f, 0], torch.tensor([0, 2, 1])[action[f, 0]])
    assert torch.equal(m_action[f, 1:], action[f, 1:])
    known = labels[f] >= 0
    assert torch.equal(m_labels[f][known], 1 - labels[f][known])


def test_a_mirrored_run_learns_without_error(tmp_path):
    steps = make_learner(tmp_path, {"mirror": True, "input_noise": 0.3})
    steps.run_updates(10)
    assert steps.learner.read_metrics().update["updates"] == 10


def flat_params(net):
    return torch.cat([p.detach().flatten() for p in net.parameters()])


def averaging_learner(tmp_path, average_epochs: float):
    """`make_learner` with [train] average_epochs: tiny_spec's epochs hold 10 updates, so
    average_epochs = 10 is a Polyak rate of 0.01 and 0.1 (or less) a rate of 1."""
    return make_learner(tmp_path, {}, average_epochs=average_epochs)


def test_the_weight_average_trails_the_online_network_at_its_rate(tmp_path):
    """[train] average_epochs keeps a Polyak average of the online weights, which the fold then
    judges and deploys (`policy_net`); at rate 1 it is the online network's last step, at a
    small rate it stays near where the fold started. The step is taken where the target's is,
    when the next batch is staged (one update ahead; see `CompiledSteps.prime`), so at rate 1 the
    average is the online network before its latest update."""
    plain = averaging_learner(tmp_path / "a", 0.0)
    assert plain.learner.averaged is None and plain.learner.policy_net is plain.learner.online
    follow = averaging_learner(tmp_path / "b", 0.1)
    slow = averaging_learner(tmp_path / "c", 10.0)
    assert follow.learner.spec.train.average_rate() == 1.0 and slow.learner.spec.train.average_rate() == 0.01
    assert follow.learner.averaged.support is follow.learner.online.support  # C51's one support (an adaptive one moves)
    start = flat_params(slow.learner.online)
    for steps in (follow, slow):
        assert steps.learner.policy_net is steps.learner.averaged
        steps.run_updates(29)
    before_last = flat_params(follow.learner.online)
    follow.run_updates(1)
    slow.run_updates(1)
    assert torch.equal(flat_params(follow.learner.averaged), before_last)
    assert not torch.equal(before_last, flat_params(follow.learner.online))
    moved, averaged_moved = (flat_params(slow.learner.online) - start), (flat_params(slow.learner.averaged) - start)
    assert 0 < averaged_moved.norm() < 0.5 * moved.norm()


def test_a_weight_average_changes_no_random_draw_of_the_run(tmp_path):
    """The average only reads the online weights: the same seed trains the same online network."""
    plain = averaging_learner(tmp_path / "a", 0.0)
    averaged = averaging_learner(tmp_path / "b", 0.5)
    for steps in (plain, averaged):
        steps.run_updates(10)
    assert torch.equal(flat_params(plain.learner.online), flat_params(averaged.learner.online))


def test_the_average_needs_a_sized_budget_and_spans_epochs():
    train = tiny_spec(average_epochs=0.5).train
    assert train.average_rate() == 2 / (0.5 * 20)
    with pytest.raises(ConfigError, match="updates_per_fold"):
        train.model_copy(update={"updates_per_fold": None}).average_rate()
