"""An update trains on the batch the previous update staged, and stages the next one."""

from __future__ import annotations

import copy

import pytest
import torch

from foxhunt.agents.dqn.losses import HEADS, greedy_next_actions, take_action, target_distributions
from foxhunt.agents.dqn.noisy import NoisyWeights
from foxhunt.agents.dqn.working import WorkingLinear
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")


@pytest.fixture
def steps(tmp_path):
    market = synth(3_000, 0.3, seed=11)
    trainer = WalkForwardTrainer(tiny_spec(), market.bars, pipeline(), instrument(), tmp_path, CPU)
    steps = trainer.start_fold(trainer.folds[0]).steps
    steps.run_collect(8)
    steps.learner.online.train()
    return steps


def test_an_update_before_prime_is_a_clear_error(steps):
    with pytest.raises(RuntimeError, match="prime"):
        steps.update()


def test_the_update_trains_on_the_staged_batch_and_stages_a_fresh_one(steps):
    steps.prime()
    staged = steps.batch.index.clone()
    before = steps.learner.replay.priority_alpha.clone()
    steps.update()
    after = steps.learner.replay.priority_alpha
    changed = torch.nonzero(after != before).squeeze(1)
    assert set(changed.tolist()) <= set(staged.tolist()) and changed.numel() > 0
    assert not torch.equal(steps.batch.index, staged)  # the next batch is staged in place


def test_polyak_moves_the_target_toward_the_weights_the_update_started_from(steps):
    tau = steps.learner.spec.agent.tau
    steps.prime()
    online0 = {k: v.clone() for k, v in steps.learner.online.state_dict().items()}
    target0 = {k: v.clone() for k, v in steps.learner.target.state_dict().items()}
    steps.update()
    online1 = steps.learner.online.state_dict()
    for name, p in steps.learner.target.named_parameters():
        assert not torch.equal(online1[name], online0[name]), f"{name}: Adam took no step"
        torch.testing.assert_close(p, (1 - tau) * target0[name] + tau * online0[name],
                                   rtol=0, atol=1e-7, msg=name)


def test_the_staged_target_is_double_dqns_with_the_weights_and_noise_the_update_started_from(
    steps,
):
    steps.prime()
    online0 = copy.deepcopy(steps.learner.online)  # the weights and the noise this update runs with
    steps.update()
    staged, agent = steps.batch, steps.learner.spec.agent
    b = steps.learner.replay.lookup(staged.index)
    next_obs = steps.learner.env.observe(b.next_bar, b.next_pos_state)
    # The target network as the staging left it: Polyak's weights, the noise drawn for it.
    next_dist = target_distributions(steps.learner.target, next_obs, agent)
    a_star = greedy_next_actions(online0, next_obs)
    h = HEADS[agent.head]
    expected = h.targets(*h.target_operands(take_action(next_dist, a_star), b.ret, b.discount,
                                            steps.learner.online.support))
    torch.testing.assert_close(staged.target, expected)
    # The online network has moved on since (new noise too), so the staging could not have used it.
    assert not any(torch.equal(a, b) for a, b in zip(steps.learner.online.noise_buffers(),
                                                     online0.noise_buffers(), strict=True))


def test_every_run_of_updates_starts_from_a_batch_drawn_after_the_collect_phase(steps):
    steps.run_updates(2)  # leaves a batch staged from the replay as it was
    replay = steps.learner.replay
    replay.priority_alpha.zero_()  # nothing stored so far can be drawn any more
    newest = replay.size * replay.n_envs
    steps.run_collect(1)  # new transitions arrive at the max priority
    fresh = set(range(newest, newest + steps.learner.env.n_envs))
    before = replay.priority_alpha.clone()
    steps.run_updates(1)
    trained_on = torch.nonzero(replay.priority_alpha != before).squeeze(1)
    assert trained_on.numel() > 0 and set(trained_on.tolist()) <= fresh


def assert_working_weights_are_composed(net, rtol: float = 0.0):
    """Every noisy layer's working copy holds mu + sigma * eps_out eps_in^T of its current
    parameters and noise, every plain layer's (the trunk's, the direction head's) its weights,
    in the copy's dtype, with zero padding rows and columns: exactly, or within `rtol` (compiled code may
    round the product differently before the cast to bf16)."""
    layers = net.working_layers()
    assert WorkingLinear in {type(layer) for layer in layers}
    for layer in layers:
        out = layer.out_features
        if isinstance(layer, NoisyWeights):
            weight = torch.addcmul(layer.weight_mu, layer.weight_sigma,
                                   layer.eps_out.unsqueeze(-1) * layer.eps_in.unsqueeze(-2))
            bias = torch.addcmul(layer.bias_mu, layer.bias_sigma, layer.eps_out)
        else:
            weight, bias = layer.weight, layer.bias
        work_w, work_b = layer.weight_work.detach(), layer.bias_work.detach()
        cols = weight.shape[-1]
        assert not work_w[..., out:, :].any() and not work_b[..., out:].any()
        assert not work_w[..., cols:].any()  # the input's padding columns
        for work, composed in ((work_w[..., :out, :cols], weight), (work_b[..., :out], bias)):
            if rtol:
                torch.testing.assert_close(work.float(), composed, rtol=rtol, atol=1e-6)
            else:
                assert torch.equal(work, composed.to(work.dtype))


def test_after_every_step_the_working_weights_are_the_current_weights_and_noise(steps):
    """The optimiser step recomposes the online network's working weights with the next
    update's noise; collect and the target's staging recompose theirs with their fresh noise."""
    for _ in range(2):
        steps.run_updates(3)
        assert_working_weights_are_composed(steps.learner.online)
        assert_working_weights_are_composed(steps.learner.target)
        steps.run_collect(2)
        assert_working_weights_are_composed(steps.learner.online)


def test_every_collect_step_acts_with_fresh_noise_composed_before_it(steps):
    """Each step draws the next step's noise beside its env step; `run_collect` draws the first
    step's, after the updates that recomposed the working weights with theirs."""
    acted = []

    def current_noise():
        return torch.cat([b.flatten() for b in steps.learner.online.noise_buffers()])

    def record(module, args):
        assert_working_weights_are_composed(steps.learner.online)
        acted.append(current_noise())

    steps.run_updates(2)
    after_updates = current_noise()
    handle = steps.learner.online.heads.hidden.register_forward_pre_hook(record)
    try:
        steps.run_collect(3)
    finally:
        handle.remove()
    assert len(acted) == 3
    for i, noise in enumerate(acted):
        assert not torch.equal(noise, after_updates), i
        assert not any(torch.equal(noise, other) for other in acted[i + 1:]), i
