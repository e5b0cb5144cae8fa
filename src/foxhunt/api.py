"""The Python API: load bars, backtest a signal or a policy, build the Gymnasium env, train, and
write the HTML report, in a few calls and with pandas in and out.

    import foxhunt
    foxhunt.load_sample()                                # the bundled ES trades -> the store
    bars = foxhunt.load_bars("ES", "1min")               # DataFrame, UTC bar-close index
    fast, slow = bars.close.rolling(10).mean(), bars.close.rolling(30).mean()
    result = foxhunt.run_backtest(bars, (fast > slow).astype(int))   # long 1 contract when fast > slow
    result.metrics["sharpe"], result.equity.iloc[-1], result.trades.head()
    foxhunt.write_report(result, "report.html")

Everything here composes the layers below it (data store, backtest engine and fill model,
Gymnasium wrapper, walk-forward trainer, report); nothing below imports this module, and no
number is computed here that those layers do not compute for the CLI too: a signal backtested
here and `foxhunt backtest --strategy` of the same rule give the same figures.

Settings come from FOXHUNT_HOME (`home=` points elsewhere): the store, instruments.toml and
config.toml, exactly as the CLI reads them.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import pandas as pd
import torch

from foxhunt import __all__ as API_NAMES  # listed there, so `import foxhunt` need not import us
from foxhunt.backtest import (
    TRADE_COLUMNS,
    PolicySpec,
    TablePolicy,
    checkpoint_policy,
    parse_strategy,
    report_series,
)
from foxhunt.backtest import BacktestResult as EngineResult
from foxhunt.backtest import run_backtest as engine_backtest
from foxhunt.backtest.strategies import GreedyAgent
from foxhunt.config import DataConfig, ResolvedSettings, load_settings
from foxhunt.configbase import StrictConfig, validate_config
from foxhunt.data.instruments import Instrument, InstrumentRegistry
from foxhunt.data.readers import infer_bar_spec
from foxhunt.data.series import Bars, BarSpec
from foxhunt.data.store import MarketStore
from foxhunt.env.actions import N_ACTIONS, contracts_for, unflatten_actions
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import CostModel
from foxhunt.env.market import MarketTensors
from foxhunt.env.observation import ObservationSpec
from foxhunt.errors import ConfigError, DataError
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.metrics import periods_per_year

if TYPE_CHECKING:
    import typer

    from foxhunt.env.gym_wrapper import TradingEnv
    from foxhunt.training.trainer import RunResult


__all__ = list(API_NAMES)
M = TypeVar("M", bound=StrictConfig)
PRICE_COLUMNS = ("open", "high", "low", "close", "volume")
FLOW_COLUMNS = ("buy_volume", "sell_volume")
DEFAULT_CAPITAL = 100_000.0
"""The account a backtest's equity and returns are measured on; the trainer's default too."""


# -- settings and bars -------------------------------------------------------------------------


def _settings(home: str | Path | None) -> ResolvedSettings:
    """FOXHUNT_HOME's settings (or `home`'s), read the way the CLI reads them."""
    return load_settings(home=None if home is None else Path(home).expanduser())


def _instrument(resolved: ResolvedSettings, instrument: str | Instrument) -> Instrument:
    if isinstance(instrument, Instrument):
        return instrument
    return InstrumentRegistry.load(resolved.instruments_file).get(instrument)


def _cli_context(resolved: ResolvedSettings) -> typer.Context:
    """A root context carrying `resolved`, so the CLI's builders (`run_training`, the bundled
    sample's loader) run here with these settings instead of being copied."""
    import typer
    import typer.core

    from foxhunt.cli.common import Invocation

    invocation = Invocation()
    invocation.settings = resolved  # the cached property's value: no second settings read
    return typer.Context(typer.core.TyperCommand("foxhunt"), obj=invocation)


def _frame(bars: Bars, symbol: str, spec: BarSpec | str) -> pd.DataFrame:
    index = pd.DatetimeIndex(pd.to_datetime(bars.ts, unit="ns", utc=True), name="ts")
    cols = {k: v for k, v in bars.columns().items() if k != "ts" and v is not None}
    frame = pd.DataFrame(cols, index=index)
    frame.attrs.update(symbol=symbol, bars=str(spec))
    return frame


def _to_ns(index: pd.Index, what: str) -> np.ndarray:
    """Int64 ns UTC of a DatetimeIndex; naive times are taken as UTC."""
    if not isinstance(index, pd.DatetimeIndex):
        raise DataError(f"{what}: the index must be a DatetimeIndex of bar close times "
                        f"(got {type(index).__name__}); use load_bars() or set_index('ts')")
    if index.tz is None:
        index = index.tz_localize("UTC")
    return np.asarray(index.tz_convert("UTC").as_unit("ns").asi8, dtype=np.int64)


def _bars(data: pd.DataFrame | Bars) -> Bars:
    """A DataFrame as `load_bars` returns it (or any with a bar-close DatetimeIndex and the
    OHLCV columns) as the engine's column arrays."""
    if isinstance(data, Bars):
        return data
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"bars must be a pandas DataFrame (see foxhunt.load_bars), got "
                        f"{type(data).__name__}")
    missing = [c for c in PRICE_COLUMNS if c not in data.columns]
    if missing:
        raise DataError(f"bars: missing column(s) {', '.join(missing)}; need "
                        f"{', '.join(PRICE_COLUMNS)}")
    flow = {c: data[c].to_numpy() for c in FLOW_COLUMNS if c in data.columns}
    if len(flow) == 1:
        flow = {}
    return Bars(ts=_to_ns(data.index, "bars"),
                **{c: data[c].to_numpy() for c in PRICE_COLUMNS}, **flow)


def _spec_of(data: pd.DataFrame | Bars, bars: Bars) -> BarSpec:
    """The series' bar spec: what `load_bars` recorded in `attrs`, else inferred from spacing."""
    text = getattr(data, "attrs", {}).get("bars")
    return BarSpec.parse(text) if text else infer_bar_spec(bars.ts)


def _symbol_of(data: Any, instrument: str | Instrument | None, what: str) -> str | Instrument:
    if instrument is not None:
        return instrument
    symbol = getattr(data, "attrs", {}).get("symbol")
    if not symbol:
        raise ConfigError(f"{what}: say which instrument these bars are, e.g. "
                          f"{what}(..., instrument='ES') (bars from load_bars() carry it)")
    return symbol


@dataclass(frozen=True)
class _Series:
    """Bars resolved for one call: the arrays, their instrument, spec and settings."""

    bars: Bars
    instrument: Instrument
    spec: BarSpec
    resolved: ResolvedSettings

    @property
    def label(self) -> str:
        return f"{self.instrument.symbol} {self.spec}"

    @property
    def periods_per_year(self) -> float:
        return periods_per_year(self.spec, self.instrument.session, self.bars.ts)


def _series(data: pd.DataFrame | Bars | str, instrument: str | Instrument | None, bars: str,
            home: str | Path | None, what: str) -> _Series:
    resolved = _settings(home)
    if isinstance(data, str):
        inst = _instrument(resolved, instrument or data)
        return _Series(_read(resolved, data, bars), inst, BarSpec.parse(bars), resolved)
    arrays = _bars(data)
    inst = _instrument(resolved, _symbol_of(data, instrument, what))
    return _Series(arrays, inst, _spec_of(data, arrays), resolved)


def _read(resolved: ResolvedSettings, symbol: str, bars: str) -> Bars:
    with MarketStore(resolved.store_path, read_only=True) as store:
        return store.read_bars(symbol, BarSpec.parse(bars))


def load_bars(symbol: str, bars: str = "1min", *, home: str | Path | None = None) -> pd.DataFrame:
    """A stored bar series as a DataFrame, to look at, build a signal on, and hand back to
    `run_backtest`, `make_env` or `train`.

    The index is a tz-aware UTC DatetimeIndex named `ts` of bar CLOSE times: the store keeps
    every bar stamped at its close (files stamped at the open are shifted on import), so a
    value at `t` is known at `t` and a signal computed from rows <= t is causal. Columns: open,
    high, low, close, volume (and buy_volume, sell_volume where stored). `attrs` records the
    symbol and the bar spec, so the other functions need not be told again.

    A missing series raises `foxhunt.errors.DataError` with one line naming it and listing
    what the store holds.
    """
    resolved = _settings(home)
    return _frame(_read(resolved, symbol, bars), symbol, BarSpec.parse(bars))


def load_sample(*, home: str | Path | None = None) -> pd.DataFrame:
    """Store the bundled real ES trades (2013-09-01..03) as ES ticks, 1min and ticks:500 bars
    (what `foxhunt data sample` does) and return the 1min bars: data to try everything on."""
    from foxhunt.cli.data import load_sample_into_store

    load_sample_into_store(_cli_context(_settings(home)))
    return load_bars("ES", "1min", home=home)


def import_bars(path: str | Path, symbol: str, *, bars: str | None = None,
                home: str | Path | None = None, tz: str | None = None, ts_unit: str = "auto",
                ts_is_open: bool = False, off_grid: str = "error",
                replace: bool = False) -> pd.DataFrame:
    """Validate a bar file (CSV, Parquet or DBN) and store it as `foxhunt data import` does,
    then return the stored series. A bad file raises one line naming the row and rule and
    stores nothing; what the CLI notes (a gap of over a week, prices snapped to the grid) comes
    as a warning.

    `bars` names the series (default: inferred from the spacing); `ts_is_open` for files
    stamped at the bar's open; `tz` for naive local times; `off_grid` is "error", "snap" or
    "keep" (prices off the instrument's tick grid); the default merges into a stored series,
    `replace=True` drops it first.
    """
    from foxhunt.data.readers import read_bars

    resolved = _settings(home)
    inst = _instrument(resolved, symbol)
    frame = read_bars(path, ts_unit=ts_unit, tz=tz, ts_is_open=ts_is_open, spec=bars)
    spec = BarSpec.parse(bars) if bars else infer_bar_spec(frame.ts)
    with MarketStore(resolved.store_path) as store, store.transaction():
        written = store.write_bars(symbol, spec, frame, str(path), tick_size=inst.tick_size,
                                   off_grid=off_grid, replace=replace)  # type: ignore[arg-type]
    for note in written.notes(f"{symbol} {spec}"):  # what the CLI prints as "note: ..."
        warnings.warn(note, UserWarning, stacklevel=2)
    return load_bars(symbol, str(spec), home=home)


# -- policies ----------------------------------------------------------------------------------


@runtime_checkable
class Predictor(Protocol):
    """What Stable-Baselines3 models (and others) offer: `predict(obs, deterministic=...)`."""

    def predict(self, observation: Any, *args: Any, **kwargs: Any) -> Any: ...


@dataclass
class Policy:
    """An `obs -> action` callable and the settings its observations were built with.

    `act` takes one observation of the env `make_env` builds (float32 [obs_dim]) and returns
    an action: an index 0..26 of the env's Discrete(27) space, or (direction, size, stop).
    `env` and `features` are the env and feature settings it was trained with (None: the
    backtest's own), so a backtest shows it exactly the observations training did.
    """

    act: Callable[[np.ndarray], Any]
    env: EnvConfig | None = None
    features: FeatureConfig | None = None
    name: str = "policy"

    def __call__(self, obs: np.ndarray) -> Any:
        return self.act(obs)


def policy_from_sb3(model: Predictor, env: Any = None, *, deterministic: bool = True,
                    name: str = "sb3") -> Policy:
    """A Stable-Baselines3 model (anything with `.predict(obs, deterministic=True)`) as a
    `Policy` for `run_backtest`. Pass the env it was trained on (from `make_env`) so the backtest
    builds the same observations (window, position sizes, features)."""
    if not callable(getattr(model, "predict", None)):
        raise ConfigError(f"policy_from_sb3: {type(model).__name__} has no predict(obs, "
                          "deterministic=...) method")

    def act(obs: np.ndarray) -> Any:
        action = model.predict(obs, deterministic=deterministic)
        return action[0] if isinstance(action, tuple) else action  # SB3: (action, state)

    unwrapped = getattr(env, "unwrapped", env)
    vec = getattr(unwrapped, "vec", None)
    return Policy(act, None if vec is None else vec.config,
                  getattr(unwrapped, "feature_config", None), name)


def _action(value: Any) -> tuple[int, int, int]:
    """One action as (direction, size, stop) from a flat index or a triple."""
    a = np.asarray(value).reshape(-1)
    if a.size == 1:
        k = int(a[0])
        if not 0 <= k < N_ACTIONS:
            raise ConfigError(f"policy action {k} is outside 0..{N_ACTIONS - 1} (Discrete(27))")
        return tuple(unflatten_actions(torch.tensor(k)).tolist())  # type: ignore[return-value]
    if a.size == 3 and all(0 <= int(x) <= 2 for x in a):
        return int(a[0]), int(a[1]), int(a[2])
    raise ConfigError(f"policy action {value!r}: expected an index 0..26 or (direction, size, "
                      "stop) with each in 0..2")


class _Actor:
    """A Python `Policy` in the shape the backtester's greedy agent calls: observations on the
    device in, [n, 3] actions out, one call per env (a window is one env)."""

    def __init__(self, policy: Policy):
        self.policy = policy

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        rows = obs.cpu().numpy()
        actions = [_action(self.policy(row)) for row in rows]
        return torch.tensor(actions, dtype=torch.long, device=obs.device)


class CallablePolicy(PolicySpec):
    """A `Policy` backtested on the features `make_env` builds for the same bars (causal,
    rolling-normalised), the position state as for a checkpoint (the backtest's env counts time
    in trade over the policy's episode length, capped at 1)."""

    def __init__(self, policy: Policy, features: np.ndarray, observation: ObservationSpec,
                 env_config: EnvConfig):
        self.policy, self.features, self.observation = policy, features, observation
        self.env_config, self.label = env_config, policy.name

    def first_bar(self) -> int:
        return self.observation.first_decision()

    def build(self, market: MarketTensors, env_config: EnvConfig) -> GreedyAgent:
        rows = self.observation.market_rows(torch.as_tensor(self.features, device=market.device))
        return GreedyAgent(_Actor(self.policy), self.observation, rows)


def _features(series: _Series, config: FeatureConfig | Mapping[str, Any] | None):
    """The causal feature matrix of the series (rolling z-scores: no statistic reads a later
    bar), built the same way for `make_env` and for a policy's backtest."""
    cfg = _section(series.resolved.settings.features, config, "features")
    return cfg, FeaturePipeline(cfg, series.instrument.session).transform(series.bars)


def _section(base: M, override: M | Mapping[str, Any] | None, name: str) -> M:
    """A settings section (`[env]`, `[features]`): `override` itself if it is one, else `base`
    with `override`'s keys over it, checked like a config file (a bad key is one line)."""
    if isinstance(override, type(base)):
        return override
    if not override:
        return base
    return validate_config(type(base), {**base.model_dump(exclude_unset=True), **override},
                           f"{name}= [{name}]")


# -- signals -----------------------------------------------------------------------------------


def _signal_values(signal: Any, series: _Series, index: pd.DatetimeIndex | None) -> np.ndarray:
    n = len(series.bars)
    if isinstance(signal, pd.DataFrame):
        raise ConfigError("signal: give one column (a Series), not a DataFrame")
    if isinstance(signal, pd.Series) and isinstance(signal.index, pd.DatetimeIndex):
        ts = _to_ns(signal.index, "signal")
        if len(ts) != n or not np.array_equal(ts, series.bars.ts):
            raise ConfigError(f"signal: its {len(ts)} timestamps are not the bars' {n}; align it "
                              "first, e.g. signal.reindex(bars.index)")
    values = np.asarray(signal, dtype=np.float64).reshape(-1)
    if len(values) != n:
        raise ConfigError(f"signal: {len(values)} values for {n} bars; give one per bar")
    values = np.where(np.isnan(values), 0.0, values)
    off = np.flatnonzero(values != np.round(values))
    if off.size:
        where = index[off[0]] if index is not None else f"row {off[0]}"
        raise ConfigError(f"signal: target positions are whole contracts; {values[off[0]]:g} at "
                          f"{where} is not (round or scale the signal)")
    return values


def signal_policy(values: np.ndarray, env: EnvConfig, name: str) -> tuple[TablePolicy, EnvConfig]:
    """Target positions (signed contracts per bar) as recorded env actions, and the env settings
    whose size choices hold each of them: `env` itself if its sizes already do, else `env` with
    `max_contracts` and `size_fractions` set to the signal's (at most 3) sizes."""
    from foxhunt.backtest import ActionReplay

    sizes = contracts_for(env)
    magnitudes = sorted({int(m) for m in np.abs(values[values != 0])})
    if not set(magnitudes) <= set(sizes):
        if len(magnitudes) > 3:
            raise ConfigError(f"signal: {len(magnitudes)} position sizes {magnitudes}; the env's "
                              "size branch has 3 choices, so use at most 3 distinct sizes")
        top = magnitudes[-1]
        fractions = [m / top for m in magnitudes] + [1.0] * (3 - len(magnitudes))
        env = env.model_copy(update={"max_contracts": top, "size_fractions": tuple(fractions)})
        sizes = contracts_for(env)
    actions = np.zeros((len(values), 3), dtype=np.uint8)
    actions[:, 0] = np.where(values > 0, 1, np.where(values < 0, 2, 0))
    for m in magnitudes:
        actions[np.abs(values) == m, 1] = sizes.index(m)
    return ActionReplay(actions, label=name), env


# -- backtest ----------------------------------------------------------------------------------


@dataclass
class BacktestResult:
    """One policy over one window, in pandas.

    `equity` is capital + cumulative PnL after costs at each bar's close (UTC index), starting
    at the first decision bar; `position` the signed contracts held at each close; `pnl` the
    money each bar made; `trades` one row per round trip (entry/exit times as UTC datetimes,
    prices with slippage, `pnl` after costs); `metrics` the same dict `foxhunt backtest`
    prints (Sharpe, returns, drawdown, trade statistics). `baselines` holds results of the
    strategies asked for beside it, on the same bars. `raw` is the engine's result.
    """

    name: str
    symbol: str
    bars: str
    metrics: dict[str, Any]
    equity: pd.Series
    position: pd.Series
    pnl: pd.Series
    trades: pd.DataFrame
    raw: EngineResult = field(repr=False)
    baselines: dict[str, BacktestResult] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        m = self.metrics
        return (f"BacktestResult({self.name!r} on {self.symbol} {self.bars}: "
                f"{len(self.equity)} bars, {len(self.trades)} trades, "
                f"total_return={m.get('total_return')}, sharpe={m.get('sharpe')})")


def _index(ts: np.ndarray) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.to_datetime(np.asarray(ts), unit="ns", utc=True), name="ts")


def _result(raw: EngineResult, label: str) -> BacktestResult:
    index = _index(raw.ts)
    trades = pd.DataFrame({k: raw.trades[k] for k in TRADE_COLUMNS})
    for col in ("entry_ts", "exit_ts"):
        trades[col] = pd.to_datetime(trades[col].to_numpy(dtype=np.int64), unit="ns", utc=True)
    return BacktestResult(
        name=raw.name, symbol=raw.symbol, bars=label.split(" ", 1)[-1],
        metrics=dict(raw.metrics),
        equity=pd.Series(raw.equity, index=index, name="equity"),
        position=pd.Series(raw.position, index=index, name="position"),
        pnl=pd.Series(raw.pnl, index=index, name="pnl"),
        trades=trades, raw=raw)


def _window(series: _Series, start: Any, end: Any) -> tuple[int, int]:
    """Rows [lo, hi) of bars with start <= close time <= end (anything pandas reads as a time;
    naive is UTC)."""
    ts = series.bars.ts

    def ns(value: Any) -> int:
        stamp = pd.Timestamp(value)
        return int((stamp if stamp.tzinfo else stamp.tz_localize("UTC")).as_unit("ns").value)

    lo = 0 if start is None else int(np.searchsorted(ts, ns(start), "left"))
    hi = len(ts) if end is None else int(np.searchsorted(ts, ns(end), "right"))
    if hi - lo < 3:
        raise ConfigError(f"start/end select {max(hi - lo, 0)} bars; a backtest needs at least 3")
    return lo, hi


def _as_policy(policy: Any, name: str | None) -> Policy:
    if isinstance(policy, Policy):
        return replace(policy, name=name) if name else policy
    if isinstance(policy, Predictor):
        return policy_from_sb3(policy, name=name or "sb3")
    return Policy(policy, name=name or getattr(policy, "__name__", "policy"))


def _policy_spec(policy: Any, series: _Series, env: EnvConfig, name: str | None,
                 index: pd.DatetimeIndex | None, device: str | None) -> tuple[PolicySpec, EnvConfig]:
    """The engine's policy for whatever was passed, and the env settings to run it under."""
    if isinstance(policy, PolicySpec):
        return policy, env
    if isinstance(policy, str) and not policy.endswith(".pt"):
        return parse_strategy(policy), env
    if isinstance(policy, (str, Path)):
        from foxhunt.training.checkpoint import load_policy

        loaded = load_policy(policy)
        spec = checkpoint_policy(loaded, series.bars, series.instrument, device,
                                 features=None if "feature_config" in loaded.metadata
                                 else series.resolved.settings.features, label=name)
        return spec, loaded.spec.env
    if isinstance(policy, (pd.Series, np.ndarray, list, tuple)):
        return signal_policy(_signal_values(policy, series, index), env, name or "signal")
    if isinstance(policy, (Policy, Predictor)) or callable(policy):
        policy = _as_policy(policy, name)
        cfg = policy.env or env
        features_cfg, fm = _features(series, policy.features)
        observation = ObservationSpec(cfg.window, fm.n_features, fm.valid_from)
        policy = replace(policy, features=features_cfg)
        return CallablePolicy(policy, fm.values, observation, cfg), cfg
    raise ConfigError(f"run_backtest: cannot run a {type(policy).__name__}; give a signal (Series or "
                      "array of target contracts), a strategy such as 'sma:10,30', a checkpoint "
                      "path, or a policy callable obs -> action")


def run_backtest(
    bars: pd.DataFrame | Bars | str,
    policy: Any,
    *,
    instrument: str | Instrument | None = None,
    costs: bool = True,
    capital: float = DEFAULT_CAPITAL,
    env: EnvConfig | Mapping[str, Any] | None = None,
    baselines: Sequence[str] = (),
    start: Any = None,
    end: Any = None,
    name: str | None = None,
    series: str = "1min",
    device: str | None = "cpu",
    home: str | Path | None = None,
) -> BacktestResult:
    """Backtest `policy` on `bars` through the training env's fill model (the engine of
    `foxhunt backtest`), so its costs are exactly what training and paper trading charge.

    `policy` may be:
    - a signal: a Series (indexed like `bars`) or array of TARGET POSITIONS in signed whole
      contracts, one per bar (NaN: flat). `signal[t]` is decided at the close of bar t, so it may
      use bars <= t; its order fills at the open of bar t+1 with `slippage_ticks` against the
      trader plus commission; whatever is open at the last bar's close is flattened there;
    - a baseline by name: "buy-and-hold", "flat", "sma:10,30", "zfade:60,1.5", "random:7";
    - a checkpoint file (".pt") of a `train` run;
    - a policy: a callable `obs -> action`, a `Policy`, or a model with `.predict` (SB3), fed
      the observations `make_env` builds for these bars.

    `bars` is a DataFrame from `load_bars` (or any with a UTC bar-close index and OHLCV
    columns; then say `instrument=`) or a stored symbol, read as `series`. `costs=False` drops
    commission and slippage. `env` overrides `[env]` keys (e.g. {"slippage_ticks": 0.5}).
    `baselines` names strategies to run beside it on the same bars (see
    `BacktestResult.baselines`; the report draws them). `start`/`end` bound the window by bar
    close time while a policy's features still warm up on the bars before it.
    """
    data = bars
    resolved_series = _series(data, instrument, series, home, "run_backtest")
    index = data.index if isinstance(data, pd.DataFrame) else None
    env_cfg = _section(resolved_series.resolved.settings.env, env, "env")
    spec, env_cfg = _policy_spec(policy, resolved_series, env_cfg, name, index, device)
    label = name or spec.label
    policies: dict[str, PolicySpec] = {label: spec}
    policies.update({b: parse_strategy(b) for b in baselines if b != label})
    results = engine_backtest(
        resolved_series.bars, resolved_series.instrument, policies=policies,
        windows=[_window(resolved_series, start, end)], env_config=env_cfg, costs=costs,
        device=device, capital=capital, periods_per_year=resolved_series.periods_per_year)
    main, *others = (_result(r, resolved_series.label) for r in results)
    main.baselines = {r.name: r for r in others}
    return main


# -- the Gymnasium env -------------------------------------------------------------------------


def make_env(
    bars: pd.DataFrame | Bars | str,
    *,
    instrument: str | Instrument | None = None,
    env: EnvConfig | Mapping[str, Any] | None = None,
    features: FeatureConfig | Mapping[str, Any] | None = None,
    capital: float = DEFAULT_CAPITAL,
    costs: bool = True,
    start: Any = None,
    end: Any = None,
    series: str = "1min",
    home: str | Path | None = None,
) -> TradingEnv:
    """A Gymnasium env (Discrete(27) actions, Box float32 observations) on `bars`: the
    training env, one episode at a time on the CPU, for Stable-Baselines3 and the like.

    Observations are `env.window` rows of the causal features (rolling z-scores: no statistic
    reads a later bar) plus the position state; episodes start at random bars after the
    features' warm-up (or `reset(options={"start": bar})`) and last `env.episode_len`
    decisions. `info` holds the step's reward components in dollars (`pnl` is the bar's
    mark-to-market), `position`, `equity` (capital + the episode's PnL after costs) and
    `episode_pnl`. The returned env's `feature_config` is what `policy_from_sb3(model, env)`
    passes on, so a backtest of the trained model sees the same observations.
    """
    from foxhunt.env.gym_wrapper import TradingEnv

    resolved_series = _series(bars, instrument, series, home, "make_env")
    cfg = _section(resolved_series.resolved.settings.env, env, "env")
    features_cfg, fm = _features(resolved_series, features)
    inst = resolved_series.instrument
    market = MarketTensors.from_bars(resolved_series.bars, fm.values, inst, cfg, "cpu")
    cost = None if costs else CostModel(inst.tick_size, inst.point_value, 0.0, 0.0)
    lo, hi = (0, len(market)) if start is None and end is None else _window(resolved_series,
                                                                           start, end)
    made = TradingEnv(market, cfg, cost, start_range=(max(lo, fm.valid_from), hi),
                      capital=capital)
    made.feature_config = features_cfg
    return made


# -- training and the report -------------------------------------------------------------------


def train(
    data: pd.DataFrame | Bars | str,
    *,
    instrument: str | Instrument | None = None,
    bars: str = "1min",
    out: str | Path | None = None,
    folds: int | None = None,
    epochs: int | None = None,
    updates_per_fold: int | None = None,
    device: str | None = None,
    seed: int | None = None,
    profile: str | None = None,
    resume: bool = False,
    quiet: bool = True,
    home: str | Path | None = None,
    **overrides: Mapping[str, Any],
) -> RunResult:
    """Walk-forward train the agent on a stored symbol (or on a DataFrame of bars) exactly as
    `foxhunt train` does (the same builder runs), and return its `RunResult`: `run.run_dir`,
    `run.table()` (the per-fold results), `run.folds[k].checkpoint` (backtest it with
    `run_backtest(bars, path)`), `run.phases`.

    Keyword sections override the settings like a config file would, e.g.
    `train("ES", epochs=1, updates_per_fold=20, env={"window": 4}, agent={"hidden": 32},
    train={"n_envs": 16, "batch_size": 32})`. `quiet=False` prints progress on stderr.
    A DataFrame is stored for the run in a temporary store, so `write_report(run, ...)` then needs
    `bars=` that DataFrame.
    """
    from foxhunt.cli.train import run_training

    for key, value in overrides.items():
        if not isinstance(value, Mapping):
            raise ConfigError(f"train: {key}= must be a dict of [{key}] keys, e.g. "
                              f"{key}={{...}}; got {type(value).__name__}")
    resolved = _settings(home)
    with contextlib.ExitStack() as stack:
        if isinstance(data, str):
            symbol, spec = data, bars
        else:
            arrays = _bars(data)
            inst = _instrument(resolved, _symbol_of(data, instrument, "train"))
            symbol, spec = inst.symbol, str(_spec_of(data, arrays))
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="foxhunt-train-")))
            with MarketStore(tmp / "store.duckdb") as store, store.transaction():
                store.write_bars(symbol, spec, arrays, "foxhunt.api.train",
                                 tick_size=inst.tick_size)
            settings = resolved.settings.model_copy(
                update={"data": DataConfig(store=str(tmp / "store.duckdb"))})
            resolved = replace(resolved, settings=settings)
        result, _, _ = run_training(
            _cli_context(resolved), symbol, spec, folds=folds, epochs=epochs,
            updates_per_fold=updates_per_fold, profile=profile, device=device, seed=seed,
            out_dir=None if out is None else Path(out), resume=resume,
            spec_overrides={k: dict(v) for k, v in overrides.items()}, quiet=quiet)
    return result


def write_report(result: BacktestResult | RunResult | str | Path, path: str | Path, *,
           bars: pd.DataFrame | Bars | None = None, device: str | None = "cpu",
           home: str | Path | None = None) -> Path:
    """Write the self-contained HTML report (the one `foxhunt backtest --report` and
    `foxhunt report` write) and return its path.

    For a `BacktestResult`: its equity against its baselines, trades and metrics. For a
    training run (`RunResult` or its directory): every fold's deployed model backtested on its
    test window against the baselines, the fold table and training curves; the run's bars are
    read from the store unless `bars` is given.
    """
    from foxhunt.report import write_report as write_html

    if isinstance(result, BacktestResult):
        raws = [result.raw, *(b.raw for b in result.baselines.values())]
        title = f"{result.symbol} {result.bars}"
        data = {"title": f"{title} backtest", "symbol": result.symbol, "bars": result.bars,
                "series": [report_series(raws, title, primary=result.name)],
                "metrics": [{"policy": r.name, "window": f"bars {r.window[0]}..{r.window[1]}",
                             "trades": len(r.trades), **r.metrics} for r in raws]}
        return write_html(data, path)
    from foxhunt.report.run import SOURCE_FILE, backtest_run, read_run, run_report_data

    run_dir = Path(getattr(result, "run_dir", result))
    source = read_run(run_dir)[SOURCE_FILE]
    series = _series(source["symbol"] if bars is None else bars, source["symbol"],
                     source["bars"], home, "write_report")
    per_fold = backtest_run(run_dir, series.bars, series.instrument, device=device,
                            periods_per_year=series.periods_per_year)
    return write_html(run_report_data(run_dir, per_fold), path)

