"""One fold's market on the device: features, prices, and causal series the env reads by index."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np
import torch
from torch import Tensor

from foxhunt.data.grid import tradable
from foxhunt.data.instruments import Instrument, Session
from foxhunt.data.series import NS, Bars
from foxhunt.env.config import EnvConfig
from foxhunt.errors import DataError

_QUARTER_HOUR_NS = 900_000_000_000
_DAY_NS = NS["d"]
_TENSOR_FIELDS = ("features", "open", "high", "low", "close", "atr", "reward_scale", "session_end")


@dataclass(frozen=True)
class MarketTensors:
    """Uploaded once; every env step and every replay sample gathers from these by bar index.

    `atr[t]` and `reward_scale[t]` use bars <= t only. `session_end[t]` says bar t is the last
    bar of its trading session; it comes from timestamps and the exchange calendar, never prices.
    Prices are the tradable ones (`data.grid.tradable`: on the tick grid); the features are
    computed from the bars as stored.
    """

    features: Tensor  # [T, F] float32
    open: Tensor  # [T] float64
    high: Tensor
    low: Tensor
    close: Tensor
    atr: Tensor  # [T] float64, price units, floored at one tick
    reward_scale: Tensor  # [T] float64, dollars per contract per bar, floored
    session_end: Tensor  # [T] bool
    ts: np.ndarray  # [T] int64 ns UTC bar close times, kept on the host
    instrument: Instrument

    @classmethod
    def from_bars(
        cls,
        bars: Bars,
        features: np.ndarray | Tensor,
        instrument: Instrument,
        config: EnvConfig,
        device: torch.device | str | None = None,
    ) -> MarketTensors:
        feats = torch.as_tensor(features).to(dtype=torch.float32)
        if feats.ndim != 2 or feats.shape[0] != len(bars) or feats.shape[1] < 1:
            raise DataError(
                f"features must be a [T, F] matrix with one row per bar: got shape "
                f"{tuple(feats.shape)} for {len(bars)} bars"
            )
        if len(bars) < 2:
            raise DataError(f"the env needs at least 2 bars, got {len(bars)}")
        floor = config.reward_scale_floor_ticks * instrument.tick_value
        prices = tradable(bars, instrument.tick_size)

        def f64(a: np.ndarray) -> Tensor:
            return torch.tensor(np.asarray(a, dtype=np.float64), device=device)

        return cls(
            features=feats.to(device).contiguous(),
            open=f64(prices.open),
            high=f64(prices.high),
            low=f64(prices.low),
            close=f64(prices.close),
            atr=f64(average_true_range(prices, config.atr_window, instrument.tick_size)),
            reward_scale=f64(
                dollar_volatility(
                    prices.close, config.reward_vol_window, instrument.point_value, floor
                )
            ),
            session_end=torch.as_tensor(session_ends(bars.ts, instrument.session), device=device),
            ts=bars.ts,
            instrument=instrument,
        )

    def __len__(self) -> int:
        return self.close.shape[0]

    @property
    def device(self) -> torch.device:
        return self.close.device

    @property
    def n_features(self) -> int:
        return self.features.shape[1]

    def to(self, device: torch.device | str) -> MarketTensors:
        return replace(self, **{k: getattr(self, k).to(device) for k in _TENSOR_FIELDS})


def average_true_range(bars: Bars, window: int, tick_size: float) -> np.ndarray:
    """Simple moving average of the true range over the last `window` bars (fewer at the start)."""
    prev_close = np.concatenate([bars.close[:1], bars.close[:-1]])
    tr = np.maximum(bars.high, prev_close) - np.minimum(bars.low, prev_close)
    tr[0] = bars.high[0] - bars.low[0]
    return np.maximum(_trailing_mean(tr, window), tick_size)


def dollar_volatility(
    close: np.ndarray, window: int, point_value: float, floor: float
) -> np.ndarray:
    """RMS of the last `window` close-to-close changes, in dollars per contract, floored."""
    diff = np.diff(close, prepend=close[0])
    rms = np.sqrt(_trailing_mean(diff * diff, window, start=1))
    return np.maximum(rms * point_value, floor)


def _trailing_mean(x: np.ndarray, window: int, start: int = 0) -> np.ndarray:
    """Mean of x[max(start, t-window+1) .. t] for each t (0 where that range is empty)."""
    c = np.concatenate([[0.0], np.cumsum(x)])
    t = np.arange(len(x))
    lo = np.maximum(start, t - window + 1)
    count = t + 1 - lo
    return np.where(count > 0, (c[t + 1] - c[np.minimum(lo, t + 1)]) / np.maximum(count, 1), 0.0)


def session_ends(ts: np.ndarray, session: Session) -> np.ndarray:
    """True where bar t is the last bar of its session (the next bar belongs to a later one).

    A bar belongs to the session whose close is the first at or after the bar's close time. A
    session with open == close trades around the clock: no bar ends one. The last bar of the
    data ends a session only if it closes exactly at the session close.
    """
    n = len(ts)
    if session.open == session.close or n == 0:
        return np.zeros(n, dtype=bool)
    local = ts + _utc_offsets_ns(ts, session.tz)
    close_ns = session.minutes("close") * 60 * 1_000_000_000
    index = -((close_ns - local) // _DAY_NS)
    ends = np.empty(n, dtype=bool)
    ends[:-1] = index[1:] != index[:-1]
    ends[-1] = (local[-1] - close_ns) % _DAY_NS == 0
    return ends


def _utc_offsets_ns(ts: np.ndarray, tz: str) -> np.ndarray:
    """UTC offset of each timestamp in `tz`, looked up once per quarter hour (zones change
    offset on quarter-hour UTC boundaries), so a million bars cost a few thousand look-ups."""
    zone = ZoneInfo(tz)
    buckets, inverse = np.unique(ts // _QUARTER_HOUR_NS, return_inverse=True)
    seconds = [
        datetime.fromtimestamp(int(b) * 900, tz=UTC).astimezone(zone).utcoffset().total_seconds()
        for b in buckets
    ]
    return np.asarray(seconds, dtype=np.int64)[inverse] * 1_000_000_000
