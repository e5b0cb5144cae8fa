"""What a supervised learner extracts from the agent's own observations: a diagnostic for
`docs/learning.md`, beside `bench_learning.py`.

For each market, seed and walk-forward fold (the trainer's split), on the features the agent
sees (the shipped feature config, or --trend-windows):
1. the t-statistic, over the training window, of each feature's correlation with the next
   bar's return (the strongest five are reported): how much signal the training window holds;
2. a ridge regression of the next-h-bar log return on every feature, fitted on the training
   window, traded with a dead band (go long/short when the prediction passes +-k costs, else
   keep the position): ridge strength, horizon h and band k are all chosen on the validation
   window, then the chosen model is run once on the test window. Costs: the instrument's
   slippage (1 tick) and commission per side on one contract; positions change at the close.

If this honest, cost-aware linear model earns on test what the validation-chosen rule earns,
the observations carry the signal and the agent's learning is what falls short; if it does not,
the observations are the bottleneck.

    python benchmarks/supervised_ceiling.py --markets trend,reversion,ar,garch_noise --seeds 0,1,2

`--quick` (CI runs it, in seconds): the trend market, seed 0, 4,000 bars, 2 folds, unless given.
Prints one JSON document on stdout (or to --out); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _run import run_main
from bench_learning import load_market

from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.training.walkforward import WalkForwardConfig, WalkForwardSplit

RIDGE = (1.0, 100.0, 10_000.0)  # x the number of training rows' scale-free penalty
HORIZONS = (1, 16, 64)
BANDS = (0.0, 0.5, 1.0, 2.0)  # dead band, in costs per side
FULL = {"markets": "trend,reversion,ar,garch_noise", "seeds": "0,1,2", "bars": 30_000, "folds": 3}
QUICK = {"markets": "trend", "seeds": "0", "bars": 4_000, "folds": 2}


def fit_ridge(x: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    x1 = np.c_[x, np.ones(len(x))]
    penalty = lam * np.eye(x1.shape[1])
    penalty[-1, -1] = 0.0
    return np.linalg.solve(x1.T @ x1 + penalty, x1.T @ y)


def trade(pred: np.ndarray, band: float) -> np.ndarray:
    """Positions (+1/-1/0) from predictions in cost units: enter or flip past +-band, else hold."""
    pos = np.zeros(len(pred))
    held = 0.0
    for i, p in enumerate(pred):
        if p > band:
            held = 1.0
        elif p < -band:
            held = -1.0
        pos[i] = held
    return pos


def net_returns(pos: np.ndarray, close: np.ndarray, cost: float) -> np.ndarray:
    """Per-bar points of holding pos[i] from close[i] to close[i+1], less changes' costs."""
    moves = np.diff(close)
    turns = np.abs(np.diff(pos, prepend=0.0))
    return pos[:-1] * moves - turns[:-1] * cost


def sharpe(r: np.ndarray, ppy: float) -> float:
    sd = r.std()
    return float(r.mean() / sd * np.sqrt(ppy)) if sd > 0 else 0.0


def run_fold(features: np.ndarray, names: list[str], close: np.ndarray, fold, cost: float,
             ppy: float, horizons: tuple[int, ...] = HORIZONS) -> dict:
    logc = np.log(close)
    train = np.arange(fold.train.start, fold.train.stop - max(horizons))
    ret1 = logc[train + 1] - logc[train]
    t_stats = sorted(((float(np.corrcoef(features[train, j], ret1)[0, 1] * np.sqrt(len(train))),
                       names[j]) for j in range(features.shape[1])), key=lambda c: -abs(c[0]))
    cost_log = cost / close.mean()

    def evaluate(beta: np.ndarray, h: int, band: float, window) -> tuple[float, int]:
        idx = np.arange(window.start, window.stop)
        pred = (np.c_[features[idx], np.ones(len(idx))] @ beta) / h / cost_log
        pos = trade(pred, band)
        r = net_returns(pos, close[idx], cost)
        return sharpe(r, ppy), int(np.abs(np.diff(pos)).sum() / 2)

    best = None
    for lam, h in itertools.product(RIDGE, horizons):
        y = logc[train + h] - logc[train]
        beta = fit_ridge(features[train], y, lam * len(train) / 1_000)
        for band in BANDS:
            val, _ = evaluate(beta, h, band, fold.val)
            if best is None or val > best[0]:
                best = (val, lam, h, band, beta)
    val, lam, h, band, beta = best
    test, turns = evaluate(beta, h, band, fold.test)
    return {"fold": fold.index, "top_train_t": [[n, round(t, 2)] for t, n in t_stats[:5]],
            "chosen": {"ridge": lam, "horizon": h, "band": band}, "val_sharpe": val,
            "test_sharpe": test, "test_round_trips": turns}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markets", help=f"default {FULL['markets']}; quick {QUICK['markets']}")
    ap.add_argument("--seeds", help=f"default {FULL['seeds']}; quick {QUICK['seeds']}")
    ap.add_argument("--bars", type=int, help=f"default {FULL['bars']:,}; quick {QUICK['bars']:,}")
    ap.add_argument("--folds", type=int, help=f"default {FULL['folds']}; quick {QUICK['folds']}")
    ap.add_argument("--quick", action="store_true", help="one small market (CI, seconds)")
    ap.add_argument("--trend-windows", default=None, help="e.g. 8,32,128,512")
    ap.add_argument("--groups", default=None, help="feature groups, e.g. trend,crosses")
    ap.add_argument("--horizons", default=None, help="e.g. 1,16,64,256 (default 1,16,64)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    over: dict = {}
    if args.trend_windows:
        over["trend_windows"] = [int(w) for w in args.trend_windows.split(",")]
    if args.groups:
        over["groups"] = args.groups.split(",")
    feat_cfg = FeatureConfig(**over)
    horizons = tuple(int(h) for h in args.horizons.split(",")) if args.horizons else HORIZONS
    pipe = FeaturePipeline(feat_cfg)
    doc = {"quick": args.quick, "features": feat_cfg.model_dump(mode="json"),
           "horizons": list(horizons), "markets": []}
    for name in args.markets.split(","):
        seeds = []
        for seed in (int(s) for s in args.seeds.split(",")):
            market = load_market(name, args.bars, seed)
            bars, inst = market.bars, market.instrument
            close = np.asarray(bars.close, dtype=np.float64)
            cost = inst.tick_size + inst.commission / inst.point_value
            split = WalkForwardSplit(WalkForwardConfig(folds=args.folds), len(bars),
                                     first=pipe.warmup)
            folds = []
            for fold in split.folds():
                fm = pipe.transform(bars, fit_until=fold.train.stop)
                folds.append(run_fold(np.nan_to_num(fm.values), list(fm.names), close, fold,
                                      cost, market.periods_per_year, horizons))
            mean = float(np.mean([f["test_sharpe"] for f in folds]))
            seeds.append({"seed": seed, "folds": folds, "mean_test_sharpe": mean})
            print(f"{name} seed {seed}: test Sharpe {mean:+.2f} "
                  + "  ".join(f"[{f['test_sharpe']:+.1f} val {f['val_sharpe']:+.1f} "
                              f"h={f['chosen']['horizon']} band={f['chosen']['band']} "
                              f"trips={f['test_round_trips']}]" for f in folds)
                  + f"  top train t: {folds[0]['top_train_t'][:3]}", file=sys.stderr)
        means = [s["mean_test_sharpe"] for s in seeds]
        doc["markets"].append({"market": name, "seeds": seeds, "mean": float(np.mean(means)),
                               "sd": float(np.std(means))})
        print(f"== {name}: {np.mean(means):+.2f} +- {np.std(means):.2f}", file=sys.stderr)
    text = json.dumps(doc, indent=2)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    run_main(main, "supervised_ceiling")
