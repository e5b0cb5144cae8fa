"""Small hand-made report data sets for the report tests."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

T0 = 1_704_205_800_000_000_000  # 2024-01-02 14:30 UTC, ns
MINUTE = 60_000_000_000


def minute_ts(n: int, per_session: int = 390) -> list[int]:
    """1-minute bars in daily sessions of `per_session` bars."""
    i = np.arange(n)
    return (T0 + (i // per_session) * 86_400_000_000_000 + (i % per_session) * MINUTE).tolist()


def series(
    n: int = 400,
    name: str = "fold 0 test",
    seed: int = 0,
    components: bool = True,
    direction: bool = True,
    trades: bool = True,
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    ts = minute_ts(n)
    close = 4000 + np.cumsum(rng.normal(0, 1, n)).round(2)
    pos = np.zeros(n, dtype=int)
    pos[n // 10 : n // 4] = 1
    pos[n // 2 : 3 * n // 4] = -1
    pnl = np.concatenate(([0.0], pos[:-1] * np.diff(close) * 50))
    s: dict[str, Any] = {
        "name": name,
        "ts": ts,
        "close": close.tolist(),
        "equity": {
            "agent": (100_000 + np.cumsum(pnl)).tolist(),
            "buy-and-hold": (100_000 + 50 * (close - close[0])).tolist(),
            "flat": [100_000.0] * n,
        },
    }
    if trades:
        s["trades"] = [
            {
                "entry_ts": ts[n // 10],
                "exit_ts": ts[n // 4],
                "entry_price": float(close[n // 10]),
                "exit_price": float(close[n // 4]),
                "side": "long",
                "contracts": 1.0,
                "pnl": float(pnl[n // 10 + 1 : n // 4 + 1].sum()),
                "exit_reason": "signal",
            },
            {
                "entry_ts": ts[n // 2],
                "exit_ts": ts[3 * n // 4],
                "entry_price": float(close[n // 2]),
                "exit_price": float(close[3 * n // 4]),
                "side": "short",
                "contracts": 2.0,
                "pnl": float(pnl[n // 2 + 1 : 3 * n // 4 + 1].sum()),
                "exit_reason": "trailing stop",
            },
        ]
    if direction:
        s["direction"] = np.where(pos > 0, 1, np.where(pos < 0, 2, 0)).tolist()
    if components:
        s["components"] = {
            "pnl": pnl.tolist(),
            "cost": (-np.abs(np.diff(pos, prepend=0)) * 14.5).tolist(),
        }
    return s


def fold(k: int, baselines: bool = True) -> dict[str, Any]:
    f: dict[str, Any] = {
        "fold": k,
        "windows": {
            "train": [0, 1000 + 500 * k],
            "val": [1000 + 500 * k, 1250 + 500 * k],
            "test": [1250 + 500 * k, 1500 + 500 * k],
        },
        "best_epoch": 2,
        "val": {"sharpe": 1.25 + k, "return": 0.0123, "max_drawdown": 0.02, "trades": 12},
        "test": {"sharpe": 0.75 - k, "return": -0.0045, "max_drawdown": 0.031, "trades": 9},
    }
    if baselines:
        f["baselines"] = {
            "buy-and-hold": {"sharpe": 0.5, "return": 0.01},
            "flat": {"sharpe": 0.0, "return": 0.0},
        }
    return f


def training(folds: int = 2, epochs: int = 4) -> list[dict[str, Any]]:
    return [
        {
            "fold": k,
            "epoch": e,
            "loss": 1.0 / (e + 1),
            "mean_q": 0.1 * e,
            "td_p99": 2.0,
            "grad_norm": 1.0,
            "flat": 0.5,
            "action_mix": [[0.5, 0.25, 0.25]] * 3,
            "val": {"sharpe": 0.2 * e - k},
        }
        for k in range(folds)
        for e in range(epochs)
    ]


def report(n_series: int = 2, n: int = 400, folds: int = 2) -> dict[str, Any]:
    """A full data set: `folds` folds, `n_series` series (the first with components)."""
    return copy.deepcopy(
        {
            "title": "Test report",
            "generated": "2024-06-01T12:00:00+00:00",
            "symbol": "ES",
            "bars": "1m",
            "folds": [fold(k) for k in range(folds)],
            "training": training(folds),
            "series": [
                series(n, f"fold {k} test", seed=k, components=(k == 0)) for k in range(n_series)
            ],
            "metrics": [
                {
                    "policy": "agent",
                    "window": "fold 0 test",
                    "sharpe": 0.75,
                    "return": -0.0045,
                    "max_drawdown": 0.031,
                    "trades": 9,
                    "profit_factor": float("inf"),
                    "sortino": None,
                }
            ],
        }
    )


def minimal() -> dict[str, Any]:
    return {"title": "Minimal", "symbol": "ES", "bars": "1m"}
