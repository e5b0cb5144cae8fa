"""Data-layer benchmark: ticks -> 1-minute bars, and the feature pipeline, each against pandas.

1. resample: a generated ES-like tick file (int64 ns timestamps over several ~23 h sessions with
   a U-shaped intraday intensity and random quiet gaps, prices random-walking on a 0.25 grid,
   sizes 1-20; seeded) is written as Parquet, read back, and resampled to 1-minute bars by
   `foxhunt.data.resample.resample` and by a straightforward pandas version of the same job
   (DatetimeIndex, `resample('1min', label='right', closed='left')`, ohlc + volume, tick-rule
   buy/sell volume computed vectorised, empty minutes dropped). Parquet read times are
   reported separately from the resample times. Target: >= 5M ticks/s and >= 2x pandas.
2. features: `FeaturePipeline(FeatureConfig(), ES session).transform(bars)` (causal rolling
   z-score normalisation) on synthetic 1-minute bars, against an idiomatic pandas version of
   the same 38 features (rolling / ewm / shift / tz_convert) and the same rolling z-score.
   Values are compared column by column. Target: >= 2M bars/s and >= 2x pandas.

`--quick` (CI runs it, in seconds): 200,000 ticks, 20,000 bars, one run each.

Every figure is the best (minimum) wall time of `--repeat` runs (time.perf_counter); all runs
are kept in the JSON. The 1-minute load average is recorded around each section, since a
shared host slows everything down. Targets are reported as `target_met` booleans and never
change the exit status. Prints one JSON document on stdout; progress goes to stderr.

    .venv/bin/python benchmarks/bench_data.py --out bench_data.json
    .venv/bin/python benchmarks/bench_data.py --quick
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from _common import _cpu_model, emit, log, run_main

from foxhunt.data.instruments import Session
from foxhunt.data.resample import resample
from foxhunt.data.series import Bars, BarSpec, Ticks
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline

NS_PER_S = 1_000_000_000
NS_PER_MIN = 60 * NS_PER_S
ES_SESSION = Session(tz="America/Chicago", open="17:00", close="16:00")
TICKS_TARGET = 5e6
BARS_TARGET = 2e6
SPEEDUP_TARGET = 2.0


# -- timing ----------------------------------------------------------------------------------


def best_of(fn: Callable[[], Any], repeat: int, label: str) -> tuple[float, list[float], Any]:
    """(best wall seconds, every run's seconds, the last result) of `repeat` calls of `fn`."""
    runs, result = [], None
    for i in range(repeat):
        result = None
        gc.collect()
        t = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - t)
        log(f"  {label} run {i + 1}/{repeat}: {runs[-1]:.3f} s")
    return min(runs), [round(r, 4) for r in runs], result


def load_1m() -> float:
    return round(os.getloadavg()[0], 2)


# -- 1. ticks -> 1-minute bars ---------------------------------------------------------------


def make_ticks(n: int, seed: int = 0, n_sessions: int | None = None) -> pa.Table:
    """ES-like trades: 23 h Globex-like sessions opening 23:00 UTC Sunday..Thursday, about 1M
    trades a session; arrival intensity U-shaped over the session with a busy cash open; rare
    quiet gaps (minutes) leave empty minutes; price steps of -1/0/+1 tick; sizes 1-20, mostly
    small. Timestamps are sorted int64 ns, and may repeat (several trades in one ns)."""
    rng = np.random.default_rng(seed)
    n_sessions = n_sessions or max(1, round(n / 1_000_000))
    span = 23 * 3600 * NS_PER_S
    first = int(pd.Timestamp("2024-03-03 23:00", tz="UTC").value)  # Sunday, 17:00 Chicago
    days = pd.bdate_range("2024-03-04", periods=n_sessions)  # each opens the eve of a weekday
    opens = first + (days - days[0]).days.to_numpy().astype(np.int64) * 86_400 * NS_PER_S
    counts = np.full(n_sessions, n // n_sessions)
    counts[: n % n_sessions] += 1
    ts = np.empty(n, dtype=np.int64)
    pos = 0
    for s, k in enumerate(counts):
        u = (np.arange(k) + 0.5) / k  # place in the session, by trade count
        # cash session (~16.5 h after the 17:00 open) 10x busier than overnight
        quiet = 1.0 + 9.0 * ((u > 0.68) & (u < 0.97))
        gaps = rng.exponential(1.0, k) / quiet
        gaps[rng.random(k) < 2e-5] += rng.exponential(2000.0, 1).item()  # quiet spells
        t = np.cumsum(gaps)
        ts[pos : pos + k] = opens[s] + (t / t[-1] * (span - 1)).astype(np.int64)
        pos += k
    steps = rng.choice(np.array([-1, 0, 1], dtype=np.int64), size=n, p=[0.2, 0.6, 0.2])
    price = 4000.0 + 0.25 * np.cumsum(steps)
    size = np.minimum(rng.geometric(0.35, n), 20).astype(np.int64)
    return pa.table({"ts": ts, "price": price, "size": size})


def pandas_resample(df: pd.DataFrame) -> pd.DataFrame:
    """The same job in plain pandas: 1-minute bars stamped with their close, tick-rule flow."""
    df = df.set_index(pd.to_datetime(df["ts"], unit="ns", utc=True))
    side = np.sign(df["price"].diff()).replace(0.0, np.nan).ffill().fillna(0.0)
    df["buy"] = df["size"] * (side + 1.0) * 0.5
    r = df.resample("1min", label="right", closed="left")
    bars = r["price"].ohlc()
    bars["volume"] = r["size"].sum()
    bars["buy_volume"] = r["buy"].sum()
    bars = bars.dropna(subset=["open"])
    bars["sell_volume"] = (bars["volume"] - bars["buy_volume"]).clip(lower=0.0)
    return bars


def bench_resample(n_ticks: int, repeat: int, tmp: Path) -> dict[str, Any]:
    log(f"resample: generating {n_ticks:,} ticks")
    table = make_ticks(n_ticks)
    path = tmp / "ticks.parquet"
    pq.write_table(table, path)
    file_mb = path.stat().st_size / 2**20
    del table
    load_before = load_1m()

    def fox_read() -> Ticks:
        return Ticks.from_arrow(pq.read_table(path))

    def pd_read() -> pd.DataFrame:
        return pd.read_parquet(path)

    spec = BarSpec.parse("1min")
    fox_read_s, fox_read_runs, ticks = best_of(fox_read, repeat, "foxhunt read")
    fox_s, fox_runs, fox = best_of(lambda: resample(ticks, spec), repeat, "foxhunt resample")
    pd_read_s, pd_read_runs, df = best_of(pd_read, repeat, "pandas read")
    pd_s, pd_runs, pdb = best_of(lambda: pandas_resample(df), repeat, "pandas resample")

    pd_ts = pdb.index.as_unit("ns").asi8
    same_ts = len(fox) == len(pdb) and np.array_equal(fox.ts, pd_ts)
    ohlcv = ("open", "high", "low", "close", "volume")
    same_ohlcv = same_ts and all(
        np.array_equal(getattr(fox, c), pdb[c].to_numpy()) for c in ohlcv
    )
    flow_diff = (
        max(float(np.max(np.abs(getattr(fox, c) - pdb[c].to_numpy())))
            for c in ("buy_volume", "sell_volume"))
        if same_ts else None
    )
    n = len(ticks)
    fox_rate, pd_rate = n / fox_s, n / pd_s
    speedup = pd_s / fox_s
    return {
        "ticks": n,
        "sessions": int(max(1, round(n_ticks / 1_000_000))),
        "bars": len(fox),
        "pandas_bars": len(pdb),
        "parquet_mb": round(file_mb, 1),
        "foxhunt_read_s": round(fox_read_s, 4),
        "pandas_read_s": round(pd_read_s, 4),
        "foxhunt_s": round(fox_s, 4),
        "foxhunt_ticks_per_s": round(fox_rate),
        "pandas_s": round(pd_s, 4),
        "pandas_ticks_per_s": round(pd_rate),
        "speedup": round(speedup, 2),
        "foxhunt_read_plus_resample_ticks_per_s": round(n / (fox_read_s + fox_s)),
        "same_result": bool(same_ohlcv),
        "same_ts": bool(same_ts),
        "buy_sell_volume_max_abs_diff": flow_diff,
        "runs_s": {"foxhunt_read": fox_read_runs, "foxhunt": fox_runs,
                   "pandas_read": pd_read_runs, "pandas": pd_runs},
        "load_avg_1m": {"before": load_before, "after": load_1m()},
        "target_ticks_per_s": TICKS_TARGET,
        "target_speedup": SPEEDUP_TARGET,
        "target_met": bool(fox_rate >= TICKS_TARGET and speedup >= SPEEDUP_TARGET),
        "note": "rates are over resample time only (data already in memory); read times are "
                "Parquet -> foxhunt Ticks (pyarrow -> numpy) and Parquet -> pandas DataFrame",
    }


# -- 2. features on bars ---------------------------------------------------------------------

_GK_K = 2.0 * math.log(2.0) - 1.0
_PK_K = 1.0 / (4.0 * math.log(2.0))
VOL_FLOOR = 1e-10


def _guard(num: pd.Series, den: pd.Series) -> pd.Series:
    """num / den where den > 0, else 0 (foxhunt's safe_div)."""
    return (num / den).where(den > 0.0, 0.0)


def pandas_raw(df: pd.DataFrame, cfg: FeatureConfig, session: Session) -> pd.DataFrame:
    """foxhunt's raw features (definitions in src/foxhunt/features/pipeline.py), in pandas."""
    lc, lh, ll, lo = (np.log(df[c]) for c in ("close", "high", "low", "open"))
    r1 = lc.diff()
    out: dict[str, pd.Series] = {}
    for k in cfg.returns_lags:
        out[f"ret_{k}"] = lc.diff(k)

    hl, co, prev = lh - ll, lc - lo, lc.shift(1)
    hl2, r2 = hl**2, r1**2
    gk_terms = 0.5 * hl2 - _GK_K * co**2
    true_range = np.maximum(lh, prev) - np.minimum(ll, prev)
    rv = {}
    for w in cfg.vol_windows:
        rv[w] = r2.rolling(w).mean().clip(lower=0.0) ** 0.5
        out[f"rv_{w}"] = rv[w]
        out[f"pk_{w}"] = (hl2.rolling(w).mean() * _PK_K).clip(lower=0.0) ** 0.5
        out[f"gk_{w}"] = gk_terms.rolling(w).mean().clip(lower=0.0) ** 0.5
        out[f"atr_{w}"] = true_range.rolling(w).mean()
    unit_w = max(cfg.vol_windows)
    if len(cfg.vol_windows) > 1:
        out["rv_ratio"] = np.log(rv[cfg.vol_windows[0]].clip(lower=VOL_FLOOR)
                                 / rv[unit_w].clip(lower=VOL_FLOOR))

    if "buy_volume" in df:
        signed, total = df["buy_volume"] - df["sell_volume"], df["buy_volume"] + df["sell_volume"]
    else:
        signed, total = np.sign(df["close"] - df["open"]) * df["volume"], df["volume"]
    logv = np.log1p(df["volume"])
    out["ofi"] = _guard(signed, total)
    for w in cfg.volume_windows:
        out[f"ofi_{w}"] = _guard(signed.rolling(w).sum(), total.rolling(w).sum())
        out[f"logvol_{w}"] = logv - logv.rolling(w).mean()

    unit = rv[unit_w].clip(lower=VOL_FLOOR)
    moves = r1.abs()
    for w in cfg.trend_windows:
        out[f"ema_dist_{w}"] = (lc - lc.ewm(span=w, adjust=False).mean()) / (unit * math.sqrt(w))
        roll = lc.rolling(w)
        std = roll.std(ddof=0)
        out[f"zscore_{w}"] = ((lc - roll.mean()) / std).where(std > 0.0, 0.0)
        out[f"rsi_{w}"] = _guard(lc.diff(w), moves.rolling(w).sum())
        top, bottom = lh.rolling(w).max(), ll.rolling(w).min()
        out[f"chan_{w}"] = _guard(lc - 0.5 * (top + bottom), top - bottom)

    local = df.index.tz_convert(session.tz).tz_localize(None)
    minute = np.asarray((local - local.normalize()) / pd.Timedelta(minutes=1))
    day_frac = minute / 1440.0
    week = (np.asarray(local.day_of_week) + day_frac) / 7.0
    open_min = session.minutes("open")
    length = float((session.minutes("close") - open_min) % 1440 or 1440)
    since = np.mod(minute - open_min, 1440.0)
    since[since == 0.0] = 1440.0
    out["tod_sin"] = np.sin(2 * np.pi * day_frac)
    out["tod_cos"] = np.cos(2 * np.pi * day_frac)
    out["dow_sin"] = np.sin(2 * np.pi * week)
    out["dow_cos"] = np.cos(2 * np.pi * week)
    out["session_elapsed"] = np.minimum(since, length) / length
    out["session_to_close"] = np.log1p(np.maximum(length - since, 0.0)) / np.log1p(length)
    return pd.DataFrame({k: np.asarray(v, dtype=np.float64) for k, v in out.items()},
                        index=df.index)


def pandas_features(
    df: pd.DataFrame, cfg: FeatureConfig, session: Session, fixed: list[str], valid_from: int
) -> np.ndarray:
    """Raw features, then a causal rolling z-score over `norm_window` rows (clock features pass
    through), clipped, zero before `valid_from`; float32 [T, F] like foxhunt's output."""
    raw = pandas_raw(df, cfg, session)
    scaled = raw.drop(columns=fixed)
    roll = scaled.rolling(cfg.norm_window)
    std = roll.std(ddof=0)
    z = ((scaled - roll.mean()) / std).where(std > 1e-12, 0.0).clip(-cfg.clip, cfg.clip)
    out = pd.concat([z, raw[fixed]], axis=1)[raw.columns].fillna(0.0)
    out.iloc[:valid_from] = 0.0
    return out.to_numpy(dtype=np.float32)


def bars_frame(bars: Bars) -> pd.DataFrame:
    cols = {k: v for k, v in bars.columns().items() if k != "ts" and v is not None}
    return pd.DataFrame(cols, index=pd.to_datetime(bars.ts, unit="ns", utc=True))


def bench_features(n_bars: int, repeat: int) -> dict[str, Any]:
    log(f"features: generating {n_bars:,} synthetic 1-minute bars")
    bars = generate(SynthConfig(n_bars=n_bars, seed=0)).bars
    cfg = FeatureConfig()
    pipe = FeaturePipeline(cfg, ES_SESSION)
    fixed = [s.name for s in pipe.specs if s.group == "time"]
    df = bars_frame(bars)
    load_before = load_1m()

    fox_s, fox_runs, fm = best_of(lambda: pipe.transform(bars), repeat, "foxhunt features")
    threads = torch.get_num_threads()
    one_thread = None
    if threads > 1:  # diagnostic: torch's OpenMP scans suffer most on a busy host
        torch.set_num_threads(1)
        try:
            s1, runs1, _ = best_of(lambda: pipe.transform(bars), repeat,
                                   "foxhunt features (torch 1 thread)")
        finally:
            torch.set_num_threads(threads)
        one_thread = {"foxhunt_s": round(s1, 4), "bars_per_s": round(n_bars / s1),
                      "runs_s": runs1}
    pd_s, pd_runs, pdv = best_of(
        lambda: pandas_features(df, cfg, ES_SESSION, fixed, pipe.rolling_valid_from),
        repeat, "pandas features")

    # column-by-column comparison: the normalised matrices (rows >= valid_from) and the raw
    # features (rows >= each feature's warm-up)
    raw_fox = pipe.raw(bars)
    raw_pd = pandas_raw(df, cfg, ES_SESSION).to_numpy()
    v0 = fm.valid_from
    per_feature = {}
    for i, spec in enumerate(pipe.specs):
        a = raw_fox[spec.warmup :, i].astype(np.float64)
        b = raw_pd[spec.warmup :, i]
        per_feature[spec.name] = {
            "normalised_max_abs_diff": float(np.max(np.abs(fm.values[v0:, i] - pdv[v0:, i]))),
            "raw_max_abs_diff": float(np.max(np.abs(a - b))),
            "raw_scale": float(np.max(np.abs(b))),
        }
    worst = max(per_feature, key=lambda k: per_feature[k]["normalised_max_abs_diff"])
    # the z-score columns differ most: check which side is off on the rows where they disagree,
    # against a two-pass (mean first, then squared deviations) float64 z-score of the window
    lc = np.log(bars.close)
    zscore_check = {}
    for w in cfg.trend_windows:
        i = pipe.names.index(f"zscore_{w}")
        diff = np.abs(raw_fox[:, i] - raw_pd[:, i])
        diff[: w - 1] = -1.0
        rows = np.argsort(diff)[-1000:]
        win = lc[rows[:, None] + np.arange(1 - w, 1)]
        sd = win.std(axis=1)
        exact = np.where(sd > 0.0, (win[:, -1] - win.mean(axis=1)) / np.where(sd > 0, sd, 1.0), 0.0)
        zscore_check[f"zscore_{w}"] = {
            "foxhunt_max_abs_err": float(np.max(np.abs(raw_fox[rows, i] - exact))),
            "pandas_max_abs_err": float(np.max(np.abs(raw_pd[rows, i] - exact))),
        }
    rate, pd_rate, speedup = n_bars / fox_s, n_bars / pd_s, pd_s / fox_s
    return {
        "bars": n_bars,
        "features": pipe.n_features,
        "pandas_features": pdv.shape[1],
        "session": ES_SESSION.model_dump(),
        "normalisation": f"causal rolling z-score over {cfg.norm_window} rows, clip "
                         f"+-{cfg.clip}; rows < {v0} are 0",
        "foxhunt_s": round(fox_s, 4),
        "bars_per_s": round(rate),
        "pandas_s": round(pd_s, 4),
        "pandas_bars_per_s": round(pd_rate),
        "speedup": round(speedup, 2),
        "torch_threads": threads,
        "foxhunt_torch_1_thread": one_thread,
        "runs_s": {"foxhunt": fox_runs, "pandas": pd_runs},
        "load_avg_1m": {"before": load_before, "after": load_1m()},
        "max_abs_diff_normalised": per_feature[worst]["normalised_max_abs_diff"],
        "worst_feature": worst,
        "definition_differences": [],
        "zscore_vs_two_pass": zscore_check,
        "zscore_note": "on the 1000 rows where foxhunt and pandas disagree most, error of each "
                       "against a two-pass float64 z-score of the window: pandas' online "
                       "rolling variance loses digits on near-constant windows",
        "numeric_differences": (
            "foxhunt stores raw features as float32 before normalising and computes windows as "
            "prefix-sum differences (chunked, anchored); pandas rolling uses online "
            "add/remove sums in float64; clock trig runs in float32 in foxhunt"
        ),
        "per_feature": per_feature,
        "target_bars_per_s": BARS_TARGET,
        "target_speedup": SPEEDUP_TARGET,
        "target_met": bool(rate >= BARS_TARGET and speedup >= SPEEDUP_TARGET),
    }


# -- main ------------------------------------------------------------------------------------


def host() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "pyarrow": pa.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "load_avg_1m_start": load_1m(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ticks", type=int, default=10_000_000, help="ticks to generate")
    ap.add_argument("--bars", type=int, default=1_000_000, help="bars for the feature benchmark")
    ap.add_argument("--repeat", type=int, default=3, help="runs per timing; the best is kept")
    ap.add_argument("--out", help="also write the JSON document to this file")
    ap.add_argument("--quick", action="store_true", help="small smoke run (200k ticks, 20k bars)")
    args = ap.parse_args()
    if args.quick:
        args.ticks, args.bars, args.repeat = 200_000, 20_000, 1
    if args.repeat < 1 or args.ticks < 1 or args.bars < 2:
        ap.error("--repeat and --ticks must be >= 1 and --bars >= 2")

    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host(),
        "timing": f"best (minimum) wall time of {args.repeat} run(s), time.perf_counter; "
                  "every run is listed under runs_s",
        "quick": args.quick,
    }
    with tempfile.TemporaryDirectory(prefix="foxhunt-bench-") as tmp:
        results["resample"] = bench_resample(args.ticks, args.repeat, Path(tmp))
    gc.collect()
    results["features"] = bench_features(args.bars, args.repeat)
    emit("bench_data", torch.device("cpu"), results, args.out)


if __name__ == "__main__":
    run_main(main, "bench_data")
