"""The learner computes `reference_update`: exactly on the first update after `prime()`, and
within the documented one-update lag of its pipelining after that (CPU, float32)."""

from __future__ import annotations

import copy

import pytest
import torch

from foxhunt.agents.dqn import BranchingQNetwork, UpdateBatch, reference_update
from foxhunt.agents.dqn.update import bootstrap_target
from foxhunt.training.compiled import CompiledSteps
from foxhunt.training.learner import direction_labels
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")
HEADS = {"c51": {}, "iqn": {"head": "iqn"}, "c51_no_dueling": {"dueling": False},
         "noisy_trunk": {"noisy_trunk": True}}


def make_learner(tmp_path, agent: dict, **train) -> CompiledSteps:
    """tiny_spec's first fold's learner with `agent` keys set (and `train` [train] keys), after
    8 collect steps, with the steps that run it (`.learner` is the learner)."""
    spec = tiny_spec(**train)
    spec = spec.model_copy(update={"agent": spec.agent.model_copy(update=agent)})
    trainer = WalkForwardTrainer(spec, synth(3_000, 0.3, seed=11).bars, pipeline(), instrument(),
                                 tmp_path, CPU)
    steps = trainer.start_fold(trainer.folds[0]).steps
    steps.run_collect(8)
    steps.learner.online.train()
    return steps


def plain_copy(learner, net: BranchingQNetwork) -> BranchingQNetwork:
    """`net`'s weights and noise in a network without working weights: the reference computes
    with the parameters themselves and its gradients land on them."""
    spec = learner.spec
    plain = BranchingQNetwork(learner.env.obs_dim, spec.agent, None, spec.env.window,
                              learner.env.pos_dim)
    plain.load_state_dict(net.state_dict())
    for mine, theirs in zip(plain.noise_buffers(), net.noise_buffers(), strict=True):
        mine.copy_(theirs)
    return plain.train()


class Recorder:
    """Records each staging of a batch: the batch and the priorities it was drawn from (wrapping
    the replay's sample()), and the networks and the generator's state as they stand once the
    target network has drawn its noise (wrapping its reset_noise): what a* and the target's
    pass then compute with."""

    def __init__(self, learner):
        self.learner, self.calls = learner, []
        self._sample, self._reset = learner.replay.sample, learner.target.reset_noise
        learner.replay.sample = self.sample
        learner.target.reset_noise = self.reset_noise

    def sample(self, batch_size: int):
        priorities = self.learner.replay.priority_alpha.clone()
        batch = self._sample(batch_size)
        self.calls.append({"batch": batch, "priorities": priorities})
        return batch

    def reset_noise(self, generator):
        self._reset(generator)
        lr = self.learner
        if self.calls and "target" not in self.calls[-1]:
            self.calls[-1].update(generator=lr.generator.get_state(),
                                  online=copy.deepcopy(lr.online),
                                  target=copy.deepcopy(lr.target))


def reference_inputs(learner, call) -> tuple[UpdateBatch, torch.Generator]:
    b, env = call["batch"], learner.env
    batch = UpdateBatch(env.observe(b.bar, b.pos_state), b.action, b.ret, b.discount,
                        env.observe(b.next_bar, b.next_pos_state), b.weight,
                        direction_labels(learner.market, b.bar))
    return batch, torch.Generator().set_state(call["generator"])


@pytest.mark.parametrize("agent", HEADS.values(), ids=HEADS.keys())
def test_the_first_update_after_prime_is_the_reference_update(tmp_path, agent):
    """Same batch, same weights, same noise and taus: equal loss, gradients and priorities."""
    steps = make_learner(tmp_path, agent)
    learner = steps.learner
    recorder = Recorder(learner)
    grads, step = [], learner.optimizer.step

    def record_step(grads: list[torch.Tensor]) -> torch.Tensor:  # the gradients Adam is given
        grads_seen.append([g.clone() for g in grads])
        return step(grads=grads)

    grads_seen = grads
    learner.optimizer.step = record_step
    steps.prime()
    steps.update()

    call = recorder.calls[0]
    online, target = plain_copy(learner, call["online"]), plain_copy(learner, call["target"])
    batch, generator = reference_inputs(learner, call)
    ref = reference_update(online, target, batch, generator)
    ref.loss.backward()

    torch.testing.assert_close(learner.update_acc[0].float(), ref.loss.detach(), rtol=1e-5, atol=1e-6)
    for name, p, g in zip(dict(online.named_parameters()), online.parameters(), grads[0],
                          strict=True):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6, msg=name)
    index = call["batch"].index
    once = (index.unsqueeze(0) == index.unsqueeze(1)).sum(0) == 1  # duplicates: last write wins
    replay = learner.replay
    expected = (ref.priority + replay.config.priority_eps) ** replay.config.alpha
    torch.testing.assert_close(replay.priority_alpha[index[once]], expected[once], rtol=1e-5,
                               atol=1e-7)


def test_the_next_batch_is_drawn_before_this_updates_priorities_are_written(tmp_path):
    """The pipelining's first documented difference: each batch is drawn from the priorities as
    they stood when the update before it started (one draw of lag), never older ones."""
    steps = make_learner(tmp_path, {})
    learner = steps.learner
    recorder = Recorder(learner)
    steps.prime()
    for k in range(4):
        before = learner.replay.priority_alpha.clone()
        steps.update()
        assert torch.equal(recorder.calls[k + 1]["priorities"], before)
        written = recorder.calls[k]["batch"].index
        assert not torch.equal(learner.replay.priority_alpha[written], before[written])


def test_the_staged_target_lags_the_textbook_one_by_one_update_within_bounds(tmp_path):
    """The second documented difference: the next batch's a* comes from the online network
    one gradient step (and one noise draw) older than the textbook's, and its target network
    has taken Polyak's step toward those older weights. On the same batch, the staged
    bootstrap target stays close to the textbook's, and the loss they give differs by little."""
    steps = make_learner(tmp_path, {"noisy": False})  # the lag of the weights alone
    learner = steps.learner
    recorder = Recorder(learner)
    steps.prime()
    gaps, loss_gaps = [], []
    for k in range(6):
        online_before = copy.deepcopy(learner.online)
        steps.update()
        staged = learner.batch.target.clone()
        call = recorder.calls[k + 1]
        batch, generator = reference_inputs(learner, call)
        # Textbook: a* by the weights after this update's step, and Polyak toward those.
        online = plain_copy(learner, learner.online)
        target = plain_copy(learner, call["target"])
        tau = learner.spec.agent.tau
        with torch.no_grad():
            for t, new, old in zip(target.parameters(), online.parameters(),
                                   online_before.parameters(), strict=True):
                t.add_(tau * (new - old))
        textbook = reference_update(online, target, batch, generator)
        pipelined = reference_update(plain_copy(learner, call["online"]), plain_copy(learner, call["target"]),
                                     batch, torch.Generator().set_state(call["generator"]))
        gaps.append((staged - bootstrap_target(online, target, batch)).abs().sum(-1).mean())
        loss_gaps.append(((pipelined.loss - textbook.loss) / textbook.loss).abs())
    assert max(gaps) < 0.05  # L1 between distributions, out of a possible 2
    assert max(loss_gaps) < 0.01
