"""The reference update (C51 and IQN heads): it learns known returns, takes double-DQN targets,
weights samples by their IS weights and masks unlabelled rows of the direction loss."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from foxhunt.agents.dqn import (
    AgentConfig,
    BranchingQNetwork,
    UpdateBatch,
    reference_update,
)
from foxhunt.agents.dqn.target import PolyakUpdate

from .projection_reference import project_distribution

OBS = 4


def tiny_problem(batch_per_state: int = 9):
    """State A ends with return 1.5 (Q = 1.5); state B loops to itself with reward 1 and
    discount 0.5 (Q = 1 / (1 - 0.5) = 2). Every action earns the same, so every Q is known."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.eye(OBS)[0], torch.eye(OBS)[1]
    n = batch_per_state
    obs = torch.cat([a.expand(n, OBS), b.expand(n, OBS)])
    actions = torch.randint(0, 3, (2 * n, 3), generator=g)
    returns = torch.cat([torch.full((n,), 1.5), torch.ones(n)])
    discounts = torch.cat([torch.zeros(n), torch.full((n,), 0.5)])
    labels = torch.cat([torch.ones(n, dtype=torch.long), torch.zeros(n, dtype=torch.long)])
    return UpdateBatch(obs, actions, returns, discounts, obs.clone(), torch.ones(2 * n), labels)


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_learns_the_analytical_q_values(head):
    torch.manual_seed(0)
    cfg = AgentConfig(hidden=64, head=head, iqn_taus=16, iqn_target_taus=16)
    online = BranchingQNetwork(OBS, cfg)
    target = copy.deepcopy(online)
    opt = torch.optim.Adam(online.parameters(), lr=3e-3)
    batch = tiny_problem()
    losses = []
    for _ in range(200):
        online.reset_noise()
        target.reset_noise()
        out = reference_update(online, target, batch)
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(online.parameters(), cfg.grad_clip)
        opt.step()
        PolyakUpdate(target, online, 0.1)()
        losses.append(out.metrics["q_loss"])
    assert torch.stack(losses[-20:]).mean() < 0.5 * torch.stack(losses[:20]).mean()
    q = online.eval().q_values(torch.eye(OBS)[:2])
    tol = 0.05 if head == "c51" else 0.15
    torch.testing.assert_close(q[0], torch.full((3, 3), 1.5), atol=tol, rtol=0)
    torch.testing.assert_close(q[1], torch.full((3, 3), 2.0), atol=tol, rtol=0)
    assert online.act(torch.eye(OBS)[:2]).shape == (2, 3)


def _set_branch_preferences(net: BranchingQNetwork, rows: dict[int, torch.Tensor]) -> None:
    """Zero the last layers so every state gives action a the atom logits rows[a]."""
    with torch.no_grad():
        net.heads.value.weight_mu.zero_()
        net.heads.value.bias_mu.zero_()
        net.heads.advantage.weight_mu.zero_()
        bias = torch.zeros(3, net.config.atoms)
        for a, row in rows.items():
            bias[a] = row
        net.heads.advantage.bias_mu.copy_(bias.flatten().expand(3, -1))


def test_double_dqn_uses_online_argmax_and_target_evaluation():
    torch.manual_seed(0)
    cfg = AgentConfig(hidden=16, noisy=False, aux_weight=0.0)
    atoms = cfg.atoms
    up, down = torch.linspace(0, 4, atoms), torch.linspace(4, 0, atoms)
    online, target = BranchingQNetwork(OBS, cfg), BranchingQNetwork(OBS, cfg)
    _set_branch_preferences(online, {0: up})
    _set_branch_preferences(target, {0: down, 2: up})
    obs = torch.randn(5, OBS)
    assert (online.q_values(obs).argmax(-1) == 0).all()
    assert (target.q_values(obs).argmax(-1) == 2).all()

    batch = UpdateBatch(obs, torch.zeros(5, 3, dtype=torch.long), torch.zeros(5), torch.ones(5),
                        obs, torch.ones(5), torch.full((5,), -1))
    out = reference_update(online, target, batch)
    q_target = target.q_values(obs)
    torch.testing.assert_close(out.metrics["target_q"], q_target[..., 0].mean())
    assert out.metrics["target_q"] < 0 < q_target[..., 2].mean()


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_importance_weights_scale_each_sample(head):
    torch.manual_seed(0)
    cfg = AgentConfig(hidden=16, head=head, aux_weight=0.0)
    online = BranchingQNetwork(OBS, cfg)
    target = copy.deepcopy(online)
    batch = tiny_problem(3)
    ones = batch.weight

    def run(weights):
        return reference_update(online, target, batch._replace(weight=weights),
                                torch.Generator().manual_seed(1))

    base, double = run(ones), run(2 * ones)
    torch.testing.assert_close(double.loss, 2 * base.loss)
    torch.testing.assert_close(double.priority, base.priority)
    one_hot = torch.zeros_like(ones)
    one_hot[4] = 1.0
    torch.testing.assert_close(run(one_hot).loss, base.priority[4] / len(ones))


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_outputs_are_detached_device_tensors(head):
    cfg = AgentConfig(hidden=16, head=head)
    online = BranchingQNetwork(OBS, cfg)
    target = copy.deepcopy(online)
    batch = tiny_problem(3)
    out = reference_update(online, target, batch)
    assert out.loss.dim() == 0 and out.loss.requires_grad
    assert out.priority.shape == (6,) and not out.priority.requires_grad
    assert (out.priority >= 0).all()
    assert set(out.metrics) == {"loss", "q_loss", "aux_loss", "mean_q", "target_q"}
    assert all(
        isinstance(v, torch.Tensor) and v.dim() == 0 and not v.requires_grad
        for v in out.metrics.values()
    )
    out.loss.backward()
    assert all(p.grad is None for p in target.parameters())
    assert all(p.grad is not None for p in online.parameters())


def test_aux_loss_ignores_unlabelled_rows():
    torch.manual_seed(0)
    cfg = AgentConfig(hidden=16, noisy=False, aux_weight=0.5)
    online = BranchingQNetwork(OBS, cfg)
    target = copy.deepcopy(online)
    batch = tiny_problem(3)
    obs, labels = batch.obs, torch.tensor([1, -1, 0, -1, 1, 0])

    out = reference_update(online, target, batch._replace(direction=labels))
    keep = labels >= 0
    expected = F.cross_entropy(online(obs).aux_logits[keep], labels[keep])
    torch.testing.assert_close(out.metrics["aux_loss"], expected)
    torch.testing.assert_close(out.loss, out.metrics["q_loss"] + 0.5 * expected)

    none = reference_update(online, target, batch._replace(direction=torch.full((6,), -1)))
    assert none.metrics["aux_loss"] == 0
    torch.testing.assert_close(none.loss, none.metrics["q_loss"])


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_the_bootstrap_target_of_a_stars_rows_is_the_textbook_one(head):
    """The heads' targets take the next distributions of any actions, [B, ..., K], with one
    return and discount per sample: on a*'s rows they are double DQN's target, and keeping a*'s
    row of every action's target gives the same."""
    from foxhunt.agents.dqn.losses import HEADS, take_action

    torch.manual_seed(3)
    b, br, a, k = 64, 3, 3, 51 if head == "c51" else 16
    raw = torch.randn(b, br, a, k)
    next_dist = F.log_softmax(raw, dim=-1) if head == "c51" else raw
    a_star = torch.randint(0, a, (b, br))
    returns = torch.randn(b) * 3
    discounts = torch.where(torch.rand(b) < 0.2, 0.0, 0.99**3)
    support = torch.linspace(-10, 10, 51) if head == "c51" else None
    h = HEADS[head]
    chosen = take_action(next_dist, a_star)
    target = h.targets(*h.target_operands(chosen, returns, discounts, support))
    assert target.shape == (b, br, k) and target.dtype == torch.float32
    if head == "c51":
        expected = project_distribution(chosen.exp(), returns[:, None], discounts[:, None],
                                        support)
        torch.testing.assert_close(target.sum(-1), torch.ones(b, br))
    else:
        expected = returns[:, None, None] + discounts[:, None, None] * chosen
    torch.testing.assert_close(target, expected, rtol=0, atol=1e-6)
    every = h.targets(*h.target_operands(next_dist, returns, discounts, support))
    torch.testing.assert_close(take_action(every, a_star), target, rtol=0, atol=1e-6)
