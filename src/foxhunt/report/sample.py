"""Plausible report data from a synthetic market, for the docs screenshot and the tests.

The "agent" is a noisy reader of the synthetic market's planted signal (so it earns a modest
edge), traded against flat, buy-and-hold and SMA-cross baselines on 1-minute ES-like bars with
$50 points and per-contract costs. The numbers are illustrative, not a trained model's.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np

from foxhunt.data.synth import generate
from foxhunt.metrics import (
    compounded_equity,
    max_drawdown,
    periods_per_year_from_ts,
    sharpe,
    total_return,
)

POINT_VALUE = 50.0
COST_PER_CONTRACT = 14.5  # commission + half a tick of slippage, dollars
CAPITAL = 100_000.0


def _sma(x: np.ndarray, n: int) -> np.ndarray:
    c = np.cumsum(np.concatenate(([0.0], x)))
    out = np.full(x.size, np.nan)
    out[n - 1 :] = (c[n:] - c[:-n]) / n
    return out


def _agent_positions(signal: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Enter on a strong noisy signal reading, leave when it fades; -1, 0 or +1 per bar."""
    noisy = signal + 0.7 * rng.standard_normal(signal.size)
    pos = np.zeros(signal.size)
    cur = 0.0
    for t, s in enumerate(noisy):
        if cur == 0 and abs(s) > 2.0:
            cur = math.copysign(1.0, s)
        elif cur != 0 and (cur * s < -0.4 or rng.random() < 0.01):
            cur = 0.0
        pos[t] = cur
    return pos


def _run(close: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bar gross PnL and costs of holding `pos[t-1]` over bar t; equity from CAPITAL."""
    held = np.concatenate(([0.0], pos[:-1]))
    gross = held * np.diff(close, prepend=close[0]) * POINT_VALUE
    cost = np.abs(np.diff(pos, prepend=0.0)) * COST_PER_CONTRACT
    return gross, cost, CAPITAL + np.cumsum(gross - cost)


def _trades(
    ts: np.ndarray, close: np.ndarray, pos: np.ndarray, net: np.ndarray, rng: np.random.Generator
) -> list[dict[str, Any]]:
    out = []
    t, n = 0, pos.size
    while t < n:
        if pos[t] == 0:
            t += 1
            continue
        side, start = pos[t], t
        while t < n and pos[t] == side:
            t += 1
        end = min(t, n - 1)
        reason = "window end" if t >= n else ("trailing stop" if rng.random() < 0.2 else "signal")
        out.append(
            {
                "entry_ts": int(ts[start]),
                "exit_ts": int(ts[end]),
                "entry_price": float(close[start]),
                "exit_price": float(close[end]),
                "side": "long" if side > 0 else "short",
                "contracts": 1.0,
                "pnl": round(float(net[start + 1 : end + 1].sum()) - COST_PER_CONTRACT, 2),
                "exit_reason": reason,
            }
        )
    return out


def _metrics(
    ts: np.ndarray, equity: np.ndarray, n_trades: int, trades: list[dict[str, Any]] | None
) -> dict:
    r = np.diff(equity) / CAPITAL  # bars 1..n-1, as metrics.summary counts them
    ppy = periods_per_year_from_ts(ts)
    wins = [t["pnl"] > 0 for t in trades] if trades else []
    return {
        "sharpe": sharpe(r, ppy),
        "return": total_return(r),
        "max_drawdown": max_drawdown(compounded_equity(r)),
        "periods_per_year": ppy,
        "trades": n_trades,
        "win_rate": float(np.mean(wins)) if wins else None,
    }


def sample_report_data(
    n_folds: int = 3, test_bars: int = 2000, epochs: int = 12, seed: int = 7
) -> dict[str, Any]:
    """A complete report data dict (every optional field filled) from a synthetic market."""
    rng = np.random.default_rng(seed)
    val_bars, train_bars = test_bars // 2, 3 * test_bars
    n = train_bars + n_folds * (val_bars + test_bars)
    market = generate({"n_bars": n, "seed": seed, "signal_strength": 0.12})
    ts, close = market.bars.ts, market.bars.close
    agent_pos = _agent_positions(market.signal, rng)
    fast, slow = _sma(close, 30), _sma(close, 120)
    sma_pos = np.nan_to_num(np.sign(fast - slow))
    policies = {
        "agent": agent_pos,
        "buy-and-hold": np.ones(n),
        "sma 30/120": sma_pos,
        "flat": np.zeros(n),
    }

    folds, series, metrics, training = [], [], [], []
    for k in range(n_folds):
        tr = (0, train_bars + k * (val_bars + test_bars))
        va = (tr[1], tr[1] + val_bars)
        te = (va[1], va[1] + test_bars)
        results: dict[str, dict[str, Any]] = {}
        equity: dict[str, list[float]] = {}
        for name, pos_all in policies.items():
            for window, (a, b) in (("val", va), ("test", te)):
                pos = pos_all[a:b].copy()
                pos[-1] = 0.0  # flat at the window's end
                gross, cost, eq = _run(close[a:b], pos)
                trades = (
                    _trades(ts[a:b], close[a:b], pos, gross - cost, rng)
                    if name == "agent"
                    else None
                )
                n_tr = int(np.count_nonzero(np.diff(pos, prepend=0.0)))
                results[f"{name}/{window}"] = _metrics(ts[a:b], eq, n_tr, trades)
                if window == "test":
                    equity[name] = eq.tolist()
                    if name == "agent":
                        agent_trades, comps = trades, (gross, cost, pos)
                    metrics.append(
                        {"policy": name, "window": f"fold {k} test", **results[f"{name}/test"]}
                    )
        gross, cost, pos = comps
        flat = pos == 0
        direction = np.where(pos > 0, 1, np.where(pos < 0, 2, 0))
        dd = CAPITAL + np.cumsum(gross - cost)
        dd_growth = np.diff(np.fmax.accumulate(dd) - dd, prepend=0.0).clip(min=0)
        series.append(
            {
                "name": f"fold {k} test",
                "fold": k,
                "ts": ts[te[0] : te[1]].tolist(),
                "close": close[te[0] : te[1]].tolist(),
                "equity": equity,
                "trades": agent_trades,
                "direction": direction.tolist(),
                "components": {
                    "pnl": gross.tolist(),
                    "cost": (-cost).tolist(),
                    "drawdown_penalty": (-0.05 * dd_growth).tolist(),
                    "hold_cost": np.where(flat, -0.4, 0.0).tolist(),
                },
            }
        )
        val_target = results["agent/val"]["sharpe"]
        curve = []
        for e in range(epochs):
            progress = 1 - math.exp(-3 * (e + 1) / epochs)
            vs = val_target * progress + (0.3 + 0.1 * abs(val_target)) * rng.standard_normal()
            curve.append(vs)
            p_flat = 0.7 - 0.3 * progress + 0.03 * rng.standard_normal()
            p_long = (1 - p_flat) * (0.5 + 0.05 * rng.standard_normal())
            training.append(
                {
                    "fold": k,
                    "epoch": e,
                    "loss": 0.9 * math.exp(-2.2 * e / epochs) + 0.05 + 0.02 * rng.random(),
                    "mean_q": 0.4 * progress + 0.02 * rng.standard_normal(),
                    "td_p99": 2.5 * math.exp(-e / epochs) + 0.1,
                    "grad_norm": 1.5 * math.exp(-e / epochs) + 0.2 * rng.random(),
                    "flat": p_flat,
                    "action_mix": [
                        [p_flat, p_long, 1 - p_flat - p_long],
                        [0.4, 0.35, 0.25],
                        [0.5, 0.3, 0.2],
                    ],
                    "val": {"sharpe": vs, "return": vs / 200, "trades": int(40 + 5 * e)},
                }
            )
        best = int(np.argmax(curve))
        folds.append(
            {
                "fold": k,
                "windows": {"train": list(tr), "val": list(va), "test": list(te)},
                "window_times": {
                    w: [int(ts[a]), int(ts[b - 1])]
                    for w, (a, b) in (("train", tr), ("val", va), ("test", te))
                },
                "best_epoch": best,
                "val": results["agent/val"],
                "test": results["agent/test"],
                "baselines": {p: results[f"{p}/test"] for p in policies if p != "agent"},
            }
        )
    return {
        "title": "ES walk-forward: synthetic demo",
        "kind": "run",
        "symbol": "ES",
        "bars": "1m",
        "tick_size": 0.25,
        "generated": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "folds": folds,
        "training": training,
        "series": series,
        "metrics": metrics,
    }
