"""Prioritised sampling on the device, P(i) = (|delta_i| + eps)^alpha / sum_j (same)."""

from __future__ import annotations

import torch

from foxhunt.replay import PrioritizedReplay, ReplayConfig


def add_steps(rb: PrioritizedReplay, steps: int, seed: int = 0) -> None:
    """`steps` lock-step env steps of random transitions."""
    g = torch.Generator().manual_seed(seed)
    E, P = rb.n_envs, rb.pos_dim
    for t in range(steps):
        rb.add(
            bar=torch.full((E,), t),
            pos_state=torch.rand(E, P, generator=g),
            action=torch.randint(0, 3, (E, 3), generator=g),
            reward=torch.randn(E, generator=g),
            terminated=torch.rand(E, generator=g) < 0.1,
            truncated=torch.rand(E, generator=g) < 0.1,
            next_bar=torch.full((E,), t + 1),
            next_pos_state=torch.rand(E, P, generator=g),
        )


def draw_counts(rb: PrioritizedReplay, draws: int, batch: int = 1000) -> torch.Tensor:
    counts = torch.zeros(rb.capacity, dtype=torch.int64)
    for _ in range(draws // batch):
        counts += torch.bincount(rb.sample(batch).index, minlength=rb.capacity)
    return counts


def chi_square_p_value(observed: torch.Tensor, expected: torch.Tensor) -> float:
    """Upper tail of the chi-square goodness-of-fit statistic (df = cells - 1)."""
    observed, expected = observed.double(), expected.double()
    chi2 = ((observed - expected) ** 2 / expected).sum()
    df = torch.tensor(observed.numel() - 1, dtype=torch.float64)
    return torch.special.gammaincc(df / 2, chi2 / 2).item()


# 10 stored transitions (2 envs x 5 steps) in a buffer of 16: flat indices 10..15 never written.
TD = torch.tensor([0.0, 0.1, 0.5, 1.0, 2.0, 3.0, 0.0, 0.2, 4.0, 0.05])


def small_buffer(seed: int = 7) -> PrioritizedReplay:
    cfg = ReplayConfig(capacity=16, alpha=0.6, priority_eps=0.05)
    rb = PrioritizedReplay(cfg, n_envs=2, pos_dim=4, generator=torch.Generator().manual_seed(seed))
    add_steps(rb, steps=5)
    rb.update_priorities(torch.arange(10), TD)
    return rb


def test_sampling_frequencies_match_priorities_chi_square():
    rb = small_buffer()
    counts = draw_counts(rb, draws=100_000)
    mass = (TD + 0.05) ** 0.6  # (|delta| + eps)^alpha
    expected = 100_000 * mass / mass.sum()
    assert chi_square_p_value(counts[:10], expected) > 1e-3
    # The test has power: the wrong formula |delta|^alpha + eps is rejected by the same draws.
    wrong = TD**0.6 + 0.05
    assert chi_square_p_value(counts[:10], 100_000 * wrong / wrong.sum()) < 1e-3


def test_unwritten_slots_are_never_sampled():
    rb = small_buffer()
    counts = draw_counts(rb, draws=100_000)
    assert counts[10:].sum() == 0
    assert (counts[:10] > 0).all()


def test_prefix_sum_round_off_never_selects_past_the_newest_transition():
    rb = small_buffer()
    # u = 1 is where float round-off of u * total lands at (or past) the end of the prefix sum.
    u = torch.tensor([0.0, 0.5, 1.0 - 1e-16, 1.0, 1.0 + 1e-12], dtype=torch.float64)
    index = rb._draw(u)[0]
    assert index.min() >= 0 and index.max() <= 9
    assert index[-1] == 9 and index[-2] == 9


def test_new_transitions_get_the_current_max_priority():
    cfg = ReplayConfig(capacity=8, alpha=0.5, priority_eps=1e-6)
    rb = PrioritizedReplay(cfg, n_envs=2, pos_dim=3)
    add_steps(rb, steps=1)
    assert torch.equal(rb.priority_alpha[:2], torch.ones(2))  # the max priority starts at 1
    rb.update_priorities(torch.tensor([0, 1]), torch.tensor([3.0, 0.5]))
    rb.update_priorities(torch.tensor([0]), torch.tensor([0.1]))  # lowering one keeps the max
    add_steps(rb, steps=1)
    assert torch.allclose(rb.max_priority, torch.tensor(3.0 + 1e-6))
    assert torch.allclose(rb.priority_alpha[2:4], torch.full((2,), (3.0 + 1e-6) ** 0.5))


def test_update_priorities_changes_sampling():
    cfg = ReplayConfig(capacity=64, alpha=1.0)
    rb = PrioritizedReplay(cfg, n_envs=4, pos_dim=3, generator=torch.Generator().manual_seed(0))
    add_steps(rb, steps=10)
    before = draw_counts(rb, draws=10_000)
    assert before[:40].min() > 150  # all at max priority: uniform over the 40 stored
    rb.update_priorities(torch.arange(40), torch.where(torch.arange(40) == 17, 100.0, 0.01))
    after = draw_counts(rb, draws=10_000)
    assert after[17] > 0.95 * 10_000


def test_seeded_generator_makes_sampling_deterministic_on_cpu():
    def batches(seed: int) -> list:
        rb = PrioritizedReplay(ReplayConfig(capacity=64), n_envs=4, pos_dim=3,
                               generator=torch.Generator().manual_seed(seed))  # fmt: skip
        add_steps(rb, steps=12)
        out = []
        for _ in range(3):
            b = rb.sample(32)
            rb.update_priorities(b.index, b.ret)
            out.append(b)
        return out

    a, b, c = batches(1), batches(1), batches(2)
    for x, y in zip(a, b):
        for name in vars(x):
            assert torch.equal(getattr(x, name), getattr(y, name)), name
    assert not all(torch.equal(x.index, z.index) for x, z in zip(a, c))


def test_reset_forgets_everything_at_a_fold_boundary():
    rb = small_buffer()
    rb.sample(8)
    rb.reset()
    assert rb.size.item() == 0 and rb.cursor.item() == 0 and rb.sample_calls.item() == 0
    assert rb.max_priority.item() == 1.0 and rb.priority_alpha.sum().item() == 0.0
    add_steps(rb, steps=1, seed=99)  # the next fold's first step
    assert set(rb.sample(1000).index.tolist()) <= {0, 1}


def test_block_by_block_search_equals_one_prefix_sum_over_the_whole_buffer():
    """Many blocks, a partly written buffer and masses spanning six orders of magnitude: the
    two-level inverse CDF picks exactly what one prefix sum over every mass would."""
    rb = PrioritizedReplay(ReplayConfig(capacity=50_000, alpha=1.0), n_envs=100, pos_dim=3)
    add_steps(rb, steps=371)
    assert rb.priority_alpha.numel() // rb.block > 100  # really many blocks
    g = torch.Generator().manual_seed(3)
    stored = 371 * 100
    td = 10 ** (6 * torch.rand(stored, generator=g) - 3)
    rb.update_priorities(torch.arange(stored), td)
    u = torch.rand(20_000, generator=g, dtype=torch.float64)
    mass = rb.priority_alpha.double()
    cdf = mass.cumsum(0)
    expected = torch.searchsorted(cdf, u * cdf[-1], right=True)
    assert torch.equal(rb._draw(u)[0], expected)
