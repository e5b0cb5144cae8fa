"""Learning-quality benchmark: does the agent find what simple rules find, on markets whose answer is known?

For each market x seed the walk-forward agent is trained through the public trainer
(`WalkForwardTrainer`, the shipped default config sized by the GPU profile) and judged on its
test windows against baselines run on the same test windows through the same fill and cost
model (`foxhunt.backtest`): flat, buy-and-hold, the oracle where the market has one, and the best
of a grid of SMA-cross and z-score-fade rules, chosen on each fold's validation window
(`foxhunt.backtest.rule_search`: the test window is never used for any choice).

Markets: the synthetic families of `foxhunt.data.synth` (`ar` at X = 0.3, `trend`, `reversion`,
`regime`, `garch_noise`, and `walk`, a plain driftless random walk; the seed picks the market and
the agent's seed) and real series: the bundled ES trades as 1-minute bars (`es`), and the hourly
EURUSD (`eurusd`, traded as 6E) and daily GOOG (`goog`) bars that the `backtesting` package ships
in `backtesting.test` (installed by the `test` and `bench` extras; loaded from the installed
package, not bundled here).

Targets (docs/learning.md), checked per market and printed as pass/fail:
- ar, trend, reversion, regime: agent mean test Sharpe >= 0.8 x the validation-chosen rule's
  (>= the rule's when the rule's is <= 0), and on ar also >= 0.5 x the oracle's;
- garch_noise, walk: the agent's pooled test t-statistic within (-2, 2);
- real series: no target, reported as measured.
Sharpe ratios are annualised with the market's bars per year; "mean ± sd" is over seeds of the
per-seed mean over folds. `--rules-only` skips the agent (no targets are then decided).

`--kind dqn|pqn|ppo` picks the learner (`[agent] kind`) over the config's.

`--quick` (CI runs it on the CPU, in seconds): a tiny agent on 4,000-bar markets, and unless
given, the trend market and seed 0.

`--false-deploys` (issue 33): how often the deploy rule deploys a fold, at the shipped settings
of the device's profile (those of `foxhunt train`). Every fold of every run is judged by the
trainer's rule (`[walkforward] deploy_rule`, shipped `deflated`: P of beating the expected best
of the fold's candidate epochs without skill) and by the old one (`psr`: the chosen model's
validation PSR against flat), both at `deploy_min_psr`, with each rule's test Sharpe (the chosen
model's where it deploys, flat's where not). The null markets (`garch_noise`, `walk`) run
`--seeds` (default 0-19), the others `--signal-seeds` (default 0,1,2; markets default
garch_noise, walk, ar, trend, reversion), null markets first; 30,000 bars a market, 10,000 on
the CPU. Targets, as `target_met`: the trainer's rule deploys <= 5% of null folds over >= 20
seeds, >= 70% of `ar`, `trend` and `reversion` folds, with a mean test Sharpe no lower than
psr's. `--resume` keeps the runs of `--out` that have every fold (same settings) and runs the
rest.

Prints one JSON document on stdout (progress and the table go to stderr); `--markdown FILE`
also writes the table as markdown. `--out FILE` is rewritten after every finished fold
(`"complete": false` until the last), so a run stopped by a time limit keeps what it finished.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import document, emit, log, resolve_device, run_main, write_json

from foxhunt.agents.dqn.config import KINDS
from foxhunt.backtest.rule_search import SMA_GRID, ZFADE_GRID, default_rules, fold_baselines
from foxhunt.config import load_settings
from foxhunt.data.instruments import Instrument, InstrumentRegistry, Session
from foxhunt.data.series import Bars, BarSpec
from foxhunt.data.synth import FAMILIES, SynthConfig, generate, oracle_positions
from foxhunt.errors import FoxhuntError
from foxhunt.features import FeaturePipeline
from foxhunt.metrics import periods_per_year
from foxhunt.profiles import choose_profile
from foxhunt.training.config import TrainingSpec
from foxhunt.training.trainer import WalkForwardTrainer

AR_SIGNAL = 0.3
SYNTH: dict[str, dict[str, Any]] = {
    "ar": {"family": "ar", "signal_strength": AR_SIGNAL},
    "trend": {"family": "trend"},
    "reversion": {"family": "reversion"},
    "regime": {"family": "regime"},
    "garch_noise": {"family": "garch_noise"},
    "walk": {"family": "ar", "regime_vol": (1.0,), "regime_drift": (0.0,),
             "regime_duration": (1.0,), "garch_alpha": 0.0, "garch_beta": 0.0,
             "intraday_vol_amplitude": 0.0, "intraday_volume_amplitude": 0.0, "gap_vol": 0.0},
}
"""Each synthetic market's generator settings; the seed picks the market. `walk` is a plain
driftless random walk: i.i.d. Gaussian log returns at one volatility (no GARCH, regimes,
intraday shape or overnight gaps), tick-rounded."""
SYNTH_MARKETS = tuple(SYNTH)
NULL_MARKETS = ("garch_noise", "walk")
"""Nothing to find: no oracle, and an agent's edge there is noise."""
REAL_MARKETS = ("es", "eurusd", "goog")
MARKETS = SYNTH_MARKETS + REAL_MARKETS
SIGNAL_MARKETS = ("ar", "trend", "reversion")
OLD_RULE = "psr"
"""What --false-deploys compares the trainer's deploy rule with: the rule before issue 33,
validation PSR against flat."""
FALSE_DEPLOY_TARGET = 0.05
NULL_SEEDS_TARGET = 20
DEPLOY_RATE_TARGET = 0.7
DEPLOY_DEFAULTS = {"markets": "garch_noise,walk,ar,trend,reversion", "seeds": "0-19",
                   "signal_seeds": "0,1,2"}
DEPLOY_QUICK_DEFAULTS = {"markets": "walk,trend", "seeds": "0", "signal_seeds": "0"}
DEPLOY_CPU_BARS = 10_000
"""--false-deploys on the CPU: bars a market (30,000 elsewhere); a fold's validation and test
rollouts take a third of the time, its updates as long (docs/learning.md, "False deploys")."""
RULE_TARGET = 0.8
ORACLE_TARGET = 0.5
NULL_T = 2.0
SYNTH_SESSION = Session(tz="UTC", open="14:30", close="21:00")
"""The generator's default 390-minute session (bars close 14:31 .. 21:00 UTC)."""
QUICK_DEFAULTS = {"markets": "trend", "seeds": "0"}
"""--quick: the markets and seeds it runs unless they are given (CI runs it, in seconds)."""
QUICK_OVERRIDES = {
    "env": {"window": 8, "episode_len": 64},
    "agent": {"hidden": 32, "atoms": 11},
    "replay": {"capacity": 4_096, "beta_anneal_steps": 200},
    "train": {"epochs": 2, "updates_per_fold": 16, "replay_ratio": 2.0, "learning_starts": 128,
              "batch_size": 32, "n_envs": 16, "eval_windows": 2},
    "walkforward": {"purge": 16},
}
"""--quick: a CPU-sized agent that only checks the path runs end to end."""
assert {c["family"] for c in SYNTH.values()} <= set(FAMILIES)


@dataclass(frozen=True)
class Market:
    name: str
    kind: str  # "synthetic" or "real"
    bars: Bars
    instrument: Instrument
    periods_per_year: float
    oracle_side: np.ndarray | None
    source: str


# -- markets ----------------------------------------------------------------------------------


def synthetic(name: str, n_bars: int, seed: int) -> Market:
    cfg = SynthConfig(n_bars=n_bars, seed=seed, **SYNTH[name])
    m = generate(cfg)
    inst = InstrumentRegistry.load().get("SYN").model_copy(update={"session": SYNTH_SESSION})
    ppy = periods_per_year(BarSpec("time", cfg.bar_seconds * 1e9), inst.session)
    # A null market's signal is a placebo: there is nothing for an oracle to know.
    side = None if name in NULL_MARKETS else oracle_positions(m)
    source = "foxhunt.data.synth " + " ".join(
        f"{k}={v}" for k, v in SYNTH[name].items()) + f" seed={seed}"
    return Market(name, "synthetic", m.bars, inst, ppy, side, source)


def real(name: str) -> Market:
    registry = InstrumentRegistry.load()
    if name == "es":
        from foxhunt.data.resample import resample
        from foxhunt.data.sample import load_sample_ticks

        inst = registry.get("ES")
        spec = BarSpec.parse("1min")
        bars = resample(load_sample_ticks(), spec, point_value=inst.point_value)
        return Market(name, "real", bars, inst, periods_per_year(spec, inst.session), None,
                      "bundled ES trades 2013-09-01..03 (foxhunt data sample), 1-minute bars")
    try:
        import backtesting.test as bt
    except ImportError:
        raise SystemExit(f"--markets {name}: needs the `backtesting` package "
                         "(pip install -e '.[bench]')") from None
    if name == "eurusd":
        inst = registry.get("6E")
        return Market(name, "real", _frame_bars(bt.EURUSD, 3_600, inst.tick_size), inst,
                      periods_per_year(BarSpec.parse("1h"), inst.session), None,
                      "backtesting.test.EURUSD: hourly EUR/USD 2017-04..2018-02, traded as 6E")
    if name == "goog":
        inst = Instrument(symbol="GOOG", description="Alphabet (GOOG) shares, 100 a contract",
                          tick_size=0.01, point_value=100.0, commission=1.0,
                          session=Session(tz="America/New_York", open="09:30", close="16:00"))
        return Market(name, "real", _frame_bars(bt.GOOG, 86_400, inst.tick_size,
                                                close_offset_s=21 * 3600), inst,
                      periods_per_year(BarSpec.parse("1d"), None), None,
                      "backtesting.test.GOOG: daily GOOG 2004-2013, 100 shares a contract")
    raise SystemExit(f"--markets: unknown market {name!r}; known: {', '.join(MARKETS)}")


def _frame_bars(frame: Any, bar_s: int, tick: float, close_offset_s: int | None = None) -> Bars:
    """Bars from an OHLCV DataFrame indexed by bar open time (naive, taken as UTC), prices on
    the tick grid, ts the close time (open + `bar_s`, or the day + `close_offset_s`)."""
    opens = frame.index.values.astype("datetime64[ns]").astype(np.int64)
    ts = opens + int((close_offset_s if close_offset_s is not None else bar_s) * 1e9)
    px = {k: np.round(frame[k.capitalize()].to_numpy(np.float64) / tick) * tick
          for k in ("open", "high", "low", "close")}
    high = np.maximum.reduce([px["high"], px["open"], px["close"]])
    low = np.minimum.reduce([px["low"], px["open"], px["close"]])
    volume = np.maximum(frame["Volume"].to_numpy(np.float64), 1.0)
    return Bars(ts, px["open"], high, low, px["close"], volume)


def load_market(name: str, n_bars: int, seed: int) -> Market:
    return synthetic(name, n_bars, seed) if name in SYNTH_MARKETS else real(name)


# -- the agent's settings ---------------------------------------------------------------------


def agent_spec(args: argparse.Namespace, seed: int) -> TrainingSpec:
    """The shipped default config (+ $FOXHUNT_HOME/config.toml, --config), sized by the GPU
    profile, with this run's folds, seed and device."""
    spec = load_settings(args.config).settings.training_spec()
    updates: dict[str, dict[str, Any]] = {k: dict(v) for k, v in QUICK_OVERRIDES.items()} \
        if args.quick else {}
    updates.setdefault("walkforward", {})["folds"] = args.folds
    updates.setdefault("train", {}).update(seed=seed, device=args.device)
    if args.epochs:
        updates["train"]["epochs"] = args.epochs
    if args.kind:
        updates.setdefault("agent", {})["kind"] = args.kind
    if args.deploy_all:
        updates["walkforward"]["deploy_min_psr"] = 0.0
    spec = spec.with_overrides(updates, "bench_learning")
    return spec.sized_for(choose_profile(None).profile)


# -- one market x seed ------------------------------------------------------------------------


def make_trainer(market: Market, seed: int, args: argparse.Namespace, device,
                 workdir: Path) -> WalkForwardTrainer:
    """The walk-forward trainer of `agent_spec` on `market`, logging its epochs; its `spec`
    has the episode length fitted to the shortest training window."""
    pipeline = FeaturePipeline(load_settings(args.config).settings.features,
                               market.instrument.session)
    trainer = WalkForwardTrainer(agent_spec(args, seed), market.bars, pipeline, market.instrument,
                                 workdir / f"{market.name}-seed{seed}", device, None,
                                 market.periods_per_year)
    for notice in trainer.notices:
        log(f"{market.name}: {notice}")
    trainer.on_epoch = _epoch_logger(market.name, seed, trainer.spec.train.epochs)
    return trainer


def run_one(market: Market, seed: int, args: argparse.Namespace, device, workdir: Path,
            agent: bool, on_fold: Callable[[dict[str, Any]], None] | None = None
            ) -> dict[str, Any]:
    """One market and seed: the baselines on every fold, then (with `agent`) the walk-forward
    run; `on_fold(doc)` gets the seed's document each time a fold's agent result is in it."""
    trainer = make_trainer(market, seed, args, device, workdir)
    spec = trainer.spec
    folds = trainer.folds
    t0 = time.perf_counter()
    baselines = [fold_baselines(market.bars, market.instrument, f, oracle_side=market.oracle_side,
                                env_config=spec.env, periods_per_year=market.periods_per_year,
                                device="cpu") for f in folds]
    rules_s = time.perf_counter() - t0
    out_folds = [b.to_dict() for b in baselines]
    doc: dict[str, Any] = {"seed": seed, "bars": len(market.bars), "rules_s": round(rules_s, 2),
                           "episode_len": spec.env.episode_len, "folds": out_folds}
    if agent:
        rows = iter(out_folds)

        def fold_done(report: Any) -> None:
            _record_agent(next(rows), report)
            if on_fold:
                on_fold(doc)

        train(trainer, fold_done, doc)
    return doc


def train(trainer: WalkForwardTrainer, on_fold: Callable[[Any], None],
          doc: dict[str, Any]) -> None:
    """Run `trainer`, calling `on_fold(report)` after each fold; its wall seconds go to
    `doc["agent_s"]`, which marks the run finished."""
    trainer.on_fold = on_fold
    t0 = time.perf_counter()
    trainer.run()
    doc["agent_s"] = round(time.perf_counter() - t0, 1)


def _record_agent(row: dict[str, Any], report: Any) -> None:
    """A fold's agent result, beside the fold's baselines in `row`."""
    assert row["windows"] == report.windows, "trainer and baselines disagree on windows"
    row["test"]["agent"] = {k: report.test[k] for k in
                            ("sharpe", "pnl", "return", "max_drawdown", "trades", "flat", "bars")}
    row["agent_best_epoch"] = report.best_epoch
    row["agent_val_sharpe"] = report.val["sharpe"]
    # Where the trainer decides on validation whether a fold deploys the agent or flat, the
    # test result is that of what was deployed.
    for key in ("deployed", "reason"):
        if hasattr(report, key):
            row[f"agent_{key}"] = getattr(report, key)
    # And what the chosen model would have done there, had it been deployed.
    if getattr(report, "undeployed_test", None) is not None:
        row["test"]["agent_undeployed"] = {k: report.undeployed_test[k] for k in
                                           ("sharpe", "return", "trades", "flat")}
    # The trainer's own buy-and-hold rollout: the same fill model, so it should match.
    row["trainer_buy_and_hold_sharpe"] = report.baselines["buy_and_hold"]["sharpe"]


def _epoch_logger(name: str, seed: int, epochs: int) -> Callable[[dict[str, Any]], None]:
    def on_epoch(line: dict[str, Any]) -> None:
        log(f"{name} seed {seed} fold {line['fold']} epoch {line['epoch'] + 1}/{epochs}: "
            f"val Sharpe {line['val']['sharpe']:+.2f}  loss {line['loss']:.3f}")
    return on_epoch


# -- summary and targets ----------------------------------------------------------------------


def per_seed_means(seeds: list[dict[str, Any]], policy: str) -> list[float]:
    out = []
    for s in seeds:
        vals = [f["test"][policy]["sharpe"] for f in s["folds"] if policy in f["test"]]
        if vals:
            out.append(statistics.fmean(vals))
    return out


def pooled_t(seeds: list[dict[str, Any]], policy: str, ppy: float) -> float | None:
    """t-statistic of the mean per-bar return over every test window of every seed: each
    window's per-bar Sharpe s_i over n_i bars is ~N(0, 1/n_i) under no edge, so
    sum(s_i n_i) / sqrt(sum n_i) is ~N(0, 1)."""
    num = den = 0.0
    for s in seeds:
        for f in s["folds"]:
            r = f["test"].get(policy)
            if r is None or not r.get("bars"):
                continue
            n = float(r["bars"])
            num += r["sharpe"] / math.sqrt(ppy) * n
            den += n
    return num / math.sqrt(den) if den else None


def stats(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    sd = statistics.stdev(values) if len(values) > 1 else None
    return {"mean": round(statistics.fmean(values), 3), "sd": None if sd is None else round(sd, 3),
            "n": len(values)}


def summarise(market: Market, seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± sd over seeds and pooled t per policy. On a real series every seed trades the same
    bars, so the baselines (which have no seed) count once, from the first seed."""
    once = seeds if market.kind == "synthetic" else seeds[:1]
    out: dict[str, Any] = {"agent": stats(per_seed_means(seeds, "agent"))}
    out.update({p: stats(per_seed_means(once, p)) for p in ("rule", "oracle", "flat",
                                                              "buy_and_hold")})
    out["t"] = {p: None if (t := pooled_t(seeds if p == "agent" else once, p,
                                          market.periods_per_year)) is None
                else round(t, 2) for p in ("agent", "rule", "oracle", "buy_and_hold")}
    out["chosen_rules"] = sorted({f["chosen"] for s in seeds for f in s["folds"]})
    out["targets"] = targets(market, out)
    decided = [t["pass"] for t in out["targets"] if t["pass"] is not None]
    out["pass"] = all(decided) if decided and len(decided) == len(out["targets"]) else None
    return out


def targets(market: Market, s: dict[str, Any]) -> list[dict[str, Any]]:
    agent = s["agent"]["mean"] if s["agent"] else None
    rule = s["rule"]["mean"] if s["rule"] else None
    out = []
    if market.name in ("ar", "trend", "reversion", "regime"):
        need = RULE_TARGET * rule if rule > 0 else rule
        out.append({"target": f"agent >= {RULE_TARGET:g} x rule", "need": round(need, 3),
                    "pass": None if agent is None else agent >= need})
    if market.name == "ar" and s["oracle"]:
        need = ORACLE_TARGET * s["oracle"]["mean"]
        out.append({"target": f"agent >= {ORACLE_TARGET:g} x oracle", "need": round(need, 3),
                    "pass": None if agent is None else agent >= need})
    if market.name in NULL_MARKETS:
        t = s["t"]["agent"]
        out.append({"target": f"abs(agent t) < {NULL_T:g}", "need": NULL_T,
                    "pass": None if t is None else abs(t) < NULL_T})
    return out


# -- false deploys ----------------------------------------------------------------------------


def deploy_one(market: Market, seed: int, args: argparse.Namespace, device, workdir: Path,
               on_fold: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """One walk-forward run, judged per fold by the trainer's deploy rule and the old one
    (`deploy_row`); `on_fold(doc)` gets the run's document after each fold."""
    trainer = make_trainer(market, seed, args, device, workdir)
    level = trainer.spec.walkforward.deploy_min_psr
    doc: dict[str, Any] = {"market": market.name, "seed": seed, "bars": len(market.bars),
                           "folds": []}

    def fold_done(report: Any) -> None:
        row = deploy_row(report, level)
        doc["folds"].append(row)
        log(f"{market.name} seed {seed} fold {row['fold']}: val Sharpe {row['val_sharpe']:+.2f}, "
            + ", ".join(f"{rule} p {_p(row['p'][rule])} -> "
                        f"{'agent' if row['deployed'][rule] else 'flat'}" for rule in row["p"])
            + f"; chosen model's test Sharpe {row['test_chosen']['sharpe']:+.2f}")
        on_fold(doc)

    train(trainer, fold_done, doc)
    return doc


def deploy_row(report: Any, level: float) -> dict[str, Any]:
    """A fold under two rules: the trainer's deploys where its P reaches `level`, the old one
    (`OLD_RULE`) where the chosen model's validation PSR against flat does. Each rule's test
    Sharpe is the chosen model's where it deploys, flat's where not."""
    chosen = report.test if report.deployed == "agent" else report.undeployed_test
    rule = report.deploy["rule"]
    p = {rule: report.deploy["p"], OLD_RULE: report.val["psr"]}
    deployed = {r: (0.0 if p[r] is None else p[r]) >= level for r in p}
    assert deployed[rule] == (report.deployed == "agent"), "the trainer deployed otherwise"
    flat = report.baselines["flat"]["sharpe"]
    return {"fold": report.fold, "windows": report.windows, "best_epoch": report.best_epoch,
            "val_sharpe": report.val["sharpe"], "deploy": report.deploy, "p": p,
            "deployed": deployed,
            "test_chosen": {k: chosen[k] for k in ("sharpe", "return", "trades", "flat", "bars")},
            "test_sharpe": {r: chosen["sharpe"] if deployed[r] else flat for r in p}}


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2f}"


def wilson(k: int, n: int, z: float = 1.959964) -> list[float]:
    """The Wilson score interval of a rate k / n at 95%."""
    rate, zz = k / n, z * z / n
    centre = (rate + zz / 2) / (1 + zz)
    half = z * math.sqrt(rate * (1 - rate) / n + zz / (4 * n)) / (1 + zz)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def deploy_summary(name: str, runs: list[dict[str, Any]], rules: tuple[str, str],
                   complete: int | None = None) -> dict[str, Any]:
    """Per rule: folds deployed, their rate with its 95% interval, and the mean ± sd over seeds
    of each seed's mean test Sharpe (a flat fold counts flat's); then the targets. `complete`:
    how many of `runs` have every fold (all, unless told)."""
    folds = [f for r in runs for f in r["folds"]]
    out: dict[str, Any] = {"seeds": len(runs), "folds": len(folds),
                           "complete_runs": len(runs) if complete is None else complete}
    for rule in rules:
        k = sum(f["deployed"][rule] for f in folds)
        out[rule] = {"deployed": k, "rate": round(k / len(folds), 4),
                     "interval_95": wilson(k, len(folds)),
                     "test_sharpe": stats([statistics.fmean(f["test_sharpe"][rule]
                                                            for f in r["folds"]) for r in runs])}
    out["targets"] = deploy_targets(name, out, *rules)
    out["target_met"] = all(t["target_met"] for t in out["targets"]) if out["targets"] else None
    return out


def deploy_targets(name: str, s: dict[str, Any], rule: str, old_rule: str
                   ) -> list[dict[str, Any]]:
    new, old = s[rule], s[old_rule]
    if name in NULL_MARKETS:
        return [{"target": f"{rule} deploys <= {FALSE_DEPLOY_TARGET:.0%} of folds",
                 "value": new["rate"], "target_met": new["rate"] <= FALSE_DEPLOY_TARGET},
                {"target": f">= {NULL_SEEDS_TARGET} seeds", "value": s["complete_runs"],
                 "target_met": s["complete_runs"] >= NULL_SEEDS_TARGET}]
    if name in SIGNAL_MARKETS:
        return [{"target": f"{rule} deploys >= {DEPLOY_RATE_TARGET:.0%} of folds",
                 "value": new["rate"], "target_met": new["rate"] >= DEPLOY_RATE_TARGET},
                {"target": f"mean test Sharpe, {rule} >= {old_rule}",
                 "value": new["test_sharpe"]["mean"],
                 "need": old["test_sharpe"]["mean"],
                 "target_met": new["test_sharpe"]["mean"] >= old["test_sharpe"]["mean"]}]
    return []


def deploy_table(markets: list[dict[str, Any]], level: float, rules: tuple[str, str]) -> str:
    head = ["market", "seeds", "folds", *(f"deployed: {r} >= {level:g}" for r in rules),
            *(f"test Sharpe: {r}" for r in rules), "targets met"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in markets:
        s = m["summary"]
        if s is None:
            continue
        met = {True: "yes", False: "NO", None: "-"}
        lines.append("| " + " | ".join([
            m["market"], str(s["seeds"]) + (f" ({s['complete_runs']} whole)"
                                             if s["complete_runs"] < s["seeds"] else ""),
            str(s["folds"]),
            *(f"{s[r]['deployed']} ({s[r]['rate']:.1%}, {s[r]['interval_95'][0]:.1%}-"
              f"{s[r]['interval_95'][1]:.1%})" for r in rules),
            *(_pm(s[r]["test_sharpe"]) for r in rules),
            "; ".join(f"{t['target']}: {met[t['target_met']]}" for t in s["targets"]) or "-",
        ]) + " |")
    return "\n".join(lines)


def revision() -> str | None:
    """The checkout's commit, with the paths under src/ that differ from it."""
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=Path(__file__).resolve().parents[1],
                              capture_output=True, text=True, check=True).stdout
    try:
        head, dirty = git("rev-parse", "--short", "HEAD").strip(), \
            git("status", "--porcelain", "--", "src")
    except (OSError, subprocess.CalledProcessError):
        return None
    changed = [line[3:] for line in dirty.splitlines()]
    return head + (f" + uncommitted {', '.join(changed)}" if changed else "")


def false_deploys(args: argparse.Namespace, names: list[str], device) -> None:
    """Every market x seed through the trainer at the device's shipped settings, each fold judged
    by both deploy rules; the null markets take `--seeds`, the others `--signal-seeds`."""
    null_seeds, signal_seeds = parse_seeds(args.seeds, "--seeds"), \
        parse_seeds(args.signal_seeds, "--signal-seeds")
    plan = [(n, s) for s in null_seeds for n in names if n in NULL_MARKETS] + \
        [(n, s) for n in names if n not in NULL_MARKETS for s in signal_seeds]
    spec = agent_spec(args, 0)
    rules = (spec.walkforward.deploy_rule, OLD_RULE)
    if rules[0] == OLD_RULE:
        raise SystemExit(f"--false-deploys compares the trainer's deploy rule with {OLD_RULE}: "
                         f"[walkforward] deploy_rule is {OLD_RULE} itself")
    choice = choose_profile(None)
    level = spec.walkforward.deploy_min_psr
    settings = {"mode": "false_deploys", "markets": names, "seeds": null_seeds,
                "signal_seeds": signal_seeds, "bars": args.bars, "folds": args.folds,
                "quick": args.quick, "profile": {"name": choice.profile.name,
                                                 "reason": choice.reason},
                "deploy_rule": rules[0], "deploy_min_psr": level, "revision": revision(),
                "targets": {"false_deploys": FALSE_DEPLOY_TARGET, "null_seeds": NULL_SEEDS_TARGET,
                            "deploy_rate": DEPLOY_RATE_TARGET},
                "agent_spec": spec.model_dump(mode="json")}
    runs = _resumed(args.out, settings, plan) if args.resume else {}
    if runs:
        log(f"--resume: {len(runs)} finished runs from {args.out}")

    def results(current: list[dict[str, Any]] = ()) -> dict[str, Any]:
        """The finished runs and the finished folds of those under way (`current`): every
        fold is one decision, so a run stopped part-way still counts the folds it judged."""
        markets = []
        for name in names:
            done = [runs[k] for k in plan if k[0] == name and k in runs]
            going = [r for r in current if r["market"] == name and r["folds"]]
            markets.append({"market": name, "null": name in NULL_MARKETS,
                            "summary": deploy_summary(name, done + going, rules, len(done))
                            if done or going else None, "seeds": done + going})
        return {"complete": not current and len(runs) == len(plan), "quick": args.quick,
                "settings": settings, "markets": markets}

    def write(*current: dict[str, Any]) -> None:
        if args.out:
            write_json(Path(args.out), document("learning", device, results(list(current))))

    t0 = time.perf_counter()
    todo = [key for key in plan if key not in runs]
    if args.jobs > 1 and len(todo) > 1:
        threads = max(1, len(os.sched_getaffinity(0)) // args.jobs) if device.type == "cpu" else 1
        context = multiprocessing.get_context("spawn")
        with tempfile.TemporaryDirectory() as parts, \
                ProcessPoolExecutor(min(args.jobs, len(todo)), mp_context=context) as pool:
            pending = {pool.submit(_deploy_job, name, seed, args, device, threads, parts):
                       (name, seed) for name, seed in todo}
            while pending:
                finished, _ = wait(pending, timeout=15, return_when=FIRST_COMPLETED)
                for future in finished:
                    runs[pending.pop(future)] = {**future.result(),
                                                 "revision": settings["revision"]}
                    log(f"{len(runs)}/{len(plan)} runs done")
                write(*(json.loads(f.read_text()) for f in sorted(Path(parts).glob("*.json"))
                        if tuple(json.loads(f.read_text())[k] for k in ("market", "seed"))
                        not in runs))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for name, seed in todo:
                market = load_market(name, args.bars, seed)
                log(f"{name} seed {seed}: {len(market.bars):,} bars "
                    f"({len(runs) + 1}/{len(plan)})")
                try:
                    runs[(name, seed)] = {**deploy_one(market, seed, args, device, Path(tmp),
                                                       write), "revision": settings["revision"]}
                    write()
                except FoxhuntError as exc:
                    raise SystemExit(f"{name} seed {seed}: {exc}") from None
    doc = results()
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    text = deploy_table(doc["markets"], level, rules)
    print(text, file=sys.stderr)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    emit("learning", device, doc, args.out)


def _deploy_job(name: str, seed: int, args: argparse.Namespace, device, threads: int,
                parts: str) -> dict[str, Any]:
    """One run of `--jobs`, in its own process (`threads` torch threads on the CPU); its
    document so far goes to `parts` after every fold."""
    torch.set_num_threads(threads)
    market = load_market(name, args.bars, seed)
    log(f"{name} seed {seed}: {len(market.bars):,} bars (pid {os.getpid()})")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return deploy_one(market, seed, args, device, Path(tmp),
                              lambda doc: write_json(Path(parts) / f"{name}_{seed}.json", doc))
        except FoxhuntError as exc:
            raise SystemExit(f"{name} seed {seed}: {exc}") from None


def _resumed(out: str | None, settings: dict[str, Any], plan: list[tuple[str, int]]
             ) -> dict[tuple[str, int], dict[str, Any]]:
    """The runs of `plan` with every fold in the document at `out`, if it was made with the
    same bars, folds, deploy level and agent (seeds and markets may differ)."""
    if not out or not Path(out).exists():
        return {}
    doc = json.loads(Path(out).read_text())
    same = ("mode", "bars", "folds", "quick", "agent_spec")
    if any(_learned(doc.get("settings", {}), k) != _learned(settings, k) for k in same):
        raise SystemExit(f"--resume: {out} was made with other settings ({', '.join(same)}; "
                         "[train.performance] aside)")
    return {(r["market"], r["seed"]): r for m in doc["markets"] for r in m["seeds"]
            if len(r["folds"]) == settings["folds"] and (r["market"], r["seed"]) in plan}


def _learned(settings: dict[str, Any], key: str) -> Any:
    """`settings[key]`, the agent's without `[train.performance]` (how fast its steps run)."""
    value = settings.get(key)
    if key == "agent_spec" and isinstance(value, dict):
        value = {**value, "train": {k: v for k, v in value.get("train", {}).items()
                                    if k != "performance"}}
    return value


# -- output -----------------------------------------------------------------------------------


def _pm(x: dict[str, Any] | None) -> str:
    if x is None:
        return "-"
    return f"{x['mean']:+.2f}" + (f" ± {x['sd']:.2f}" if x["sd"] is not None else "")


def table(rows: list[dict[str, Any]]) -> str:
    head = ["market", "agent", "rule (val-chosen)", "oracle", "flat", "buy & hold",
            "rule t", "targets", "pass"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["summary"]
        tg = "; ".join(f"{t['target']} ({t['need']:+.2f})" if t["target"].startswith("agent >=")
                       else t["target"] for t in s["targets"]) or "reported"
        verdict = {True: "pass", False: "FAIL", None: "-"}[s["pass"]]
        t_rule = s["t"]["rule"]
        lines.append("| " + " | ".join([
            r["market"], _pm(s["agent"]), _pm(s["rule"]), _pm(s["oracle"]), _pm(s["flat"]),
            _pm(s["buy_and_hold"]), "-" if t_rule is None else f"{t_rule:+.1f}", tg, verdict,
        ]) + " |")
    return "\n".join(lines)


def _market_row(market: Market, summary: dict[str, Any] | None,
                runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"market": market.name, "kind": market.kind, "source": market.source,
            "instrument": market.instrument.symbol, "periods_per_year": market.periods_per_year,
            "summary": summary, "seeds": runs}


def _partial_writer(out: str | None, device, settings: dict[str, Any], rows: list[dict[str, Any]],
                    market: Market, runs: list[dict[str, Any]]
                    ) -> Callable[[dict[str, Any]], None] | None:
    """After each fold, `--out` gets the document so far (`"complete": false`, the running
    market without a summary, folds not yet trained without an agent result): a run stopped by
    a time limit keeps every fold it finished."""
    if not out:
        return None

    def write(seed_doc: dict[str, Any]) -> None:
        write_json(Path(out), document("learning", device, {
            "complete": False, "quick": settings["quick"], "settings": settings,
            "markets": [*rows, _market_row(market, None, [*runs, seed_doc])]}))
    return write


def parse_seeds(text: str, flag: str) -> list[int]:
    """Comma-separated seeds and ranges: "0,1,2", "0-19"."""
    try:
        seeds = [n for part in text.split(",") if part.strip()
                 for n in _seed_range(*(int(x) for x in part.split("-", 1)))]
    except ValueError:
        raise SystemExit(f"{flag}: {text!r} is not a comma-separated list of seeds "
                         "and ranges (0,1,2 or 0-19)") from None
    if not seeds or min(seeds) < 0:
        raise SystemExit(f"{flag}: give at least one seed, each >= 0")
    return seeds


def _seed_range(first: int, last: int | None = None) -> range:
    return range(first, first + 1 if last is None else last + 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markets",
                        help=f"comma-separated, from {', '.join(MARKETS)} (default: all; "
                        f"quick {QUICK_DEFAULTS['markets']}; --false-deploys "
                        f"{DEPLOY_DEFAULTS['markets']})")
    parser.add_argument("--seeds", help="comma-separated seeds and ranges (default 0,1,2; quick "
                        f"{QUICK_DEFAULTS['seeds']}; --false-deploys: the null markets' seeds, "
                        f"default {DEPLOY_DEFAULTS['seeds']})")
    parser.add_argument("--signal-seeds", help="--false-deploys: the other markets' seeds "
                        f"(default {DEPLOY_DEFAULTS['signal_seeds']})")
    parser.add_argument("--bars", type=int, help="bars of a synthetic market (default 30,000; "
                        f"quick 4,000; --false-deploys on the CPU {DEPLOY_CPU_BARS:,})")
    parser.add_argument("--folds", type=int, default=3, help="walk-forward folds")
    parser.add_argument("--epochs", type=int, help="epochs per fold (default: the config's)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--config", type=Path, help="a foxhunt config TOML for the agent")
    parser.add_argument("--kind", choices=KINDS,
                        help="the learner ([agent] kind; default: the config's, shipped dqn)")
    parser.add_argument("--rules-only", action="store_true", help="skip the agent: baselines only")
    parser.add_argument("--deploy-all", action="store_true",
                        help="every fold deploys its agent (walkforward.deploy_min_psr = 0), so "
                        "the test figures are the agent's even where validation found no edge")
    parser.add_argument("--false-deploys", action="store_true",
                        help="count the folds each deploy rule deploys, on the null markets "
                        f"({', '.join(NULL_MARKETS)}) and the others, instead of the learning table")
    parser.add_argument("--resume", action="store_true",
                        help="--false-deploys: keep the finished runs of --out and run the rest")
    parser.add_argument("--jobs", type=int, default=1,
                        help="--false-deploys: runs at a time, each in its own process (the CPU's "
                        "cores split between them; on CUDA they share the GPU)")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny agent, 4,000-bar markets, and unless given one market "
                        "and one seed (CI smoke test)")
    parser.add_argument("--out", metavar="FILE.json", help="also write the JSON document here")
    parser.add_argument("--markdown", metavar="FILE.md", help="also write the table here")
    args = parser.parse_args(argv)
    if args.false_deploys and (args.rules_only or args.deploy_all):
        raise SystemExit("--false-deploys: trains every fold and applies both deploy rules "
                         "itself; leave out --rules-only and --deploy-all")
    if args.jobs < 1 or (args.jobs > 1 and not args.false_deploys):
        raise SystemExit("--jobs: a count >= 1, and above 1 only with --false-deploys")
    if args.resume and not (args.false_deploys and args.out):
        raise SystemExit("--resume: needs --false-deploys and --out")
    if args.false_deploys:
        defaults = DEPLOY_QUICK_DEFAULTS if args.quick else DEPLOY_DEFAULTS
    else:
        defaults = QUICK_DEFAULTS if args.quick else {"markets": ",".join(MARKETS), "seeds": "0,1,2"}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    names = [m.strip() for m in args.markets.split(",") if m.strip()]
    unknown = [m for m in names if m not in MARKETS]
    if unknown or not names:
        raise SystemExit(f"--markets: unknown {unknown or 'none given'}; known: {', '.join(MARKETS)}")
    device = resolve_device(args.device)
    if args.bars is None:
        args.bars = 4_000 if args.quick else \
            DEPLOY_CPU_BARS if args.false_deploys and device.type == "cpu" else 30_000
    if args.false_deploys:
        false_deploys(args, names, device)
        return
    seeds = parse_seeds(args.seeds, "--seeds")
    settings = {"markets": names, "seeds": seeds, "bars": args.bars, "folds": args.folds,
                "rules_only": args.rules_only, "quick": args.quick, "ar_signal_strength": AR_SIGNAL,
                "rules": {"sma": [list(x) for x in SMA_GRID], "zfade": [list(x) for x in ZFADE_GRID]},
                "n_rules": len(default_rules()),
                "targets": {"rule": RULE_TARGET, "oracle": ORACLE_TARGET, "null_t": NULL_T}}
    if not args.rules_only:
        settings["agent_spec"] = agent_spec(args, seeds[0]).model_dump(mode="json")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            runs: list[dict[str, Any]] = []
            for seed in seeds:
                market = load_market(name, args.bars, seed)
                log(f"{name} seed {seed}: {len(market.bars):,} bars")
                partial = _partial_writer(args.out, device, settings, rows, market, runs)
                try:
                    runs.append(run_one(market, seed, args, device, Path(tmp),
                                        agent=not args.rules_only, on_fold=partial))
                except FoxhuntError as exc:
                    raise SystemExit(f"{name} seed {seed}: {exc}") from None
            rows.append(_market_row(market, summarise(market, runs), runs))
    text = table(rows)
    print(text, file=sys.stderr)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    emit("learning", device, {"complete": True, "quick": args.quick, "settings": settings,
                              "markets": rows}, args.out)


if __name__ == "__main__":
    run_main(main, "bench_learning")
