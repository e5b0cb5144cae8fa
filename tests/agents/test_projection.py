"""C51 projection: published Dopamine cases, hand-derived edge cases, and a scatter reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.agents.dqn.projection import project_with_weights, projection_weights

from .projection_reference import project_distribution


def project(p, r, d, z, dtype=torch.float64):
    p, r, d, z = (torch.as_tensor(x, dtype=dtype) for x in (p, r, d, z))
    return project_distribution(p, r, d, z).numpy()


# Dopamine's rainbow_agent_test.py ProjectDistributionTest projects weights on an arbitrary source
# support onto a target support. Every case whose source support is affine in the target support
# z (source = r + d * z) is reproduced here with its published expected output.
DOPAMINE_CASES = [
    # testProjectSingleIdenticalDistribution: source [0..4] onto [0..4]
    ([0, 1, 2, 3, 4], [0.1, 0.2, 0.1, 0.3, 0.3], 0.0, 1.0, [0.1, 0.2, 0.1, 0.3, 0.3]),
    # testProjectSingleDifferentDistribution: source [0..4] onto [3..7]
    ([3, 4, 5, 6, 7], [0.1, 0.2, 0.1, 0.3, 0.3], -3.0, 1.0, [0.7, 0.3, 0.0, 0.0, 0.0]),
    # testProjectFromNonMonotonicSupport: source [4, 3, 2, 1, 0] onto [3..7]
    ([3, 4, 5, 6, 7], [0.1, 0.2, 0.1, 0.3, 0.3], 7.0, -1.0, [0.9, 0.1, 0.0, 0.0, 0.0]),
    # testExampleFromCodeComments, first row: source [0, 2, 4, 6, 8] onto [4..8]
    ([4, 5, 6, 7, 8], [0.1, 0.6, 0.1, 0.1, 0.1], -8.0, 2.0, [0.8, 0.0, 0.1, 0.0, 0.1]),
    # testProjectBatchOfDifferentDistributions, rows 1 and 3: onto [3..7]
    ([3, 4, 5, 6, 7], [0.1, 0.2, 0.3, 0.2, 0.2], -6.0, 2.0, [0.3, 0.3, 0.0, 0.2, 0.2]),
    ([3, 4, 5, 6, 7], [0.1, 0.2, 0.3, 0.2, 0.2], 0.0, 1.0, [0.1, 0.2, 0.3, 0.2, 0.2]),
    # testProjectBatchOfDifferentDistributionsWithLargerDelta, first row: source [0, 2, .., 8]
    ([0, 4, 8, 12, 16], [0.1, 0.2, 0.2, 0.2, 0.3], 0.0, 0.5, [0.2, 0.4, 0.4, 0.0, 0.0]),
]


@pytest.mark.parametrize("support, probs, r, d, expected", DOPAMINE_CASES)
def test_dopamine_published_cases(support, probs, r, d, expected):
    np.testing.assert_allclose(project(probs, r, d, support), expected, atol=1e-6)


def test_dopamine_cases_as_one_batch_in_float32():
    rows = [c for c in DOPAMINE_CASES if c[0] == [3, 4, 5, 6, 7]]
    out = project(
        [c[1] for c in rows],
        [c[2] for c in rows],
        [c[3] for c in rows],
        [3, 4, 5, 6, 7],
        torch.float32,
    )
    np.testing.assert_allclose(out, [c[4] for c in rows], atol=1e-6)


Z = [-2.0, -1.0, 0.0, 1.0, 2.0]
P = [0.1, 0.2, 0.3, 0.25, 0.15]


def test_shift_by_whole_atoms_keeps_all_mass():
    # Tz = z + 1 lands on atoms (integer b): no l == u mass loss; Tz = 3 is clamped onto 2.
    np.testing.assert_allclose(project(P, 1.0, 1.0, Z), [0.0, 0.1, 0.2, 0.3, 0.4], atol=1e-12)


def test_terminal_puts_all_mass_at_the_return():
    np.testing.assert_allclose(project(P, 1.0, 0.0, Z), [0, 0, 0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(project(P, 0.5, 0.0, Z), [0, 0, 0.5, 0.5, 0], atol=1e-12)


def test_returns_beyond_the_support_go_to_the_end_atoms():
    np.testing.assert_allclose(project(P, 10.0, 0.9, Z), [0, 0, 0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(project(P, -10.0, 0.9, Z), [1, 0, 0, 0, 0], atol=1e-12)


def test_fractional_positions_split_mass_linearly():
    # Tz = 0.25 + 0.5 z = [-0.75, -0.25, 0.25, 0.75, 1.25]; each 0.2 splits 3:1 or 1:3.
    out = project([0.2] * 5, 0.25, 0.5, Z)
    np.testing.assert_allclose(out, [0.0, 0.2, 0.4, 0.35, 0.05], atol=1e-12)


def test_broadcasts_over_branches():
    probs = torch.softmax(torch.randn(4, 3, 11, dtype=torch.float64), -1)
    z = torch.linspace(-10, 10, 11, dtype=torch.float64)
    r, d = torch.randn(4, dtype=torch.float64) * 5, torch.rand(4, dtype=torch.float64)
    out = project_distribution(probs, r[:, None], d[:, None], z)
    for b in range(3):
        torch.testing.assert_close(out[:, b], project_distribution(probs[:, b], r, d, z))


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_per_sample_projection_equals_the_broadcast_one(device):
    """One return and discount per sample, shared by its branch and action distributions: the
    per-sample form (weights built once per sample, then applied) projects the same."""
    gen = torch.Generator().manual_seed(4)
    probs = torch.softmax(torch.randn(64, 3, 3, 51, generator=gen), -1)
    z = torch.linspace(-10, 10, 51)
    r = torch.randn(64, generator=gen) * 4
    d = torch.where(torch.rand(64, generator=gen) < 0.2, 0.0, 0.97)
    expected = project_distribution(probs, r[:, None, None], d[:, None, None], z)
    dev = torch.device(device)
    hat = projection_weights(r.to(dev), d.to(dev), z.to(dev))
    out = project_with_weights(probs.to(dev), hat).cpu()
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(out.sum(-1), torch.ones(64, 3, 3))


def scatter_reference(p, r, d, z):
    """The classic floor/ceil projection with np.add.at and the l == u fix, in float64."""
    batch, atoms = p.shape
    v_min, v_max = z[0], z[-1]
    dz = (v_max - v_min) / (atoms - 1)
    tz = np.clip(r[:, None] + d[:, None] * z[None, :], v_min, v_max)
    b = np.clip((tz - v_min) / dz, 0, atoms - 1)
    lo, hi = np.floor(b).astype(int), np.ceil(b).astype(int)
    m = np.zeros_like(p)
    rows = np.repeat(np.arange(batch), atoms)
    np.add.at(m, (rows, lo.ravel()), (p * (hi - b + (lo == hi))).ravel())
    np.add.at(m, (rows, hi.ravel()), (p * (b - lo)).ravel())
    return m


@st.composite
def projection_inputs(draw):
    atoms = draw(st.sampled_from([5, 11, 21, 51]))
    v_min = draw(st.floats(-20, -0.5))
    v_max = draw(st.floats(0.5, 20))
    batch = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    z = np.linspace(v_min, v_max, atoms)
    p = rng.dirichlet(np.full(atoms, draw(st.sampled_from([0.1, 1.0, 10.0]))), size=batch)
    d = rng.choice([0.0, 0.99**3, 1.0, rng.uniform(0, 1)], size=batch)
    dz = (v_max - v_min) / (atoms - 1)
    on_atom = dz * rng.integers(-atoms, atoms, size=batch)
    r = np.where(rng.random(batch) < 0.3, on_atom, rng.uniform(2 * v_min, 2 * v_max, size=batch))
    return p, r, d, z


@settings(max_examples=200, deadline=None)
@given(projection_inputs())
def test_matches_scatter_reference_and_conserves_mass(inputs):
    p, r, d, z = inputs
    out = project(p, r, d, z)
    np.testing.assert_allclose(out, scatter_reference(p, r, d, z), atol=1e-6)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-6)
    out32 = project(p, r, d, z, torch.float32)
    np.testing.assert_allclose(out32.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(out32, out, atol=2e-5)
