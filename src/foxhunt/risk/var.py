"""Value at risk of the account's positions, on a window of returns the caller supplies.

The window is one row per period (a bar, a day) and one column per instrument: simple returns
of the price, aligned in time. With exposures w (signed money: contracts x price x point value)
the window's PnL scenarios are R @ w.

- historical VaR: the loss at `confidence` among those scenarios (the empirical quantile);
- parametric VaR: z(confidence) x sqrt(w' S w) - mu' w, with S and mu the window's covariance
  and mean (Gaussian returns).

Both are positive numbers of money (0 when the quantile is a gain). Estimates, so floats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import NormalDist

import numpy as np

from foxhunt.orders.errors import TradingError


class ReturnsWindow:
    def __init__(self, returns: Mapping[str, Sequence[float]], confidence: float):
        if not returns:
            raise TradingError("VaR: the returns window has no instruments")
        lengths = {len(r) for r in returns.values()}
        if len(lengths) != 1:
            raise TradingError(
                "VaR: every instrument's returns must cover the same periods; lengths "
                + ", ".join(f"{s} {len(r)}" for s, r in returns.items())
            )
        self.symbols = list(returns)
        self.index = {s: i for i, s in enumerate(self.symbols)}
        self.matrix = np.array([list(map(float, returns[s])) for s in self.symbols]).T
        if not np.isfinite(self.matrix).all():
            raise TradingError("VaR: the returns window holds a NaN or infinite return")
        self.periods = self.matrix.shape[0]
        self.confidence = confidence
        self.mean = self.matrix.mean(axis=0) if self.periods else np.zeros(len(self.symbols))
        self.cov = (
            np.atleast_2d(np.cov(self.matrix, rowvar=False))
            if self.periods > 1
            else np.zeros((len(self.symbols), len(self.symbols)))
        )
        self.z = NormalDist().inv_cdf(confidence)
        self._k = max(int(np.floor((1.0 - confidence) * self.periods)), 0)  # quantile's order

    def vector(self, exposures: Mapping[str, float]) -> np.ndarray:
        w = np.zeros(len(self.symbols))
        for sym, value in exposures.items():
            if value:
                w[self.index[sym]] = value
        return w

    def historical(self, exposures: Mapping[str, float]) -> float:
        """The loss exceeded in a fraction (1 - confidence) of the window's periods."""
        pnl = self.matrix @ self.vector(exposures)
        k = min(self._k, self.periods - 1)
        worst = np.partition(pnl, k)[k]
        return max(-float(worst), 0.0)

    def parametric(self, exposures: Mapping[str, float]) -> float:
        w = self.vector(exposures)
        sigma = float(np.sqrt(max(w @ self.cov @ w, 0.0)))
        return max(self.z * sigma - float(self.mean @ w), 0.0)

    def missing(self, exposures: Mapping[str, float]) -> list[str]:
        """Instruments with exposure but no returns in the window."""
        return [s for s, v in exposures.items() if v and s not in self.index]
