"""The mirrored market in normalised feature space: what the features would read had every log
price been negated (prices p -> c / p, highs and lows swapped) and buyers and sellers swapped.

Directional features (`FeatureSpec.mirror` = -1: returns, order flow, trend) change sign;
volatility, volume and time features do not. In the normaliser's coordinates a raw value x that
becomes -x reads z' = (-x - mean) / std = -z - 2 mean / std, clipped as the pipeline clips.
A policy that is good in a market is good, with long and short swapped, in its mirror, so a
mirrored transition is a valid sample of the same problem: training on both halves what the
network can learn from the training window's net drift alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from foxhunt.errors import DataError
from foxhunt.features.normalise import Normaliser
from foxhunt.features.specs import FeatureSpec


@dataclass(frozen=True)
class FeatureMirror:
    """z -> clip(sign * z + offset) per feature column."""

    sign: np.ndarray  # [F] +-1
    offset: np.ndarray  # [F]
    clip: float

    @classmethod
    def of(cls, specs: Sequence[FeatureSpec], normaliser: Normaliser) -> FeatureMirror:
        names = tuple(s.name for s in specs)
        if names != normaliser.names:
            raise DataError(f"feature mirror: the normaliser's {len(normaliser.names)} features "
                            f"are not the pipeline's {len(names)}")
        sign = np.array([s.mirror for s in specs], dtype=np.float64)
        offset = np.where(sign < 0, -2.0 * normaliser.mean / normaliser.std, 0.0)
        return cls(sign, offset, normaliser.clip)

    def apply(self, values: np.ndarray) -> np.ndarray:
        """Normalised features [..., F] as the mirrored market would show them."""
        return np.clip(values * self.sign + self.offset, -self.clip, self.clip).astype(values.dtype)

