"""How much a search's best result says: the deflated Sharpe ratio and the probability of
backtest overfitting, both from the trials' validation returns only.

- Deflated Sharpe ratio (Bailey and Lopez de Prado 2014): `foxhunt.metrics.deflated_sharpe`
  (docs/metrics.md), with N counting every trial tried, pruned and failed ones too.
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

from foxhunt.metrics import deflated_sharpe as deflated_sharpe_of  # noqa: F401  (tune.study)

PBO_BLOCKS = 16
"""S: 16 blocks give C(16, 8) = 12,870 splits, the papers' choice."""


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
