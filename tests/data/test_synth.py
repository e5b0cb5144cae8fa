"""Synthetic markets: deterministic, valid bars, and a planted edge that behaves as documented."""

import math

import numpy as np
import pytest

from foxhunt.backtest import SmaCross, run_backtest
from foxhunt.backtest.strategies import FixedSides, ZScoreFade
from foxhunt.data.instruments import InstrumentRegistry, Session
from foxhunt.data.series import Bars
from foxhunt.data.synth import (
    FAMILIES,
    SynthConfig,
    SynthMarket,
    _affine_scan,
    edge_strength,
    generate,
    ideal_oracle_sharpe,
    max_signal_strength,
    oracle_pnl,
    oracle_positions,
    oracle_sharpe,
)
from foxhunt.errors import ConfigError

N = 50_000


@pytest.fixture(scope="module")
def markets() -> dict[float, SynthMarket]:
    return {x: generate(SynthConfig(n_bars=N, seed=7, signal_strength=x)) for x in (0.0, 0.1, 0.3)}


def _body_returns(m: SynthMarket) -> np.ndarray:
    return np.log(m.bars.close / m.bars.open)


def test_same_config_same_market_and_seeds_differ():
    cfg = SynthConfig(n_bars=5_000, seed=11, signal_strength=0.2)
    a, b = generate(cfg), generate(cfg)
    for name, col in a.bars.columns().items():
        assert np.array_equal(col, b.bars.columns()[name]), name
    assert np.array_equal(a.signal, b.signal)
    c = generate(cfg.model_copy(update={"seed": 12}))
    assert not np.array_equal(a.bars.close, c.bars.close)
    # Each ingredient has its own random stream: changing X changes returns, not the noise.
    d = generate(cfg.model_copy(update={"signal_strength": 0.0}))
    for name in ("signal", "sigma", "regime", "session"):
        assert np.array_equal(getattr(a, name), getattr(d, name)), name
    assert not np.array_equal(a.bars.close, d.bars.close)


def test_mapping_config_is_validated():
    assert len(generate({"n_bars": 100, "seed": 1}).bars) == 100
    for bad in (
        {"n_bars": 1},
        {"n_bars": 100, "signal_strength": -0.1},
        {"n_bars": 100, "garch_alpha": 0.2, "garch_beta": 0.85},
        {"n_bars": 100, "bar_seconds": 7},
        {"n_bars": 100, "regime_vol": (1.0, 2.0)},
        {"n_bars": 100, "start": "not a time"},
        {"n_bars": 100, "minute_vol": float("inf")},
        {"n_bars": 100, "signal_strength": max_signal_strength(0.9)},
        {"n_bars": 100, "colour": "red"},
    ):
        with pytest.raises(ConfigError):
            generate(bad)


def test_bars_are_valid_on_the_tick_grid(markets):
    b = markets[0.3].bars
    assert isinstance(b, Bars) and len(b) == N and b.has_flow
    assert np.all(np.diff(b.ts) > 0)
    assert b.ts[0] == np.datetime64("2024-01-02T14:31", "ns").astype(np.int64)
    for col in (b.open, b.high, b.low, b.close):
        assert np.array_equal(col / 0.25, np.rint(col / 0.25))
        assert np.all(col > 0)
    assert np.all(b.high >= np.maximum(b.open, b.close))
    assert np.all(b.low <= np.minimum(b.open, b.close))
    assert np.all(b.volume >= 1) and np.array_equal(b.volume, np.rint(b.volume))
    assert np.all(b.buy_volume >= 0) and np.all(b.sell_volume >= 0)
    assert np.array_equal(b.buy_volume + b.sell_volume, b.volume)
    # Inside a session the next bar opens where the last one closed.
    inside = ~markets[0.3].after_break[1:]
    assert np.array_equal(b.open[1:][inside], b.close[:-1][inside])


def test_sessions_skip_weekends():
    m = generate(SynthConfig(n_bars=390 * 10))
    opens = m.bars.ts[np.r_[True, m.after_break[1:]]] - 60 * 1_000_000_000
    days = opens.astype("datetime64[ns]").astype("datetime64[D]")
    weekday = (days.astype(np.int64) + 3) % 7
    assert len(opens) == 10 and np.all(weekday < 5)
    assert np.all((opens - days.astype("datetime64[ns]").astype(np.int64)) == 870 * 60 * 10**9)


def test_null_market_has_no_oracle_edge(markets):
    pnl = oracle_pnl(markets[0.0])
    t_stat = pnl.mean() / pnl.std(ddof=1) * math.sqrt(len(pnl))
    assert abs(t_stat) < 3


def test_oracle_sharpe_grows_with_signal_strength(markets):
    s0, s1, s3 = (oracle_sharpe(markets[x]) for x in (0.0, 0.1, 0.3))
    assert s0 < s1 < s3
    assert s3 > 0.15
    assert 0.6 * ideal_oracle_sharpe(0.3) < s3 < ideal_oracle_sharpe(0.3)
    assert oracle_sharpe(markets[0.3], cost_per_trade_points=0.25) < s3
    with pytest.raises(ConfigError):
        oracle_sharpe(markets[0.3], cost_per_trade_points=-1.0)


def test_oracle_follows_the_signal_and_fill_rules(markets):
    m = markets[0.3]
    p = oracle_positions(m)
    assert set(np.unique(p)) <= {-1, 0, 1}
    assert p[-1] == 0
    assert np.all(p[:-2][m.after_break[2:]] == 0)
    held = p != 0
    assert np.array_equal(p[held], np.sign(m.signal[held]))


def test_regression_recovers_the_planted_slope(markets):
    x = 0.3
    m = markets[x]
    r = _body_returns(m)
    s, sigma_next = m.signal[:-1], m.sigma[1:]
    slope = np.polyfit(s, r[1:], 1)[0]
    # OLS limit is X E[sigma_{t+1} s_t^2] / E[s_t^2]: X times a mean sigma tilted slightly
    # towards bars after a large shock (both sigma_{t+1} and s_t move with eps_t).
    assert slope == pytest.approx(x * np.mean(sigma_next * s * s) / np.mean(s * s), rel=0.08)
    assert slope == pytest.approx(x * sigma_next.mean(), rel=0.2)
    u = r / m.sigma
    assert np.polyfit(m.signal[:-1], u[1:], 1)[0] == pytest.approx(x, abs=0.02)
    assert abs(np.polyfit(markets[0.0].signal[:-1], _body_returns(markets[0.0])[1:], 1)[0]) < (
        0.02 * m.sigma.mean()
    )


def test_signal_is_revealed_by_past_bars(markets):
    """s_t is the EMA (decay phi - c X) of vol-normalised bar returns, even after rounding."""
    x, phi = 0.3, 0.9
    m = markets[x]
    c = math.sqrt(1 - phi**2)
    u = _body_returns(m) / m.sigma
    s_hat = _affine_scan(np.full(N, phi - c * x), c * u, 0.0)
    assert np.corrcoef(s_hat[50:], m.signal[50:])[0, 1] > 0.98


def test_volatility_clusters(markets):
    a = np.abs(_body_returns(markets[0.0]))
    assert np.corrcoef(a[1:], a[:-1])[0, 1] > 0.2
    garch_only = generate(
        SynthConfig(
            n_bars=N,
            seed=3,
            regime_vol=(1.0,),
            regime_drift=(0.0,),
            regime_duration=(1.0,),
            intraday_vol_amplitude=0.0,
            start_price=1e6,
        )
    )
    a = np.abs(_body_returns(garch_only))
    assert np.corrcoef(a[1:], a[:-1])[0, 1] > 0.05


def test_intraday_u_shape(markets):
    m = markets[0.0]
    minute = np.arange(N) % 390
    edge = (minute < 30) | (minute >= 360)
    midday = (minute >= 150) & (minute < 240)
    a = np.abs(_body_returns(m))
    assert a[edge].mean() > 1.5 * a[midday].mean()
    assert m.bars.volume[edge].mean() > 1.5 * m.bars.volume[midday].mean()


def test_regimes_switch_and_occupy_expected_shares(markets):
    summary = markets[0.0].summary()
    occ = np.array(summary["regime_occupancy"])
    assert occ.sum() == pytest.approx(1.0) and np.all(occ > 0)
    assert np.count_nonzero(np.diff(markets[0.0].regime)) > 5
    assert summary["bars"] == N and summary["first_ts"] < summary["last_ts"]
    assert summary["oracle_sharpe"] == pytest.approx(oracle_sharpe(markets[0.0]))


def test_affine_scan_matches_the_recurrence():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-0.99, 0.99, 1_000), rng.standard_normal(1_000)
    x, want = 0.5, np.empty(1_000)
    for i in range(1_000):
        x = a[i] * x + b[i]
        want[i] = x
    assert np.allclose(_affine_scan(a, b, 0.5), want, rtol=1e-9, atol=1e-9)


# -- market families ----------------------------------------------------------------------------

FAMILY_BARS = 60_000
SYNTH_SESSION = Session(tz="UTC", open="14:30", close="21:00")


@pytest.fixture(scope="module")
def families() -> dict[str, SynthMarket]:
    return {f: generate(SynthConfig(n_bars=FAMILY_BARS, seed=5, family=f,
                                    signal_strength=0.3 if f == "ar" else 0.0))
            for f in FAMILIES}


def _gross_t(m: SynthMarket, policy) -> float:
    """t-statistic of the per-bar PnL of `policy` over the whole market, without costs, through
    the backtester's fills (decide at a close, fill at the next open)."""
    inst = InstrumentRegistry.load().get("SYN").model_copy(update={"session": SYNTH_SESSION})
    (r,) = run_backtest(m.bars, inst, policies={"p": policy}, costs=False, device="cpu")
    pnl = r.pnl[1:]
    return float(pnl.mean() / pnl.std(ddof=1) * math.sqrt(len(pnl)))


SMA = SmaCross(20, 200)
FADE = ZScoreFade(200, 1.5)


def _oracle(m: SynthMarket) -> FixedSides:
    return FixedSides(oracle_positions(m), label="oracle")


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_reproducible_from_its_seed(family):
    cfg = SynthConfig(n_bars=3_000, seed=4, family=family)
    a, b = generate(cfg), generate(cfg)
    for name, col in a.bars.columns().items():
        assert np.array_equal(col, b.bars.columns()[name]), name
    for name in ("signal", "drift", "deviation", "reverting"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert not np.array_equal(a.bars.close, generate(cfg.model_copy(update={"seed": 5})).bars.close)


def test_families_share_the_texture_streams(families):
    """Same seed, other family: same timestamps, volatility regimes and sigma; other prices."""
    ar = families["ar"]
    for f in FAMILIES:
        m = families[f]
        assert np.array_equal(m.bars.ts, ar.bars.ts) and np.array_equal(m.sigma, ar.sigma), f
        assert np.array_equal(m.regime, ar.regime), f
    assert not np.array_equal(families["trend"].bars.close, families["reversion"].bars.close)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_makes_valid_bars(families, family):
    m = families[family]
    b = m.bars
    assert len(b) == FAMILY_BARS and b.has_flow
    assert np.all(np.diff(b.ts) > 0)
    for col in (b.open, b.high, b.low, b.close):
        assert np.array_equal(col / 0.25, np.rint(col / 0.25)) and np.all(col > 0)
    assert np.all(b.high >= np.maximum(b.open, b.close))
    assert np.all(b.low <= np.minimum(b.open, b.close))
    assert np.all(b.volume >= 1) and np.array_equal(b.buy_volume + b.sell_volume, b.volume)
    inside = ~m.after_break[1:]
    assert np.array_equal(b.open[1:][inside], b.close[:-1][inside])
    assert np.all(np.isfinite(m.signal))
    assert m.summary()["family"] == family


def test_family_options_are_validated():
    assert generate({"n_bars": 100, "family": "trend"}).config.regime_drift == (0.0, 0.0, 0.0)
    assert generate({"n_bars": 100, "family": "garch_noise",
                     "regime_vol": (1.0,), "regime_duration": (1.0,)}).config.regime_drift == (0.0,)
    assert generate({"n_bars": 100}).config.regime_drift == (0.0, 0.006, -0.025)
    for bad in (
        {"n_bars": 100, "family": "momentum"},
        {"n_bars": 100, "family": "trend", "signal_strength": 0.2},
        {"n_bars": 100, "family": "regime", "switch_duration": (0.5, 100.0)},
        {"n_bars": 100, "family": "reversion", "reversion_share": 1.5},
        {"n_bars": 100, "family": "trend", "trend_half_life": 0.0},
    ):
        with pytest.raises(ConfigError):
            generate(bad)


def test_trend_drift_has_the_configured_size_and_half_life(families):
    m, cfg = families["trend"], families["trend"].config
    assert m.drift.std() == pytest.approx(cfg.trend_strength, rel=0.25)
    h = int(cfg.trend_half_life)
    assert np.corrcoef(m.drift[h:], m.drift[:-h])[0, 1] == pytest.approx(0.5, abs=0.15)
    assert not m.reverting.any() and not m.deviation.any()


@pytest.mark.parametrize("family", ["trend", "reversion", "regime"])
def test_signal_predicts_the_next_normalised_return_one_for_one(families, family):
    """signal_t is E[u_{t+1}] given the hidden state (up to sigma_t / sigma_{t+1} and a state
    switch), so the OLS slope of u_{t+1} on it is 1."""
    m = families[family]
    u = _body_returns(m) / m.sigma
    assert np.polyfit(m.signal[:-1], u[1:], 1)[0] == pytest.approx(1.0, abs=0.25)


def test_trend_rewards_moving_average_crosses_and_punishes_fades(families):
    m = families["trend"]
    assert _gross_t(m, SMA) > 4
    assert _gross_t(m, FADE) < -4
    oracle = oracle_sharpe(m)
    ideal = ideal_oracle_sharpe(edge_strength(m.config))
    assert 0.6 * ideal < oracle < ideal


def test_reversion_rewards_fades_and_punishes_moving_average_crosses(families):
    m = families["reversion"]
    assert _gross_t(m, FADE) > 4
    assert _gross_t(m, SMA) < -4
    assert m.reverting.all() and not m.drift.any()
    oracle = oracle_sharpe(m)
    ideal = ideal_oracle_sharpe(edge_strength(m.config))
    assert 0.6 * ideal < oracle < ideal


def test_regime_switches_between_trend_and_reversion(families):
    m = families["regime"]
    share = m.reverting.mean()
    assert 0.25 < share < 0.75 and np.count_nonzero(np.diff(m.reverting.astype(int))) >= 4
    assert not m.deviation[~m.reverting].any()
    assert oracle_sharpe(m) > 0.6 * ideal_oracle_sharpe(edge_strength(m.config))
    u = _body_returns(m) / m.sigma
    trend_bars = ~m.reverting[:-1] & ~m.reverting[1:]
    rev_bars = m.reverting[:-1] & m.reverting[1:]
    assert np.polyfit(m.drift[:-1][trend_bars], u[1:][trend_bars], 1)[0] > 0.7
    assert np.polyfit(m.signal[:-1][rev_bars], u[1:][rev_bars], 1)[0] > 0.7


def test_garch_noise_has_nothing_to_find(families):
    m = families["garch_noise"]
    assert edge_strength(m.config) == 0.0
    for policy in (SMA, FADE, SmaCross(5, 20), ZScoreFade(60, 1.0), _oracle(m)):
        assert abs(_gross_t(m, policy)) < 3, policy.label
    a = np.abs(_body_returns(m))
    assert np.corrcoef(a[1:], a[:-1])[0, 1] > 0.2


def test_ar_oracle_is_clearly_positive_through_the_backtester(families):
    m = families["ar"]
    assert _gross_t(m, _oracle(m)) > 20
