"""Rules chosen on validation: the z-score fade, fixed sides, and a choice blind to the test window."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.backtest import SmaCross, parse_strategy, run_backtest
from foxhunt.backtest.rule_search import choose_rule, default_rules, fold_baselines
from foxhunt.backtest.strategies import FixedSides, ZScoreFade, fade_sides
from foxhunt.data.series import Bars
from foxhunt.data.synth import SynthConfig, generate, oracle_positions
from foxhunt.env import EnvConfig
from foxhunt.errors import ConfigError
from foxhunt.training.walkforward import WalkForwardConfig, WalkForwardSplit

from .builders import instrument

PPY = 390 * 252


def _folds(n: int):
    return WalkForwardSplit(WalkForwardConfig(folds=2, purge=32), n, first=100).folds()


def test_zscore_matches_a_hand_computed_window():
    close = np.array([10.0, 11.0, 12.0, 11.0, 15.0, 9.0])
    z = ZScoreFade(3, 1.0).zscores(close)
    assert np.isnan(z[:2]).all()
    for t in range(2, 6):
        w = close[t - 2 : t + 1]
        assert z[t] == pytest.approx((close[t] - w.mean()) / w.std(ddof=1))


def test_zscore_fade_enters_past_the_threshold_and_leaves_at_the_mean():
    z = np.array([np.nan, np.nan, 1.2, 0.5, -0.1, -1.5, -0.5, np.nan, 0.2, 0.0, 2.5, 1.2, 0.4])
    assert fade_sides(z, 1.0).tolist() == [0, 0, -1, -1, 0, 1, 1, 1, 0, 0, -1, -1, -1]
    assert fade_sides(z, 1.0, 0.5).tolist()[10:] == [-1, -1, 0]


def test_zscore_fade_is_causal():
    close = 4000 + np.cumsum(np.random.default_rng(0).standard_normal(600)).round() * 0.25
    rule = ZScoreFade(50, 1.5)
    base = rule.table(close)
    later = close.copy()
    later[400:] += 37.0
    assert np.array_equal(rule.table(later)[:400], base[:400])
    assert (base[:, 0] == 1).any() and (base[:, 0] == 2).any()


def test_parse_and_validate_the_new_forms():
    assert parse_strategy("zfade:60,1.5") == ZScoreFade(60, 1.5)
    assert parse_strategy("zfade:60,2,0.5").exit == 0.5
    for bad in ("zfade:1,1", "zfade:60,0", "zfade:60,1,2", "zfade:60"):
        with pytest.raises(ConfigError):
            parse_strategy(bad)
    with pytest.raises(ConfigError):
        FixedSides(np.ones(5)).table(np.ones(6))


def test_fixed_sides_trade_what_they_are_given():
    m = generate(SynthConfig(n_bars=1500, seed=3, signal_strength=0.4))
    side = oracle_positions(m)
    (r,) = run_backtest(m.bars, instrument(), policies={"o": FixedSides(side)},
                        windows=[(100, 1400)], costs=False, device="cpu")
    assert np.array_equal(np.sign(r.position[1:-1]), side[100:1398].astype(float))
    assert r.total_pnl > 0


def test_the_choice_never_reads_the_test_window():
    m = generate(SynthConfig(n_bars=12_000, seed=2, family="trend"))
    fold = _folds(len(m.bars))[0]
    a = fold_baselines(m.bars, instrument(), fold, periods_per_year=PPY)
    cols = {k: (None if v is None else v.copy()) for k, v in m.bars.columns().items()}
    rng = np.random.default_rng(1)
    tail = slice(fold.val.stop, None)
    jump = np.round(rng.standard_normal(len(cols["close"][tail])).cumsum() * 8) * 0.25
    for k in ("open", "high", "low", "close"):
        cols[k][tail] = cols[k][tail][::-1] + jump
    changed = Bars(**cols)
    b = fold_baselines(changed, instrument(), fold, periods_per_year=PPY)
    assert a.chosen == b.chosen and a.val == b.val
    assert a.test["rule"]["sharpe"] != b.test["rule"]["sharpe"]


@pytest.mark.parametrize(("family", "kind"), [("trend", SmaCross), ("reversion", ZScoreFade)])
def test_known_answer_the_family_picks_its_rule(family, kind):
    m = generate(SynthConfig(n_bars=20_000, seed=1, family=family))
    fold = _folds(len(m.bars))[0]
    rules = default_rules()
    rule, scores = choose_rule(m.bars, instrument(), fold.val, rules, periods_per_year=PPY)
    assert isinstance(rule, kind) and scores[rule.label] == max(scores.values()) > 0
    res = fold_baselines(m.bars, instrument(), fold, rules, oracle_side=oracle_positions(m),
                         periods_per_year=PPY)
    assert res.chosen == rule.label
    assert set(res.test) == {"flat", "buy_and_hold", "rule", "oracle"}
    assert res.test["flat"]["sharpe"] == 0.0 and res.test["flat"]["trades"] == 0
    assert res.test["oracle"]["sharpe"] > 0
    (direct,) = run_backtest(m.bars, instrument(), policies={"r": rule},
                             windows=[(fold.test.start, fold.test.stop)], env_config=EnvConfig(),
                             periods_per_year=PPY, device="cpu")
    assert res.test["rule"]["total_pnl"] == pytest.approx(direct.total_pnl)


def test_bad_inputs_are_refused():
    m = generate(SynthConfig(n_bars=3_000, seed=1))
    fold = _folds(len(m.bars))[0]
    with pytest.raises(ConfigError):
        choose_rule(m.bars, instrument(), fold.val, [])
    with pytest.raises(ConfigError):
        choose_rule(m.bars, instrument(), fold.val, [SmaCross(5, 20), SmaCross(5, 20)])
    with pytest.raises(ConfigError):
        fold_baselines(m.bars.slice(0, fold.test.stop - 1), instrument(), fold)
