"""Deflated Sharpe ratio against the published example; PBO (CSCV) on constructed grids."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foxhunt.tune.stats import deflated_sharpe_of, deflated_sharpe_ratio, probability_of_overfitting

SR = 2.5 / math.sqrt(250)  # annual Sharpe 2.5 at 250 periods a year, per period


def test_dsr_matches_bailey_and_lopez_de_prado_2014():
    """Their numerical example: T = 1250, skew -3, kurtosis 10, V = 0.5 / 250."""
    d = deflated_sharpe_ratio(SR, 1250, -3.0, 10.0, n_trials=100, variance=0.5 / 250)
    assert d.sr0 == pytest.approx(0.113172, abs=1e-6)
    assert d.dsr == pytest.approx(0.9004, abs=1e-4)
    # The paper's break-even counts: about 46 trials (and 88 for normal returns) give DSR 0.95.
    assert deflated_sharpe_ratio(SR, 1250, -3.0, 10.0, 46, 0.5 / 250).dsr == pytest.approx(0.9505, abs=1e-4)
    assert deflated_sharpe_ratio(SR, 1250, 0.0, 3.0, 88, 0.5 / 250).dsr == pytest.approx(0.9505, abs=1e-4)


def test_more_trials_deflate_more():
    dsrs = [deflated_sharpe_ratio(SR, 1250, 0.0, 3.0, n, 0.5 / 250).dsr for n in (1, 10, 100, 1000)]
    assert dsrs == sorted(dsrs, reverse=True) and dsrs[0] > 0.999


def test_dsr_of_a_return_series_uses_its_moments_and_all_trials():
    r = np.random.default_rng(0).normal(0.001, 0.01, 2000)
    trials = np.random.default_rng(1).normal(0.0, 0.03, 20)
    few = deflated_sharpe_of(r, trials)
    many = deflated_sharpe_of(r, trials, n_trials=200)  # pruned and failed trials count too
    assert few.n_obs == 2000 and few.n_trials == 20 and many.n_trials == 200
    assert few.sharpe == pytest.approx(r.mean() / r.std(ddof=1))
    assert many.dsr < few.dsr
    assert deflated_sharpe_of(np.zeros(100), trials) is None  # a flat series has no estimate


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
