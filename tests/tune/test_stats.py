"""PBO (CSCV) on constructed grids (the deflated Sharpe ratio: tests/metrics)."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.tune.stats import probability_of_overfitting


def test_pbo_of_pure_noise_is_near_one_half():
    """N = 50 configurations of noise, T = 1600, S = 16 (the paper's setting): averaged over
    grids, the in-sample best lands at or below the out-of-sample median about half the time."""
    pbos = [probability_of_overfitting(np.random.default_rng(s).normal(0, 0.01, (1600, 50))).pbo
            for s in range(12)]
    assert 0.4 < float(np.mean(pbos)) < 0.6, pbos


def test_pbo_with_one_real_edge_is_low():
    m = np.random.default_rng(5).normal(0, 0.01, (1600, 50))
    m[:, 17] += 0.003  # a per-bar Sharpe of 0.3 in one configuration
    result = probability_of_overfitting(m)
    assert result.pbo < 0.05
    assert result.splits == 12_870 and result.n_trials == 50


def test_pbo_refuses_what_it_cannot_split():
    with pytest.raises(ValueError, match="at least 2 trials"):
        probability_of_overfitting(np.zeros((100, 1)))
    with pytest.raises(ValueError, match="even number of blocks"):
        probability_of_overfitting(np.zeros((100, 3)), blocks=5)
    with pytest.raises(ValueError, match="needs at least 32 rows"):
        probability_of_overfitting(np.zeros((20, 3)))
