"""The learner's per-epoch diagnostics, and its adaptive C51 support: moved on the device
inside the update, shared by the online and target networks, agreed on by the reference update,
and restarted at every fold."""

from __future__ import annotations

import json
import math

import pytest
import torch

from foxhunt.agents.dqn import BranchingQNetwork, reference_update
from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.agents.dqn.losses import take_action, taken_edge_mass
from foxhunt.training.learner import UPDATE_METRICS
from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec
from .test_reference_update import Recorder, make_learner, plain_copy, reference_inputs

CPU = torch.device("cpu")
NARROW = {"support": "adaptive", "v_min": -0.05, "v_max": 0.05}
"""An adaptive support far narrower than the synthetic market's bootstrap targets."""


def trained(tmp_path, agent: dict, updates: int = 20):
    steps = make_learner(tmp_path, agent)
    steps.run_collect(8)
    steps.run_updates(updates)
    return steps


def configured(learner) -> torch.Tensor:
    a = learner.spec.agent
    return torch.linspace(a.v_min, a.v_max, a.atoms)


@pytest.mark.parametrize("agent", [{}, {"dueling": False}, {"head": "iqn"}, {"noisy": False}],
                         ids=["c51", "c51_no_dueling", "iqn", "no_noise"])
def test_every_diagnostic_is_read_once_per_epoch(tmp_path, agent):
    m = trained(tmp_path, agent).learner.read_metrics().update
    assert m["updates"] == 20 and all(math.isfinite(v) for v in m.values())
    assert 0 <= m["td_p50"] <= m["td_p99"] <= m["priority_max"]
    assert 0 < m["is_weight_min"] <= m["is_weight_mean"] <= m["is_weight_max"] <= 1
    assert m["q_spread"] > 0
    c51 = agent.get("head", "c51") == "c51"
    assert ("edge_mass" in m) == ("target_edge_mass" in m) == ("v_min" in m) == c51
    if c51:
        assert 0 < m["edge_mass"] < 1 and 0 < m["target_edge_mass"] < 1
        assert (m["v_min"], m["v_max"]) == (-10.0, 10.0)
    assert ("noisy_sigma" in m) == agent.get("noisy", True)
    if "noisy_sigma" in m:
        assert m["noisy_sigma"] > 0


@pytest.mark.parametrize("agent", [{}, {"head": "iqn"}], ids=["c51", "iqn"])
def test_reading_the_diagnostics_changes_nothing_the_run_learns(tmp_path, agent):
    probed, plain = trained(tmp_path / "a", agent), trained(tmp_path / "b", agent)
    probed.learner.read_metrics()
    for steps in (probed, plain):
        steps.run_collect(4)
        steps.run_updates(5)
    for a, b in zip(probed.learner.online.parameters(), plain.learner.online.parameters(), strict=True):
        assert torch.equal(a, b)


def test_the_diagnostics_are_of_one_staged_batch_and_not_of_each_update(tmp_path):
    steps = trained(tmp_path, {})
    assert "td_p50" not in UPDATE_METRICS and "edge_mass" not in UPDATE_METRICS
    expected = steps.learner.probe()
    m = steps.learner.read_metrics().update
    for k, v in expected.items():
        assert m[k] == pytest.approx(v.item())


def test_the_edge_mass_from_the_dueling_streams_is_the_networks_distributions():
    torch.manual_seed(0)
    net = BranchingQNetwork(12, AgentConfig(hidden=16, atoms=11))
    obs, actions = torch.randn(5, 12), torch.randint(0, 3, (5, 3))
    out = net(obs)
    p = take_action(out.log_probs, actions).exp()
    torch.testing.assert_close(taken_edge_mass(out.value, out.adv, actions),
                               (p[..., 0] + p[..., -1]).mean())


def test_an_adaptive_support_widens_in_place_for_both_networks(tmp_path):
    steps = make_learner(tmp_path, NARROW)
    z = steps.learner.support
    assert z is steps.learner.online.support is steps.learner.target.support
    steps.run_updates(20)
    assert steps.learner.support is z and z[-1] > NARROW["v_max"] and z[0] < NARROW["v_min"]
    m = steps.learner.read_metrics().update
    assert (m["v_min"], m["v_max"]) == (z[0].item(), z[-1].item())


def test_a_fixed_support_stays_put(tmp_path):
    steps = trained(tmp_path, {k: v for k, v in NARROW.items() if k != "support"})
    assert torch.equal(steps.learner.support, configured(steps.learner))


def test_the_reference_update_projects_onto_the_moved_support(tmp_path):
    """After the support has moved, the first update after prime() is still the reference's."""
    steps = trained(tmp_path, NARROW)
    moved = steps.learner.support.clone()
    steps.learner.read_metrics()  # the accumulators restart: update_acc[0] is the next loss
    recorder = Recorder(steps.learner)
    steps.prime()
    steps.update()
    call = recorder.calls[0]
    online, target = plain_copy(steps.learner, call["online"]), plain_copy(steps.learner, call["target"])
    for net in (online, target):
        net.support.copy_(moved)
    batch, generator = reference_inputs(steps.learner, call)
    ref = reference_update(online, target, batch, generator)
    assert not torch.equal(moved, configured(steps.learner))
    torch.testing.assert_close(steps.learner.update_acc[0].float(), ref.loss, rtol=1e-5, atol=1e-6)


def test_the_support_restarts_at_the_fold_boundary(tmp_path):
    spec = tiny_spec()
    spec = spec.model_copy(update={"agent": spec.agent.model_copy(update=NARROW)})
    trainer = WalkForwardTrainer(spec, synth(3_000, 0.3).bars, pipeline(), instrument(), tmp_path,
                                 CPU)
    first = trainer.start_fold(trainer.folds[0])
    report = trainer.train_fold(first)
    assert not torch.equal(first.learner.support, configured(first.learner))
    lines = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert first.epochs == lines and set(UPDATE_METRICS) <= set(lines[-1])
    assert lines[-1]["v_max"] == first.learner.support[-1].item()
    assert report.health[0].startswith("diverging (")  # most mass beyond even the widened ends
    assert report.verdict.endswith("; ".join(report.health))
    second = trainer.start_fold(trainer.folds[1]).learner
    assert torch.equal(second.support, configured(second))
    assert torch.equal(second.support_seen, torch.tensor([NARROW["v_min"], NARROW["v_max"]]))
