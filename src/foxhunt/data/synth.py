"""Synthetic futures markets whose best simple rule is known.

Learning tests need markets where the right answer is known. Five families share one texture
and differ in where the edge sits (`family`):

- `ar`: a planted AR(1) signal of strength X (`signal_strength`); with X = 0 no strategy can
  beat zero in expectation, with X > 0 an oracle that knows the signal earns a Sharpe ratio that
  grows with X;
- `trend`: a latent drift with a half-life of hundreds of bars (moving-average crosses win);
- `reversion`: the price reverts to a slowly wandering level (fading a z-score wins);
- `regime`: Markov switching between the trend and the reversion state;
- `garch_noise`: the texture alone, nothing to find (a strict null).

The texture is that of real 1-minute futures bars (volatility regimes, GARCH clustering,
U-shaped intraday volatility and volume, overnight gaps, tick-rounded OHLC, aggressor volume),
so an agent that learns here has to learn through realistic noise. The exact equations are in
`docs/synthetic-markets.md`; the names below follow them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from foxhunt.configbase import StrictConfig, validate_config
from foxhunt.data.series import Bars
from foxhunt.errors import ConfigError

NS_PER_S = 1_000_000_000
NS_PER_DAY = 86_400 * NS_PER_S
DEFAULT_START = "2024-01-02T14:30:00Z"
MAX_BARS = 50_000_000
FAMILIES = ("ar", "trend", "reversion", "regime", "garch_noise")
Family = Literal["ar", "trend", "reversion", "regime", "garch_noise"]
AR_REGIME_DRIFT = (0.0, 0.006, -0.025)
"""The `ar` family's default regime drifts; every other family defaults to zero drifts, so
that its edge is the one it is named for."""


def _to_ns(value: Any) -> Any:
    if isinstance(value, datetime):
        d = value if value.tzinfo else value.replace(tzinfo=UTC)
        return (int(d.timestamp()) * 1_000_000 + d.microsecond) * 1_000
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return _to_ns(datetime.fromisoformat(text))
        except ValueError:
            raise ValueError(
                f"start {value!r} is neither ns since the epoch nor an ISO time "
                "like 2024-01-02T14:30:00Z"
            ) from None
    return value


class SynthConfig(StrictConfig):
    """Everything that shapes a synthetic market; one config and seed give one exact market."""

    model_config = ConfigDict(allow_inf_nan=False)

    n_bars: int = Field(ge=2, le=MAX_BARS)
    seed: int = Field(default=0, ge=0)
    family: Family = "ar"
    signal_strength: float = Field(default=0.0, ge=0.0)
    signal_persistence: float = Field(default=0.9, ge=0.0, lt=1.0)

    trend_strength: float = Field(default=0.1, ge=0.0, le=1.0)
    trend_half_life: float = Field(default=400.0, ge=1.0)
    reversion_half_life: float = Field(default=40.0, ge=1.0)
    reversion_share: float = Field(default=0.9, ge=0.0, le=1.0)
    switch_duration: tuple[float, float] = (5000.0, 5000.0)

    bar_seconds: int = Field(default=60, ge=1, le=86_400)
    session_minutes: int = Field(default=390, ge=1, le=1_440)
    start: int = Field(default=DEFAULT_START, validate_default=True)
    weekends: bool = False

    tick_size: float = Field(default=0.25, gt=0.0)
    start_price: float = Field(default=4000.0, gt=0.0)
    minute_vol: float = Field(default=2e-4, gt=0.0, le=0.05)
    garch_alpha: float = Field(default=0.06, ge=0.0)
    garch_beta: float = Field(default=0.92, ge=0.0)
    regime_vol: tuple[float, ...] = (0.7, 1.0, 1.8)
    regime_drift: tuple[float, ...] = AR_REGIME_DRIFT
    regime_duration: tuple[float, ...] = (1500.0, 3000.0, 400.0)
    intraday_vol_amplitude: float = Field(default=2.0, ge=0.0)
    intraday_volume_amplitude: float = Field(default=2.0, ge=0.0)
    gap_vol: float = Field(default=0.002, ge=0.0, le=0.5)

    minute_volume: float = Field(default=1000.0, gt=0.0)
    volume_noise: float = Field(default=0.3, ge=0.0)
    flow_sensitivity: float = Field(default=0.5, ge=0.0)

    @model_validator(mode="before")
    @classmethod
    def _family_drift(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("family", "ar") != "ar" and "regime_drift" not in data:
            vols = data.get("regime_vol", cls.model_fields["regime_vol"].default)
            n = len(vols) if isinstance(vols, tuple | list) else 3
            data = {**data, "regime_drift": (0.0,) * n}
        return data

    @field_validator("start", mode="before")
    @classmethod
    def _parse_start(cls, v: Any) -> Any:
        return _to_ns(v)

    @field_validator("switch_duration")
    @classmethod
    def _switch(cls, v: tuple[float, float]) -> tuple[float, float]:
        if min(v) < 1:
            raise ValueError("needs 2 mean durations (trend, reversion), each >= 1 bar")
        return v

    @field_validator("regime_vol")
    @classmethod
    def _vols(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not 1 <= len(v) <= 8 or min(v) <= 0:
            raise ValueError("needs 1 to 8 volatility multipliers, each > 0")
        return v

    @field_validator("regime_duration")
    @classmethod
    def _durations(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not 1 <= len(v) <= 8 or min(v) < 1:
            raise ValueError("needs 1 to 8 mean regime durations, each >= 1 bar")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> SynthConfig:
        k = len(self.regime_vol)
        if not len(self.regime_drift) == len(self.regime_duration) == k:
            raise ValueError(
                f"regime_vol, regime_drift and regime_duration need one value per regime "
                f"(got {k}, {len(self.regime_drift)}, {len(self.regime_duration)})"
            )
        if self.garch_alpha + self.garch_beta >= 1.0:
            raise ValueError("garch_alpha + garch_beta must be < 1 for a stationary variance")
        if (self.session_minutes * 60) % self.bar_seconds:
            raise ValueError(
                f"session_minutes={self.session_minutes} is not a whole number of "
                f"{self.bar_seconds}s bars"
            )
        limit = max_signal_strength(self.signal_persistence)
        if self.signal_strength >= limit:
            raise ValueError(
                f"signal_strength must be < {limit:.3g} at signal_persistence="
                f"{self.signal_persistence} (beyond it the signal can no longer be recovered "
                "from past returns)"
            )
        if self.tick_size >= self.start_price:
            raise ValueError("tick_size must be smaller than start_price")
        if self.family != "ar" and self.signal_strength:
            raise ValueError(f"signal_strength is the ar family's edge; family {self.family!r} "
                             "needs signal_strength = 0")
        return self

    @property
    def bars_per_session(self) -> int:
        return self.session_minutes * 60 // self.bar_seconds

    @property
    def bar_vol(self) -> float:
        """Base per-bar log-return std: `minute_vol` scaled to the bar length by sqrt(time)."""
        return self.minute_vol * math.sqrt(self.bar_seconds / 60.0)

    @property
    def trend_persistence(self) -> float:
        """phi_mu: the latent drift's AR(1) coefficient, from its half-life."""
        return 0.5 ** (1.0 / self.trend_half_life)

    @property
    def reversion_persistence(self) -> float:
        """psi: the deviation's AR(1) coefficient, from its half-life."""
        return 0.5 ** (1.0 / self.reversion_half_life)


def max_signal_strength(persistence: float) -> float:
    """Largest X for which s_t is still an exact, decaying EMA of past normalised returns."""
    return (1.0 + persistence) / math.sqrt(1.0 - persistence**2)


def ideal_oracle_sharpe(signal_strength: float) -> float:
    """Per-bar oracle Sharpe with constant volatility, no drift, no rounding and no costs.

    The oracle earns sign(s) * (X s + eps) with s, eps independent N(0, 1), so the mean is
    X sqrt(2/pi) and the variance 1 + X^2 (1 - 2/pi).
    """
    x = float(signal_strength)
    return x * math.sqrt(2 / math.pi) / math.sqrt(1.0 + x * x * (1.0 - 2 / math.pi))


def edge_strength(config: SynthConfig) -> float:
    """Std of the predictable part of the next bar's vol-normalised return, the X that
    `ideal_oracle_sharpe` takes: X (`ar`), D (`trend`), sqrt(w (1 - psi) / (1 + psi))
    (`reversion`: the pull -(1 - psi) x_t / sigma over its stationary spread), the
    occupancy-weighted root mean square of the two (`regime`), 0 (`garch_noise`)."""
    trend = config.trend_strength
    psi = config.reversion_persistence
    reversion = math.sqrt(config.reversion_share * (1.0 - psi) / (1.0 + psi))
    if config.family == "ar":
        return config.signal_strength
    if config.family == "trend":
        return trend
    if config.family == "reversion":
        return reversion
    if config.family == "regime":
        d_trend, d_rev = config.switch_duration
        share = d_rev / (d_trend + d_rev)
        return math.sqrt((1.0 - share) * trend**2 + share * reversion**2)
    return 0.0


@dataclass(frozen=True)
class SynthMarket:
    """Generated bars plus the hidden state that made them (for oracles and tests only).

    `signal[t]` is known at the close of bar t and its sign is the side that bar t+1's return
    leans to: the planted s_t (`ar`; in `garch_noise` a placebo that predicts nothing), the
    latent drift mu_t (`trend`), -(1 - psi) x_t / sigma_t (`reversion`), whichever of the two
    is active (`regime`). `sigma[t]` is the conditional per-bar volatility of bar t (log units);
    `regime[t]` its volatility regime; `session[t]` the index of its trading session;
    `reverting[t]` whether it is in the mean-reverting state; `drift[t]` the latent drift mu_t
    (it acts on trend bars only) and `deviation[t]` x_t, the log distance of the close from its
    slow level (0 on trend bars); both are zeros in families that have none.
    """

    config: SynthConfig
    bars: Bars
    signal: np.ndarray
    sigma: np.ndarray
    regime: np.ndarray
    session: np.ndarray
    reverting: np.ndarray
    drift: np.ndarray
    deviation: np.ndarray

    def __len__(self) -> int:
        return len(self.bars)

    @property
    def after_break(self) -> np.ndarray:
        """True on bars that open after the market was closed (overnight, weekend): the bars
        whose open carries a gap. Derived from timestamps alone, so an agent can see it too."""
        bar_ns = self.config.bar_seconds * NS_PER_S
        out = np.zeros(len(self), dtype=bool)
        out[1:] = self.bars.ts[1:] - bar_ns > self.bars.ts[:-1]
        return out

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts about the market, for the CLI and for logs."""
        b = self.bars
        occupancy = np.bincount(self.regime, minlength=len(self.config.regime_vol)) / len(self)
        returns = np.diff(np.log(b.close))

        def iso(ns: int) -> str:
            return datetime.fromtimestamp(ns // NS_PER_S, tz=UTC).isoformat()

        return {
            "bars": len(self),
            "sessions": int(self.session[-1]) + 1,
            "bar_seconds": self.config.bar_seconds,
            "first_ts": int(b.ts[0]),
            "last_ts": int(b.ts[-1]),
            "first_time": iso(int(b.ts[0])),
            "last_time": iso(int(b.ts[-1])),
            "seed": self.config.seed,
            "family": self.config.family,
            "signal_strength": self.config.signal_strength,
            "oracle_sharpe": oracle_sharpe(self),
            "ideal_oracle_sharpe": ideal_oracle_sharpe(edge_strength(self.config)),
            "realised_vol": float(returns.std()) if len(returns) > 1 else 0.0,
            "first_close": float(b.close[0]),
            "last_close": float(b.close[-1]),
            "mean_volume": float(b.volume.mean()),
            "regime_occupancy": [round(float(x), 6) for x in occupancy],
            "reverting_share": float(self.reverting.mean()),
        }


def generate(config: SynthConfig | Mapping[str, Any]) -> SynthMarket:
    """Build one market. A mapping is validated first; a bad key or value raises ConfigError."""
    if not isinstance(config, SynthConfig):
        config = validate_config(SynthConfig, dict(config), "synth config")
    n = config.n_bars
    streams = np.random.SeedSequence(config.seed).spawn(9)
    rng_regime, rng_eps, rng_gap, rng_range, rng_volume, rng_flow = map(
        np.random.default_rng, streams[:6]
    )
    rng_drift, rng_level, rng_switch = map(np.random.default_rng, streams[6:])

    regime = _markov(np.asarray(config.regime_duration), n, rng_regime)
    eps = rng_eps.standard_normal(n + 1)
    s_prev0, eps = eps[0], eps[1:]

    pos = np.arange(n, dtype=np.int64) % config.bars_per_session
    session = np.arange(n, dtype=np.int64) // config.bars_per_session
    ts = _timestamps(config, session, pos)
    tau = (pos + 0.5) / config.bars_per_session
    vol_season = _u_shape(tau, config.intraday_vol_amplitude)

    h = np.empty(n)
    h[0] = 1.0
    if n > 1:
        omega = 1.0 - config.garch_alpha - config.garch_beta
        a = config.garch_alpha * eps[:-1] ** 2 + config.garch_beta
        h[1:] = _affine_scan(a, np.full(n - 1, omega), 1.0)
    sigma = config.bar_vol * np.asarray(config.regime_vol)[regime] * vol_season * np.sqrt(h)

    phi = config.signal_persistence
    c = math.sqrt(1.0 - phi * phi)
    signal = _affine_scan(np.full(n, phi), c * eps, s_prev0)
    s_prev = np.concatenate(([s_prev0], signal[:-1]))

    mu_k = np.asarray(config.regime_drift)[regime]
    reverting = np.zeros(n, dtype=bool)
    drift = np.zeros(n)
    deviation = np.zeros(n)
    if config.family in ("ar", "garch_noise"):
        u = mu_k + config.signal_strength * s_prev + eps
        r = sigma * u
    else:
        if config.family == "reversion":
            reverting[:] = True
        elif config.family == "regime":
            reverting = _markov(np.asarray(config.switch_duration), n, rng_switch).astype(bool)
        r, drift, deviation = _trend_and_reversion(config, sigma, mu_k, eps, reverting,
                                                   rng_drift, rng_level)
        u = r / sigma
        step = -(1.0 - config.reversion_persistence) * deviation / sigma
        signal = np.where(reverting, step, drift)

    gap = np.zeros(n)
    opens = np.flatnonzero(np.diff(ts) > config.bar_seconds * NS_PER_S) + 1
    gap[opens] = config.gap_vol * rng_gap.standard_normal(len(opens))
    log_p0 = math.log(config.start_price)
    log_close = log_p0 + np.cumsum(gap + r)
    log_open = np.concatenate(([log_p0], log_close[:-1])) + gap

    up = 1.0 - rng_range.random(n)
    down = 1.0 - rng_range.random(n)
    rise = 0.5 * (r + np.sqrt(r * r - 2.0 * sigma**2 * np.log(up)))
    fall = 0.5 * (r - np.sqrt(r * r - 2.0 * sigma**2 * np.log(down)))

    tick = config.tick_size
    o = _round(np.exp(log_open), tick)
    cl = _round(np.exp(log_close), tick)
    hi = np.maximum(_round(np.exp(log_open + rise), tick), np.maximum(o, cl))
    lo = np.minimum(_round(np.exp(log_open + fall), tick), np.minimum(o, cl))

    activity = (
        _u_shape(tau, config.intraday_volume_amplitude)
        * np.asarray(config.regime_vol)[regime]
        * np.sqrt(h)
        * (0.5 + 0.5 * np.abs(eps) / math.sqrt(2 / math.pi))
    )
    noise = np.exp(config.volume_noise * rng_volume.standard_normal(n) - 0.5 * config.volume_noise**2)
    mean_volume = config.minute_volume * config.bar_seconds / 60.0
    volume = 1.0 + np.floor(mean_volume * activity * noise)
    p_buy = 0.5 * (1.0 + np.tanh(config.flow_sensitivity * u))
    buy = rng_flow.binomial(volume.astype(np.int64), p_buy).astype(np.float64)

    bars = Bars(ts, o, hi, lo, cl, volume, buy, volume - buy)
    return SynthMarket(config, bars, signal, sigma, regime, session.astype(np.int32), reverting,
                       drift, deviation)


def _trend_and_reversion(config: SynthConfig, sigma: np.ndarray, mu_k: np.ndarray,
                         eps: np.ndarray, reverting: np.ndarray, rng_drift: np.random.Generator,
                         rng_level: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Bar returns of the trend and reversion states, and their hidden drift and deviation.

    Trend bars: r_t = sigma_t (mu_k + mu_{t-1} + eps_t), mu an AR(1) of stationary std D.
    Reverting bars: the close is a slow level plus a deviation x that decays by psi per bar;
    the level takes the share 1 - w of the shock variance, x the share w. A trend bar resets x
    to 0 (the level jumps to the price), so switching state never moves the price."""
    n = len(sigma)
    phi = config.trend_persistence
    d = config.trend_strength
    zeta = rng_drift.standard_normal(n + 1)
    drift = _affine_scan(np.full(n, phi), d * math.sqrt(1.0 - phi * phi) * zeta[1:], d * zeta[0])
    drift_prev = np.concatenate(([d * zeta[0]], drift[:-1]))

    w = config.reversion_share
    xi = rng_level.standard_normal(n)
    psi = config.reversion_persistence
    on = reverting.astype(np.float64)
    deviation = _affine_scan(psi * on, on * sigma * math.sqrt(w) * eps, 0.0)
    dev_prev = np.concatenate(([0.0], deviation[:-1]))
    level = np.where(reverting, math.sqrt(1.0 - w) * xi, drift_prev + eps)
    r = sigma * (mu_k + level) + np.where(reverting, deviation - dev_prev, 0.0)
    return r, drift if not reverting.all() else np.zeros(n), deviation


def oracle_positions(market: SynthMarket) -> np.ndarray:
    """Position (-1, 0, +1) an oracle who sees s_t decides at the close of bar t.

    It holds sign(s_t) from the open of bar t+1 to the open of bar t+2, except that it stays
    flat when bar t+2 opens after a market closure (that span would carry the gap, noise the
    signal does not predict) and on the final bar (no next open to fill at).
    """
    p = np.sign(market.signal).astype(np.int8)
    p[-1] = 0
    p[:-2][market.after_break[2:]] = 0
    return p


def oracle_pnl(market: SynthMarket, cost_per_trade_points: float = 0.0) -> np.ndarray:
    """Net points per contract earned by each oracle decision t = 0 .. n-2.

    Decision t fills at open[t+1] and is marked at the next fill time open[t+2] (close[t+1]
    for the last bar); every contract traded pays `cost_per_trade_points` (a flip trades two).
    """
    if not (cost_per_trade_points >= 0 and math.isfinite(cost_per_trade_points)):
        raise ConfigError(f"cost_per_trade_points must be >= 0, got {cost_per_trade_points}")
    b = market.bars
    p = oracle_positions(market)[:-1].astype(np.float64)
    mark = np.concatenate((b.open[2:], b.close[-1:]))
    gross = p * (mark - b.open[1:])
    traded = np.abs(np.diff(p, prepend=0.0))
    return gross - cost_per_trade_points * traded


def oracle_sharpe(market: SynthMarket, cost_per_trade_points: float = 0.0) -> float:
    """Per-decision (per-bar) Sharpe of `oracle_pnl`, not annualised; 0.0 if it never varies.

    Annualise by multiplying with sqrt(bars per year), e.g. sqrt(252 * 390) for RTH minutes.
    """
    pnl = oracle_pnl(market, cost_per_trade_points)
    sd = float(pnl.std(ddof=1)) if len(pnl) > 1 else 0.0
    return float(pnl.mean()) / sd if sd > 0 else 0.0


def _affine_scan(a: np.ndarray, b: np.ndarray, x0: float) -> np.ndarray:
    """x_t = a_t x_{t-1} + b_t for t = 1..m, as a log-depth vectorised scan (no Python loop
    over bars, no division, so it stays exact where a cumprod trick would overflow)."""
    A = np.array(a, dtype=np.float64)
    B = np.array(b, dtype=np.float64)
    d = 1
    while d < len(A):
        B[d:] = A[d:] * B[:-d] + B[d:]
        A[d:] = A[d:] * A[:-d]
        d *= 2
    return A * x0 + B


def _markov(duration: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Markov chain over len(duration) states: geometric stays of mean `duration[k]`, then a
    uniform jump to one of the other states; the first state is drawn from the chain's
    stationary distribution."""
    k = len(duration)
    if k == 1:
        return np.zeros(n, dtype=np.int8)
    dur = np.asarray(duration, dtype=np.float64)
    states = [int(rng.choice(k, p=dur / dur.sum()))]
    lengths: list[np.ndarray] = []
    total = 0
    batch = int(2 * n / dur.min()) + 16
    while total < n:
        jumps = rng.integers(1, k, size=batch)
        seq = (states[-1] + np.cumsum(jumps)) % k
        chain = np.concatenate(([states[-1]], seq[:-1]))
        stay = rng.geometric(1.0 / dur[chain])
        lengths.append(np.stack((chain, stay)))
        total += int(stay.sum())
        states.append(int(seq[-1]))
    chain, stay = np.concatenate(lengths, axis=1)
    return np.repeat(chain, stay)[:n].astype(np.int8)


def _timestamps(config: SynthConfig, session: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Bar close times: sessions open daily at `start`'s UTC time of day, skipping sessions
    that end on a Saturday or Sunday unless `weekends` is set."""
    n_sessions = int(session[-1]) + 1
    length = config.session_minutes * 60 * NS_PER_S
    days = np.arange(n_sessions * 7 // 5 + 8, dtype=np.int64)
    opens = config.start + days * NS_PER_DAY
    if not config.weekends:
        weekday = ((opens + length - 1) // NS_PER_DAY + 3) % 7
        opens = opens[weekday < 5]
    bar_ns = config.bar_seconds * NS_PER_S
    return opens[:n_sessions][session] + (pos + 1) * bar_ns


def _u_shape(tau: np.ndarray, amplitude: float) -> np.ndarray:
    """1 + A (2 tau - 1)^2, scaled to mean 1 over the session: high at open and close."""
    return (1.0 + amplitude * (2.0 * tau - 1.0) ** 2) / (1.0 + amplitude / 3.0)


def _round(price: np.ndarray, tick: float) -> np.ndarray:
    return np.maximum(np.rint(price / tick), 1.0) * tick
