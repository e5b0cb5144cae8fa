"""The feature columns a config asks for: names, groups, warm-ups and descriptions."""

from __future__ import annotations

from dataclasses import dataclass

from foxhunt.features.config import FeatureConfig


@dataclass(frozen=True)
class FeatureSpec:
    """One column: `warmup` is the first row at which it is defined (earlier rows are NaN raw).
    `mirror` is its sign in the mirrored market (log prices negated, buyers and sellers
    swapped): -1 for a directional feature (returns, order flow, trend), +1 for the rest
    (volatility, volume, time). Training can mirror its samples with it (`[agent] mirror`)."""

    name: str
    group: str
    warmup: int
    description: str
    mirror: int = 1


DIRECTIONAL = ("ret_", "ofi", "ema_dist_", "zscore_", "rsi_", "chan_", "cross_")
"""Name prefixes of the features that change sign in the mirrored market."""


def _bars(k: int) -> str:
    return f"{k} bar" if k == 1 else f"{k} bars"


def feature_specs(cfg: FeatureConfig) -> list[FeatureSpec]:
    """Every column in order, with the first row at which it is defined (its warm-up)."""
    unit = max(cfg.vol_windows)
    out: list[FeatureSpec] = []

    def add(group: str, name: str, warmup: int, description: str) -> None:
        out.append(FeatureSpec(name, group, warmup, description, -1 if name.startswith(DIRECTIONAL)
                               else 1))

    for g in cfg.groups:
        if g == "returns":
            for k in cfg.returns_lags:
                add(g, f"ret_{k}", k, f"log return over {_bars(k)}")
        elif g == "volatility":
            for w in cfg.vol_windows:
                add(g, f"rv_{w}", w, f"realised vol: RMS of 1-bar log returns over {_bars(w)}")
                add(g, f"pk_{w}", w - 1, f"Parkinson high-low range vol over {_bars(w)}")
                add(g, f"gk_{w}", w - 1, f"Garman-Klass OHLC vol over {_bars(w)}")
                add(g, f"atr_{w}", w, f"mean log true range (ATR / price) over {_bars(w)}")
            if len(cfg.vol_windows) > 1:
                short = cfg.vol_windows[0]
                add(g, "rv_ratio", unit, f"log(rv_{short} / rv_{unit}): vol regime shift")
        elif g == "volume":
            add(g, "ofi", 0, "order-flow imbalance (buy-sell)/(buy+sell) of the bar; "
                "sign(close-open) when the bars carry no buy/sell volume")
            for w in cfg.volume_windows:
                add(g, f"ofi_{w}", w - 1, f"order-flow imbalance over {_bars(w)}")
                add(g, f"logvol_{w}", w - 1, f"log(1+volume) minus its mean over {_bars(w)}")
        elif g == "trend":
            for w in cfg.trend_windows:
                add(g, f"ema_dist_{w}", max(2 * w, unit),
                    f"log close minus its EMA (span {w}), in units of rv_{unit} * sqrt({w})")
                add(g, f"zscore_{w}", w - 1,
                    f"z-score of log close within {_bars(w)} (mean reversion)")
                add(g, f"rsi_{w}", w,
                    f"RSI-like, -1..1: sum of 1-bar returns / sum of their sizes over {_bars(w)}")
                add(g, f"chan_{w}", w - 1,
                    f"close within the high-low channel of {_bars(w)}, -0.5..0.5")
        elif g == "crosses":
            for fast, slow in cfg.cross_pairs:
                add(g, f"cross_{fast}_{slow}", max(slow - 1, unit),
                    f"mean log close over {_bars(fast)} minus over {_bars(slow)} (a moving-"
                    f"average cross), in units of rv_{unit} * sqrt({slow})")
        elif g == "time":
            add(g, "tod_sin", 0, "time of day in the session's zone, sine")
            add(g, "tod_cos", 0, "time of day in the session's zone, cosine")
            add(g, "dow_sin", 0, "day of week (plus time of day), sine")
            add(g, "dow_cos", 0, "day of week (plus time of day), cosine")
            add(g, "session_elapsed", 0,
                "time since the session opened / session length, 0..1 (1 outside the session)")
            add(g, "session_to_close", 0,
                "log(1 + minutes to the session close) / log(1 + session minutes), 0..1")
    return out
