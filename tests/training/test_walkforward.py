"""Walk-forward folds are ordered in time, purged, and never let test bars inform training."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.errors import ConfigError
from foxhunt.training.walkforward import WalkForwardConfig, WalkForwardSplit, fit_episode_len


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
    for a, b in itertools.pairwise(out):
        assert b.test.start >= a.test.stop  # test windows never overlap: each bar is tested once


def test_too_little_data_is_a_clear_error():
    with pytest.raises(ConfigError, match="too few for 5 folds"):
        WalkForwardSplit(WalkForwardConfig(folds=5, purge=5), n_bars=20).folds()


def test_ratios_must_sum_to_one():
    with pytest.raises(Exception, match="must equal 1"):
        WalkForwardConfig(train_ratio=0.5, val_ratio=0.2, test_ratio=0.2)


def test_too_little_data_names_the_fold_count_that_fits():
    split = WalkForwardSplit(WalkForwardConfig(folds=12, purge=10), n_bars=300, min_window=20)
    with pytest.raises(ConfigError) as info:
        split.folds()
    message = str(info.value)
    assert "\n" not in message
    fits = int(message.split("set [walkforward] folds = ")[1].split()[0])
    assert fits == 10  # 280 usable bars / (4 + k) per test bar >= 20
    WalkForwardSplit(WalkForwardConfig(folds=fits, purge=10), n_bars=300, min_window=20).folds()
    with pytest.raises(ConfigError, match=f"too few for {fits + 1} folds"):
        WalkForwardSplit(WalkForwardConfig(folds=fits + 1, purge=10), n_bars=300, min_window=20).folds()


def test_when_no_fold_count_fits_the_error_points_at_the_purge():
    with pytest.raises(ConfigError, match=r"lower \[walkforward\] purge \(now 108\)"):
        WalkForwardSplit(WalkForwardConfig(folds=2, purge=108), n_bars=220).folds()


def test_deploy_min_psr_is_a_probability():
    assert WalkForwardConfig().deploy_min_psr == 0.95
    for bad in (-0.1, 1.5):
        with pytest.raises(Exception, match="deploy_min_psr"):
            WalkForwardConfig(deploy_min_psr=bad)


@given(episode_len=st.integers(1, 5000), train_bars=st.integers(4, 5000))
def test_an_episode_that_does_not_fit_the_training_window_is_clipped_to_half_of_it(
        episode_len, train_bars):
    fitted, notice = fit_episode_len(episode_len, train_bars)
    assert fitted + 2 <= train_bars
    if episode_len + 2 <= train_bars:
        assert (fitted, notice) == (episode_len, None)
    else:
        assert fitted == train_bars // 2
        assert f"[env] episode_len = {episode_len}" in notice and f"<= {train_bars - 2}" in notice


def test_a_training_window_too_short_for_any_episode_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"training windows of 3 bars hold no episode"):
        fit_episode_len(8, 3)
