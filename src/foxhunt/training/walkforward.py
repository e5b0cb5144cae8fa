"""Walk-forward folds: train, validation and test windows in time order, with purge gaps.

Fold i covers `[start_i, start_i + span)` where `span = train + purge + val + purge + test`, and
`start_i = i * step`. The purge gap keeps the last training bars (whose rewards and n-step
returns look `purge` bars ahead) from overlapping the window that judges them. The model is
selected on validation; the test window is read once, for the final report.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, model_validator

from foxhunt.configbase import StrictConfig
from foxhunt.errors import ConfigError


class WalkForwardConfig(StrictConfig):
    folds: int = Field(default=3, ge=1)
    train_ratio: float = Field(default=0.6, gt=0, description="of one fold's span, before purges")
    val_ratio: float = Field(default=0.2, gt=0)
    test_ratio: float = Field(default=0.2, gt=0)
    purge: int = Field(default=64, ge=0, description="bars dropped between consecutive windows")
    anchored: bool = Field(default=False, description="train windows all start at bar `first`")

    @model_validator(mode="after")
    def _ratios(self) -> WalkForwardConfig:
        if abs(self.train_ratio + self.val_ratio + self.test_ratio - 1.0) > 1e-9:
            raise ValueError("train_ratio + val_ratio + test_ratio must equal 1")
        return self


@dataclass(frozen=True)
class Window:
    """Half-open bar range [start, stop)."""

    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Fold:
    index: int
    train: Window
    val: Window
    test: Window


@dataclass(frozen=True)
class WalkForwardSplit:
    """Folds over bars `[first, n_bars)`; consecutive folds advance by one test window."""

    config: WalkForwardConfig
    n_bars: int
    first: int = 0
    min_window: int = 2

    def folds(self) -> list[Fold]:
        c = self.config
        usable = self.n_bars - self.first - 2 * c.purge
        # span = test * (train/test + val/test + 1); k folds need span + (k-1)*test bars
        per_test = (c.train_ratio + c.val_ratio) / c.test_ratio + 1 + (c.folds - 1)
        test = int(usable // per_test)
        train = int(round(test * c.train_ratio / c.test_ratio, 6))
        val = int(round(test * c.val_ratio / c.test_ratio, 6))
        if min(train, val, test) < self.min_window:
            raise ConfigError(
                f"walk-forward: {self.n_bars - self.first} bars are too few for {c.folds} folds "
                f"(windows would be train={train}, val={val}, test={test} bars, "
                f"need >= {self.min_window} each); use fewer folds or more data"
            )
        out = []
        for i in range(c.folds):
            start = self.first + i * test
            train_start = self.first if c.anchored else start
            tr = Window(train_start, start + train)
            va = Window(tr.stop + c.purge, tr.stop + c.purge + val)
            te = Window(va.stop + c.purge, va.stop + c.purge + test)
            out.append(Fold(i, tr, va, te))
        assert out[-1].test.stop <= self.n_bars
        return out
