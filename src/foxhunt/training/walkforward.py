"""Walk-forward folds: train, validation and test windows in time order, with purge gaps.

Fold i covers `[start_i, start_i + span)` where `span = train + purge + val + purge + test`, and
`start_i = i * step`. The purge gap keeps the last training bars (whose rewards and n-step
returns look `purge` bars ahead) from overlapping the window that judges them. The model is
selected on validation, and validation alone decides whether the fold deploys it or stays flat
(`deploy_min_psr`); the test window is read once, for the final report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
    deploy_min_psr: float = Field(
        default=0.95, ge=0, le=1,
        description="a fold deploys its agent only if the chosen epoch's validation returns "
        "beat deploy_rule's benchmark with at least this probability (P(true Sharpe > "
        "benchmark)); below it the fold deploys flat. 0 deploys every fold's agent",
    )
    deploy_rule: Literal["deflated", "confirm", "psr"] = Field(
        default="deflated",
        description="deflated: the benchmark is the Sharpe the best of the fold's epochs would "
        "show with no skill, from the spread of their validation Sharpes (deflated Sharpe "
        "ratio); confirm: the epoch is chosen on validation's first bars and must beat zero on "
        "its last deploy_confirm_share, which the choice never saw; psr: zero on all of "
        "validation, as if the chosen epoch had been the only one tried",
    )
    choose_from_last: float = Field(
        default=0.5, gt=0, le=1,
        description="the share of a fold's epochs, at its end, that its model is chosen from "
        "and that the deploy rule counts as candidates: the epochs before are learning's "
        "warm-up, whose poor validation Sharpes would read as luck to the deflated rule",
    )
    deploy_confirm_share: float = Field(
        default=0.5, gt=0, lt=1,
        description="deploy_rule confirm: the share of the validation window, at its end, kept "
        "from the choice of epoch to confirm it",
    )

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

    def sizes(self, folds: int) -> tuple[int, int, int]:
        """(train, val, test) bars per window when the data is cut into `folds` folds."""
        c = self.config
        usable = self.n_bars - self.first - 2 * c.purge
        # span = test * (train/test + val/test + 1); k folds need span + (k-1)*test bars
        per_test = (c.train_ratio + c.val_ratio) / c.test_ratio + 1 + (folds - 1)
        test = int(usable // per_test)
        train = int(round(test * c.train_ratio / c.test_ratio, 6))
        val = int(round(test * c.val_ratio / c.test_ratio, 6))
        return train, val, test

    def folds(self) -> list[Fold]:
        c = self.config
        train, val, test = self.sizes(c.folds)
        if min(train, val, test) < self.min_window:
            fits = next((k for k in range(c.folds - 1, 0, -1)
                         if min(self.sizes(k)) >= self.min_window), None)
            left = self.n_bars - self.first
            if left <= 0:
                raise ConfigError(
                    f"walk-forward: {self.n_bars} bars leave none to split: the first usable bar "
                    f"is {self.first} (the features' warm-up and the observation window); use "
                    "more data, or shorter [features] windows or [env] window")
            fix = (f"set [walkforward] folds = {fits} or fewer, or use more data" if fits else
                   f"lower [walkforward] purge (now {c.purge}) or use more data")
            raise ConfigError(
                f"walk-forward: {left} bars are too few for {c.folds} folds "
                f"(windows would be train={train}, val={val}, test={test} bars, "
                f"need >= {self.min_window} each); {fix}"
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


def fit_episode_len(episode_len: int, train_bars: int) -> tuple[int, str | None]:
    """The episode length the training env can use in a training window of `train_bars`, and a
    notice when it differs from `episode_len`. An episode needs `episode_len + 2` bars of the
    window; one that does not fit is clipped to half the window, so that episodes still start
    at many bars (a GPU profile's length is sized for long histories, not for a short sample)."""
    if episode_len + 2 <= train_bars:
        return episode_len, None
    fit = train_bars // 2
    if fit < 2:
        raise ConfigError(f"walk-forward: training windows of {train_bars} bars hold no episode; "
                          "set [walkforward] folds lower or use more data")
    return fit, (f"[env] episode_len = {episode_len} does not fit the shortest training window "
                 f"({train_bars} bars): clipped to {fit}; set [env] episode_len <= "
                 f"{train_bars - 2} to choose it yourself")
