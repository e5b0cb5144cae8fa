"""IS weights w_i = (N P(i))^-beta / max_j (N P(j))^-beta; beta anneals linearly from beta0 to 1."""

from __future__ import annotations

import pytest
import torch

from foxhunt.replay import PrioritizedReplay, ReplayConfig


def add_steps(rb: PrioritizedReplay, steps: int) -> None:
    g = torch.Generator().manual_seed(0)
    E, P = rb.n_envs, rb.pos_dim
    for t in range(steps):
        no = torch.zeros(E, dtype=torch.bool)
        rb.add(
            bar=torch.full((E,), t),
            pos_state=torch.rand(E, P, generator=g),
            action=torch.zeros(E, 3, dtype=torch.long),
            reward=torch.randn(E, generator=g),
            terminated=no,
            truncated=no,
            next_bar=torch.full((E,), t + 1),
            next_pos_state=torch.rand(E, P, generator=g),
        )


def expected_weights(rb: PrioritizedReplay, index: torch.Tensor, beta: float) -> torch.Tensor:
    """The paper's formula evaluated over the stored transitions, in float64."""
    stored = rb.size.item() * rb.n_envs
    mass = rb.priority_alpha[:stored].double()
    w = (stored * mass / mass.sum()) ** -beta
    return (w / w.max())[index]


def buffer(beta0: float = 0.4, anneal: int = 10) -> PrioritizedReplay:
    cfg = ReplayConfig(capacity=48, alpha=0.7, beta0=beta0, beta_anneal_steps=anneal)
    rb = PrioritizedReplay(cfg, n_envs=3, pos_dim=2, generator=torch.Generator().manual_seed(3))
    add_steps(rb, steps=9)  # 27 stored of 48
    rb.update_priorities(torch.arange(27), torch.linspace(0.5, 5.0, 27))
    return rb


def test_weights_match_the_formula_and_the_max_over_the_buffer_is_one():
    rb = buffer()
    batch = rb.sample(4096)
    assert torch.allclose(batch.weight.double(), expected_weights(rb, batch.index, 0.4), rtol=1e-5)
    assert batch.weight.max() <= 1.0
    # The lowest-priority stored transition (index 0) carries the maximal weight, exactly 1.
    assert (batch.index == 0).any()
    assert torch.all(batch.weight[batch.index == 0] == 1.0)


def test_beta_anneals_linearly_to_one_and_stays():
    rb = buffer(beta0=0.4, anneal=10)
    for call in range(25):
        beta = 0.4 + 0.6 * min(call / 10, 1.0)
        assert rb.beta().item() == pytest.approx(beta, abs=1e-6)
        batch = rb.sample(256)
        expected = expected_weights(rb, batch.index, beta)
        assert torch.allclose(batch.weight.double(), expected, rtol=1e-5)
    assert rb.beta().item() == 1.0


def test_zero_anneal_steps_means_beta_is_one_from_the_start():
    assert buffer(anneal=0).beta().item() == 1.0
