"""How much a search's best result says: the deflated Sharpe ratio and the probability of
backtest overfitting, both from the trials' validation returns only.

- Deflated Sharpe ratio (Bailey and Lopez de Prado 2014): the probabilistic Sharpe ratio of the
  chosen trial's returns against SR0, the Sharpe ratio the best of N zero-skill trials would
  reach by luck, given the variance V of the trials' Sharpe ratios:
  SR0 = sqrt(V) [(1 - gamma) Phi^-1(1 - 1/N) + gamma Phi^-1(1 - 1/(N e))].
  DSR near 1: the chosen Sharpe is unlikely to be the luck of the draw; near 0.5 or below: it is
  what N tries would give anyway.
- PBO by combinatorially symmetric cross-validation (Bailey, Borwein, Lopez de Prado and Zhu
  2017): cut the T x N matrix of the trials' returns into S blocks of rows; for every choice of
  S/2 blocks as in-sample (the rest out-of-sample) take the trial with the best in-sample
  Sharpe and its out-of-sample rank w in (0, 1); PBO is the share of splits where that trial
  ranks at or below the out-of-sample median (logit(w) <= 0). Near 0: in-sample choice carries
  over; near 0.5: the choice is noise; above: it is anti-informative.

Sharpe ratios here are per bar (not annualised), as both papers state them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, pairwise

import numpy as np

from foxhunt.metrics import expected_max_sharpe, psr

PBO_BLOCKS = 16
"""S: 16 blocks give C(16, 8) = 12,870 splits, the papers' choice."""


@dataclass(frozen=True)
class DeflatedSharpe:
    dsr: float | None  # P(true Sharpe > sr0); None where the returns carry no estimate
    sharpe: float  # the chosen trial's per-bar Sharpe
    sr0: float  # expected maximum per-bar Sharpe of n_trials zero-skill trials
    n_trials: int
    variance: float  # of the trials' per-bar Sharpe ratios
    n_obs: int
    skew: float
    kurtosis: float  # raw (3 for normal returns)

    def doc(self) -> dict[str, float | int | None]:
        return dict(self.__dict__)


def deflated_sharpe_ratio(sharpe: float, n_obs: int, skew: float, kurtosis: float,
                          n_trials: int, variance: float) -> DeflatedSharpe:
    """DSR of a per-bar Sharpe over `n_obs` returns with their skewness and raw kurtosis,
    chosen as the best of `n_trials` whose per-bar Sharpe ratios have `variance`."""
    sr0 = expected_max_sharpe(n_trials, variance)
    return DeflatedSharpe(psr(sharpe, n_obs, skew, kurtosis, sr0), sharpe, sr0, n_trials,
                          variance, n_obs, skew, kurtosis)


def deflated_sharpe_of(returns: np.ndarray, trial_sharpes: np.ndarray,
                       n_trials: int | None = None) -> DeflatedSharpe | None:
    """DSR of the chosen trial's `returns`; the variance is that of `trial_sharpes` (the
    finished trials' per-bar Sharpe ratios), N is `n_trials` (every trial tried, pruned and
    failed ones too; default: as many as `trial_sharpes`). None for fewer than 2 returns or
    constant returns."""
    r = np.asarray(returns, dtype=np.float64)
    sharpes = np.asarray(trial_sharpes, dtype=np.float64)
    sharpes = sharpes[np.isfinite(sharpes)]
    if r.size < 2 or r.max() == r.min():
        return None
    d = r - r.mean()
    m2 = float((d * d).mean())
    skew = float((d ** 3).mean()) / m2 ** 1.5
    kurt = float((d ** 4).mean()) / m2 ** 2
    sr = float(r.mean() / r.std(ddof=1))
    variance = float(sharpes.var(ddof=1)) if sharpes.size > 1 else 0.0
    n = max(n_trials or sharpes.size, 1)
    return deflated_sharpe_ratio(sr, r.size, skew, kurt, n, variance)


@dataclass(frozen=True)
class Overfitting:
    pbo: float
    logits: np.ndarray  # logit(w) of every split
    splits: int
    blocks: int
    n_trials: int
    n_obs: int

    def doc(self) -> dict[str, float | int]:
        return {"pbo": self.pbo, "splits": self.splits, "blocks": self.blocks,
                "n_trials": self.n_trials, "n_obs": self.n_obs,
                "logit_median": float(np.median(self.logits))}


def probability_of_overfitting(returns: np.ndarray, blocks: int = PBO_BLOCKS) -> Overfitting:
    """PBO by CSCV over `returns` [T, N] (T bars of N trials' returns, aligned in time).
    `blocks` (S) must be even; T must give every block at least 2 rows."""
    m = np.asarray(returns, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] < 2:
        raise ValueError(f"PBO needs returns of at least 2 trials as [T, N], got shape {m.shape}")
    if blocks < 2 or blocks % 2:
        raise ValueError(f"PBO needs an even number of blocks >= 2, got {blocks}")
    t, n = m.shape
    if t < 2 * blocks:
        raise ValueError(f"PBO with {blocks} blocks needs at least {2 * blocks} rows, got {t}")
    edges = np.linspace(0, t, blocks + 1).round().astype(int)
    sums = np.stack([m[a:b].sum(axis=0) for a, b in pairwise(edges)])  # [S, N]
    squares = np.stack([(m[a:b] ** 2).sum(axis=0) for a, b in pairwise(edges)])
    counts = np.diff(edges).astype(np.float64)
    chosen = np.zeros((math.comb(blocks, blocks // 2), blocks), dtype=bool)
    for row, combo in enumerate(combinations(range(blocks), blocks // 2)):
        chosen[row, list(combo)] = True
    is_sr = _sharpe(chosen.astype(np.float64), sums, squares, counts)
    oos_sr = _sharpe((~chosen).astype(np.float64), sums, squares, counts)
    best = np.argmax(is_sr, axis=1)
    picked = oos_sr[np.arange(best.size), best]
    # Rank 1..N out of sample (ties share the lower rank), w = rank / (N + 1).
    rank = (oos_sr < picked[:, None]).sum(axis=1) + 1
    w = rank / (n + 1.0)
    logits = np.log(w / (1.0 - w))
    return Overfitting(float((logits <= 0).mean()), logits, int(best.size), blocks, n, t)


def _sharpe(select: np.ndarray, sums: np.ndarray, squares: np.ndarray,
            counts: np.ndarray) -> np.ndarray:
    """Per-bar Sharpe (ddof=1) of each trial over the selected blocks: [splits, N]."""
    k = select @ counts
    s = select @ sums
    q = select @ squares
    mean = s / k[:, None]
    var = (q - k[:, None] * mean ** 2) / (k[:, None] - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sr = np.where(var > 0, mean / np.sqrt(np.maximum(var, 0.0)), 0.0)
    return sr
