"""The Python API (`foxhunt.api`, re-exported by `foxhunt`): known answers on a small synthetic
market, the same figures as `foxhunt backtest`, one-line errors, and a lazy `import foxhunt`."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import foxhunt
from foxhunt.errors import ConfigError, DataError

from ..cli.test_cli import run_json

N_BARS = 2_400  # the features' rolling warm-up is ~1,540 bars: room for a policy's window
CAPITAL = 100_000.0
SYN = {"tick": 0.25, "point_value": 50.0, "commission": 2.25}


@pytest.fixture
def syn(capsys):
    """SYN one-minute bars in this test's FOXHUNT_HOME, stored as `foxhunt data synth` does."""
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", str(N_BARS), "--seed", "5")
    return foxhunt.load_bars("SYN", "1min")


# -- the package -------------------------------------------------------------------------------


def test_import_foxhunt_is_lazy():
    code = ("import sys, foxhunt; names = dir(foxhunt); heavy = {'torch', 'pandas', 'duckdb', "
            "'foxhunt.api'} & set(sys.modules); print(sorted(heavy), 'load_bars' in names)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True"]


def test_dir_and_all_list_the_api():
    from foxhunt import api

    assert foxhunt.__all__ == api.__all__
    assert set(foxhunt.__all__) <= set(dir(foxhunt))
    for name in foxhunt.__all__:
        assert getattr(foxhunt, name) is getattr(api, name)
        assert getattr(api, name).__doc__, f"{name} has no docstring"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        foxhunt.nope  # noqa: B018


def test_no_api_name_shadows_a_subpackage():
    """`foxhunt.backtest` and `foxhunt.report` stay the packages once they are imported (an API
    function of that name would be replaced by the module, or hide it from `mock.patch`)."""
    import foxhunt.backtest
    import foxhunt.report

    submodules = {m.name for m in pkgutil.iter_modules(foxhunt.__path__)}
    assert not submodules & set(foxhunt.__all__)
    assert callable(foxhunt.run_backtest) and hasattr(foxhunt.backtest, "run_backtest")


# -- bars --------------------------------------------------------------------------------------


def test_load_bars_is_a_utc_frame_of_bar_close_times(syn):
    from foxhunt.config import load_settings
    from foxhunt.data.store import MarketStore

    with MarketStore(load_settings().store_path, read_only=True) as store:
        stored = store.read_bars("SYN", "1min")
    assert list(syn.columns) == ["open", "high", "low", "close", "volume", "buy_volume",
                                 "sell_volume"]  # the flow columns where the series has them
    assert isinstance(syn.index, pd.DatetimeIndex) and str(syn.index.tz) == "UTC"
    assert syn.index.name == "ts" and len(syn) == N_BARS
    assert syn.index[0] == pd.Timestamp(int(stored.ts[0]), unit="ns", tz="UTC")
    assert np.array_equal(syn.close.to_numpy(), stored.close)
    assert syn.attrs == {"symbol": "SYN", "bars": "1min"}


def test_a_missing_series_is_one_line_naming_it_and_what_is_stored(syn):
    with pytest.raises(DataError) as exc:
        foxhunt.load_bars("SYN", "5min")
    message = str(exc.value)
    assert "\n" not in message and "SYN 5min" in message and "have: SYN 1min" in message


def test_an_empty_home_says_how_to_get_data(tmp_path):
    with pytest.raises(DataError, match="no market store here yet; import data first"):
        foxhunt.load_bars("ES", home=tmp_path)


def test_import_bars_stores_a_csv_and_returns_it(tmp_path, syn):
    path = tmp_path / "bars.csv"
    syn.iloc[:100].reset_index().assign(ts=lambda d: d.ts.astype("int64")).to_csv(path,
                                                                                 index=False)
    back = foxhunt.import_bars(path, "ES")
    assert back.attrs == {"symbol": "ES", "bars": "1min"}
    assert back.index.equals(syn.index[:100]) and np.array_equal(back.close, syn.close[:100])


# -- backtests ---------------------------------------------------------------------------------


def fill_cost(contracts: float, slippage_ticks: int = 1) -> float:
    return contracts * (SYN["commission"] + slippage_ticks * SYN["tick"] * SYN["point_value"])


def test_buy_and_hold_equity_is_close_to_close_arithmetic_with_costs(syn):
    result = foxhunt.run_backtest(syn, np.full(len(syn), 2))
    close, open_ = syn.close.to_numpy(), syn.open.to_numpy()
    pv = SYN["point_value"]
    # decided at bar 0's close, filled at bar 1's open (one tick against), marked at each close
    # and flattened at the last close (one tick against)
    expected = CAPITAL + 2 * pv * (close - open_[1]) - fill_cost(2)
    expected[0] = CAPITAL
    expected[-1] -= fill_cost(2)
    np.testing.assert_allclose(result.equity.to_numpy(), expected, rtol=0, atol=1e-6)
    assert result.equity.index.equals(syn.index)
    assert (np.diff(result.equity.to_numpy()[1:-1]) == 2 * pv * np.diff(close[1:-1])).all()
    assert len(result.trades) == 1 and result.trades.contracts[0] == 2
    assert result.trades.entry_ts[0] == syn.index[1]  # the bar whose open filled it
    assert result.metrics["costs_paid"] == pytest.approx(2 * fill_cost(2))
    returns = np.diff(expected) / CAPITAL  # each bar's money on the capital, compounded
    assert result.metrics["total_return"] == pytest.approx(np.prod(1 + returns) - 1, rel=1e-12)


def test_no_costs_means_no_commission_and_no_slippage(syn):
    result = foxhunt.run_backtest(syn, np.ones(len(syn)), costs=False)
    pv, close = SYN["point_value"], syn.close.to_numpy()
    assert result.equity.iloc[-1] == pytest.approx(CAPITAL + pv * (close[-1] - syn.open.iloc[1]))


def test_a_signal_is_decided_at_the_close_and_held_from_the_next_bar(syn):
    signal = pd.Series(np.random.default_rng(1).integers(-2, 3, len(syn)), index=syn.index)
    result = foxhunt.run_backtest(syn, signal, name="mine")
    held = result.position.to_numpy()
    assert held[0] == 0 and held[-1] == 0  # nothing before the first fill; the final flatten
    assert np.array_equal(held[1:-1], signal.to_numpy()[:-2])
    assert result.name == "mine" and result.raw.engine["mode"] == "direct"


@pytest.mark.parametrize("strategy", ["sma:10,30", "buy-and-hold"])
def test_the_api_gives_the_figures_of_foxhunt_backtest(capsys, syn, strategy):
    from foxhunt.backtest import SmaCross

    doc = run_json(capsys, "backtest", "SYN", "--strategy", strategy, "--device", "cpu")
    cli = doc["results"][0]
    by_name = foxhunt.run_backtest(syn, strategy)
    sides = (SmaCross(10, 30).sides(syn.close.to_numpy()) if strategy.startswith("sma")
             else np.ones(len(syn)))
    by_signal = foxhunt.run_backtest(syn, pd.Series(3 * sides, index=syn.index))  # 3: full size
    for result in (by_name, by_signal):
        assert len(result.trades) == cli["trades"]
        for key in ("total_return", "sharpe", "sharpe_per_bar", "max_drawdown", "costs_paid",
                    "win_rate", "sessions"):
            assert result.metrics[key] == pytest.approx(cli[key], rel=1e-12, abs=1e-12), key


def test_baselines_run_beside_on_the_same_bars_and_go_into_the_report(syn, tmp_path):
    result = foxhunt.run_backtest(syn, "sma:10,30", baselines=["buy-and-hold", "flat"])
    assert list(result.baselines) == ["buy-and-hold", "flat"]
    assert result.baselines["flat"].equity.eq(CAPITAL).all()
    assert all(b.equity.index.equals(result.equity.index) for b in result.baselines.values())
    page = foxhunt.write_report(result, tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "sma:10,30" in page and "buy-and-hold" in page


def test_start_and_end_bound_the_window_by_close_time(syn):
    start = str(syn.index[100].tz_convert(None))  # naive: UTC
    result = foxhunt.run_backtest(syn, "buy-and-hold", start=start, end=syn.index[-10])
    assert result.equity.index[0] == syn.index[100]
    assert result.equity.index[-1] == syn.index[-10]


@pytest.mark.parametrize(("signal", "message"), [
    (lambda n, idx: np.full(n, 0.5), "whole contracts; 0.5 at 2024-01-02 14:31:00+00:00 is"),
    (lambda n, idx: np.ones(n - 1), f"{N_BARS - 1} values for {N_BARS} bars"),
    (lambda n, idx: pd.Series(1, index=idx + pd.Timedelta("1min")), "align it first"),
    (lambda n, idx: np.arange(n) % 5, "4 position sizes [1, 2, 3, 4]"),
    (lambda n, idx: {"a": 1}, "cannot run a dict"),
])
def test_a_bad_signal_is_one_line(syn, signal, message):
    with pytest.raises(ConfigError, match=None) as exc:
        foxhunt.run_backtest(syn, signal(len(syn), syn.index))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_bars_without_a_symbol_ask_for_the_instrument(syn):
    bare = syn.copy()
    bare.attrs = {}
    with pytest.raises(ConfigError, match=r"instrument='ES'"):
        foxhunt.run_backtest(bare, "flat")
    assert foxhunt.run_backtest(bare, "flat", instrument="SYN").symbol == "SYN"


# -- the Gymnasium env and policies ------------------------------------------------------------


def test_make_env_reports_equity_as_capital_plus_pnl(syn):
    env = foxhunt.make_env(syn, env={"episode_len": 16}, capital=50_000.0)
    env.reset(seed=0)
    money = 0.0
    for _ in range(5):
        *_, info = env.step(9)  # long, size choice 0, no stop
        money += info["pnl"] - info["cost"]
    assert info["episode_pnl"] == pytest.approx(money)
    assert info["equity"] == pytest.approx(50_000.0 + money)


class Recorder:
    """A policy that goes long at its first decision and records what it saw."""

    def __init__(self):
        self.seen: list[np.ndarray] = []

    def __call__(self, obs: np.ndarray) -> int:
        self.seen.append(obs.copy())
        return 9


class FakeSB3:
    """What `policy_from_sb3` relies on: predict(obs, deterministic=True) -> (action, state)."""

    def predict(self, obs, deterministic=False):
        assert deterministic
        return np.array(9), None


def test_a_policy_sees_the_observations_make_env_builds(syn):
    env_settings = {"window": 3, "episode_len": 64}
    env = foxhunt.make_env(syn, env=env_settings)
    recorder = Recorder()
    start = syn.index[-100]
    result = foxhunt.run_backtest(syn, foxhunt.Policy(recorder, env=env.unwrapped.vec.config),
                                  start=start)
    first = int(syn.index.get_loc(start))
    obs, _ = env.reset(seed=0, options={"start": first})
    np.testing.assert_array_equal(recorder.seen[0], obs)
    assert len(recorder.seen) == 99  # one decision per bar but the last (the final flatten)
    sb3 = foxhunt.run_backtest(syn, foxhunt.policy_from_sb3(FakeSB3(), env), start=start)
    assert sb3.equity.equals(result.equity) and sb3.name == "sb3"
    assert result.position.iloc[1] == 3  # action 9: long, size choice 0 = 3 contracts


def test_a_bad_action_is_one_line(syn):
    with pytest.raises(ConfigError, match=r"policy action 27 is outside 0..26"):
        foxhunt.run_backtest(syn, lambda obs: 27, start=syn.index[-5])


# -- training ----------------------------------------------------------------------------------

TINY = {"env": {"window": 4, "episode_len": 32}, "agent": {"hidden": 32, "atoms": 11},
        "replay": {"capacity": 4096},
        "train": {"replay_ratio": 2.5, "learning_starts": 64, "batch_size": 32, "n_envs": 16,
                  "eval_windows": 4},
        "walkforward": {"purge": 8}}


def test_train_returns_the_run_and_its_checkpoint_backtests_and_reports(syn, tmp_path):
    bars = syn.iloc[:1_000]  # a DataFrame: trained from a temporary store
    run = foxhunt.train(bars, folds=1, epochs=1, updates_per_fold=5, device="cpu", seed=1,
                        out=tmp_path / "run", **TINY)
    assert run.run_dir == tmp_path / "run" and [f.fold for f in run.folds] == [0]
    assert {"test_sharpe", "deployed"} <= set(run.table()[0])
    test_start = run.folds[0].windows["test"][0]
    agent = foxhunt.run_backtest(bars, run.folds[0].checkpoint, name="agent",
                                 start=bars.index[test_start])
    assert agent.name == "agent" and agent.equity.index[0] == bars.index[test_start]
    page = foxhunt.write_report(run, tmp_path / "run.html", bars=bars).read_text()
    assert "fold 0 test" in page


def test_train_overrides_must_be_sections(syn):
    with pytest.raises(ConfigError, match=r"env= must be a dict of \[env\] keys"):
        foxhunt.train(syn, env=4)


def test_a_bad_setting_is_one_line_naming_it(syn):
    with pytest.raises(ConfigError) as exc:
        foxhunt.run_backtest(syn, "flat", env={"slippage_tick": 2})
    assert "\n" not in str(exc.value) and "'slippage_tick'" in str(exc.value)
    assert str(exc.value).startswith("env= [env]")
