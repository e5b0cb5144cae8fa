"""Walk-forward folds are ordered in time, purged, and never let test bars inform training."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.errors import ConfigError
from foxhunt.training.walkforward import WalkForwardConfig, WalkForwardSplit


def test_three_fold_example_by_hand():
    split = WalkForwardSplit(WalkForwardConfig(folds=3, purge=10), n_bars=1020)
    # usable = 1020 - 2*10 = 1000; per test bar: 0.6/0.2 + 0.2/0.2 + 1 + (3 - 1) = 7
    # test = 1000 // 7 = 142, train = 3 * 142 = 426, val = 142
    f0, f1, f2 = split.folds()
    assert (f0.train.start, f0.train.stop) == (0, 426)
    assert (f0.val.start, f0.val.stop) == (436, 578)
    assert (f0.test.start, f0.test.stop) == (588, 730)
    assert f1.train.start == 142 and f1.test.start == f0.test.start + 142
    assert f2.test.stop <= 1020


def test_anchored_training_grows_from_the_first_bar():
    folds = WalkForwardSplit(WalkForwardConfig(folds=3, anchored=True, purge=0), n_bars=600).folds()
    assert all(f.train.start == 0 for f in folds)
    assert [len(f.train) for f in folds] == sorted(len(f.train) for f in folds)


@given(
    n_bars=st.integers(200, 100_000),
    folds=st.integers(1, 6),
    purge=st.integers(0, 20),
    anchored=st.booleans(),
)
def test_windows_are_ordered_purged_and_inside_the_data(n_bars, folds, purge, anchored):
    cfg = WalkForwardConfig(folds=folds, purge=purge, anchored=anchored)
    try:
        out = WalkForwardSplit(cfg, n_bars=n_bars).folds()
    except ConfigError:
        return
    assert len(out) == folds
    for f in out:
        assert 0 <= f.train.start < f.train.stop
        assert f.val.start - f.train.stop == purge
        assert f.test.start - f.val.stop == purge
        assert f.val.start < f.val.stop <= f.test.start < f.test.stop <= n_bars
    for a, b in zip(out, out[1:]):
        assert b.test.start >= a.test.stop  # test windows never overlap: each bar is tested once


def test_too_little_data_is_a_clear_error():
    with pytest.raises(ConfigError, match="too few for 5 folds"):
        WalkForwardSplit(WalkForwardConfig(folds=5, purge=5), n_bars=20).folds()


def test_ratios_must_sum_to_one():
    with pytest.raises(Exception, match="must equal 1"):
        WalkForwardConfig(train_ratio=0.5, val_ratio=0.2, test_ratio=0.2)
