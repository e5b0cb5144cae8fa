"""Training-core benchmark: Rainbow updates, env collection with the policy, and an SB3 peer.

Everything foxhunt-side goes through `foxhunt.training.learner.Learner`, so the numbers are those
of the trainer's own code path (eager on the CPU; `CapturedStep` CUDA graphs on CUDA when
`[train.performance] cuda_graphs` is on):

1. update: one Rainbow update (PER sample from the replay, n-step targets, C51 loss on online
   and target nets, backward, clip, Adam, priority write-back, Polyak) at batch 512, hidden 512,
   51 atoms, 3x3 branches, n = 3, over a replay holding ~1M transitions. Eager and, on CUDA,
   graphed, graphed + compiled, and the trainer's default (graphed + compiled + bf16
   autocast). Target on the H200: median <= 0.25 ms and >= 4000 updates/s (the default).
2. collect: `Learner.collect()` for 8192 parallel envs with window 32 (noisy policy forward +
   env.step + replay.add) in the same modes; env-steps/s = n_envs * steps / s. Target on the
   H200: >= 50M env-steps/s (the default). Env-only stepping with random actions for context.
3. sb3: Stable-Baselines3 DQN on the same env through `foxhunt.env.gym_wrapper.TradingEnv`
   (Discrete(27)), MLP [hidden, hidden], same batch, train_freq 1, gradient_steps 1, same
   device. Reports its env-steps/s during learn() and its gradient updates/s when it only
   trains; target: foxhunt updates/s >= 15x SB3's.

The spec is the benchmark's sizes and performance mode, the rest sized by the GPU profile as
`foxhunt train` sizes a run (`choose_profile`, `TrainingSpec.sized_for`), and the Learner gets
the features' mirror as the trainer gives it.

Targets are reported as `target_met` booleans and never change the exit status; a measurement
that fails is reported in place (`"error"`), the others still run, and the run then exits 1.
`--quick` uses small sizes and few steps (CI runs it on the CPU, in seconds); the full-size CPU
run times only a few iterations of each step. Prints one JSON document on stdout; progress goes
to stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch
from _common import (
    NO_CUDA,
    emit,
    kernel_profile,
    kernel_timeline,
    log,
    one_line,
    range_profile,
    resolve_device,
    run_main,
    time_steps,
)
from sb3_peer import measure_sb3, sb3_ratio

from foxhunt.agents.dqn import AgentConfig
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, generate
from foxhunt.env import EnvConfig, MarketTensors, TradingVecEnv
from foxhunt.features import FeatureConfig, FeaturePipeline
from foxhunt.features.mirror import FeatureMirror
from foxhunt.profiles import choose_profile
from foxhunt.replay import ReplayConfig
from foxhunt.training import hotpath
from foxhunt.training.compiled import CompiledSteps
from foxhunt.training.config import PerformanceConfig, TrainConfig, TrainingSpec
from foxhunt.training.graphs import CapturedStep
from foxhunt.training.learner import Learner
from foxhunt.training.walkforward import Window

TARGETS = {
    "update_median_ms_max": 0.25,
    "updates_per_s_min": 4000.0,
    "collect_env_steps_per_s_min": 50e6,
    "sb3_ratio_min": 15.0,
}
TARGET_DEVICE = "NVIDIA H200, CUDA graphs"
SEED = 0
PROFILE_ITERS = 10  # CUDA: steps profiled after the timed block, for kernels_per_step


@dataclass(frozen=True)
class Sizes:
    bars: int
    n_envs: int
    replay_capacity: int
    batch_size: int
    hidden: int
    atoms: int
    window: int
    episode_len: int
    n_step: int = 3
    branches: tuple[int, ...] = (3, 3, 3)


SIZES = {
    "full": Sizes(bars=50_000, n_envs=8192, replay_capacity=1_000_000, batch_size=512, hidden=512,
                  atoms=51, window=32, episode_len=1024),
    "quick": Sizes(bars=6_000, n_envs=512, replay_capacity=65_536, batch_size=128, hidden=128,
                   atoms=51, window=32, episode_len=256),
}


@dataclass(frozen=True)
class Plan:
    """How many steps each measurement runs (timed iterations after untimed warm-up)."""

    update_iters: int
    collect_steps: int
    env_steps: int
    warmup: int
    sb3_learning_starts: int
    sb3_learn_steps: int
    sb3_train_steps: int
    timeline: bool = False


PLANS = {
    ("cuda", "full"): Plan(500, 200, 200, 20, 1_000, 3_000, 1_000),
    ("cuda", "quick"): Plan(100, 50, 50, 10, 256, 500, 200),
    ("cpu", "full"): Plan(10, 3, 5, 2, 512, 100, 30),
    ("cpu", "quick"): Plan(30, 20, 20, 3, 256, 300, 100),
}


# -- setup -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mode:
    """How the Learner runs its steps (`[train.performance]`)."""

    name: str
    cuda_graphs: bool
    compile: bool = False
    autocast: str = "off"
    side_streams: bool = True
    collect_steps_per_graph: int | None = None  # None: the trainer's default
    updates_per_graph: int | None = None  # None: the trainer's default


DEFAULT_MODE = "compiled_bf16"  # the trainer's defaults on CUDA: graphs, compile, bf16 autocast
DEFAULTS = Mode(DEFAULT_MODE, cuda_graphs=True, compile=True, autocast="bf16")


def modes(device: torch.device, plain_only: bool) -> list[Mode]:
    """CUDA: plain eager, plain graphed, graphed + compiled (float32/TF32), and the default."""
    if device.type != "cuda":
        return [Mode("eager", cuda_graphs=False)]
    out = [Mode("eager", cuda_graphs=False), Mode("graphed", cuda_graphs=True)]
    if not plain_only:
        out += [Mode("compiled", cuda_graphs=True, compile=True),
                DEFAULTS]
    return out


ON_REQUEST = [replace(DEFAULTS, name="one_stream", side_streams=False),
              replace(DEFAULTS, name="single_updates", updates_per_graph=1),
              replace(DEFAULTS, name="single_collect", collect_steps_per_graph=1),
              replace(DEFAULTS, name="tf32", autocast="tf32")]
"""CUDA modes timed only when --modes names them, each the defaults with one performance
setting at its alternative: without side streams; one update per CUDA graph; one collect step
per CUDA graph; float32 passes with TF32 matmuls instead of bf16 autocast."""


def training_spec(sizes: Sizes, device: torch.device, mode: Mode) -> TrainingSpec:
    """The benchmark's sizes and `mode`, the rest sized by the GPU profile as `foxhunt train`
    sizes a run (`choose_profile`, then `TrainingSpec.sized_for`: e.g. `updates_per_fold`,
    which sets the weight average's rate)."""
    options: dict = {}
    if mode.collect_steps_per_graph is not None:
        options["collect_steps_per_graph"] = mode.collect_steps_per_graph
    if mode.updates_per_graph is not None:
        options["updates_per_graph"] = mode.updates_per_graph
    return TrainingSpec(
        env=EnvConfig(window=sizes.window, episode_len=sizes.episode_len),
        agent=AgentConfig(hidden=sizes.hidden, atoms=sizes.atoms, branches=sizes.branches),
        replay=ReplayConfig(capacity=sizes.replay_capacity, n_step=sizes.n_step),
        train=TrainConfig(batch_size=sizes.batch_size, n_envs=sizes.n_envs, device=device.type,
                          seed=SEED, performance=PerformanceConfig(
                              cuda_graphs=mode.cuda_graphs, compile=mode.compile,
                              autocast=mode.autocast, side_streams=mode.side_streams,
                              **options)),
    ).sized_for(choose_profile().profile)


@dataclass
class MarketSetup:
    market: MarketTensors
    window: Window  # the bars episodes may start in (observation windows fully warmed up)
    groups: dict[str, list[int]]
    mirror: FeatureMirror  # what `[agent] mirror` trains on, as the trainer builds it


def build_market(sizes: Sizes, env_config: EnvConfig, device: torch.device) -> MarketSetup:
    """Synthetic SYN 1-minute bars -> causal features (fitted on all bars) -> device tensors."""
    instrument = InstrumentRegistry.load().get("SYN")
    synth = generate(SynthConfig(n_bars=sizes.bars, seed=SEED, signal_strength=0.3))
    pipeline = FeaturePipeline(FeatureConfig(), instrument.session)
    features = pipeline.transform(synth.bars, fit_until=sizes.bars)
    values = features.values.copy()  # writable, as the trainer passes it
    market = MarketTensors.from_bars(synth.bars, values, instrument, env_config, device)
    first = features.valid_from + env_config.window - 1
    mirror = FeatureMirror.of(pipeline.specs, features.normaliser)
    return MarketSetup(market, Window(first, sizes.bars), features.groups, mirror)


def fill_replay(learner: Learner) -> None:
    """Fill every slot of the replay with synthetic transitions, then spread the priorities.

    Bars are valid decision bars of the env (so observation windows gather real features), and
    next_bar = bar + 1; actions, rewards and position states are random, with rare episode ends.
    The update's cost depends on shapes only, so this times the same work as collected data
    while taking a fraction of a second instead of ~120 full collect steps.
    """
    replay, env, gen = learner.replay, learner.env, learner.generator
    n, dev = replay.n_envs, learner.device
    a = learner.spec.agent
    episode_end_p = 1.0 / learner.spec.env.episode_len

    def uniform(*shape: int) -> torch.Tensor:
        return torch.rand(shape, device=dev, generator=gen)

    for _ in range(replay.slots):
        bar = torch.randint(env.first_start, env.last_start + 1, (n,), device=dev, generator=gen)
        action = torch.randint(0, a.n_actions, (n, a.n_branches), device=dev, generator=gen)
        reward = torch.randn(n, device=dev, generator=gen)
        replay.add(bar, uniform(n, env.pos_dim), action, reward, uniform(n) < 1e-3,
                   uniform(n) < episode_end_p, bar + 1, uniform(n, env.pos_dim))
    everything = torch.arange(replay.capacity, device=dev)
    replay.update_priorities(everything, 2.0 * uniform(replay.capacity))


def new_learner(sizes: Sizes, setup: MarketSetup, device: torch.device,
                mode: Mode) -> CompiledSteps:
    """A Learner with a full replay, in the compiled steps that run it, as the trainer holds
    them."""
    spec = training_spec(sizes, device, mode)
    learner = Learner(spec, setup.market, setup.window, setup.groups, device, SEED,
                      setup.mirror if spec.agent.mirror else None)
    fill_replay(learner)
    learner.online.train()  # what run_updates() sets before its loop
    steps = CompiledSteps(learner)
    steps.prime()  # and the first staged batch
    return steps


# -- measurements ----------------------------------------------------------------------------


def update_met(u: dict) -> bool:
    return bool(u["median_ms"] <= TARGETS["update_median_ms_max"]
                and u["updates_per_s"] >= TARGETS["updates_per_s_min"])


def collect_met(c: dict) -> bool:
    return bool(c["env_steps_per_s"] >= TARGETS["collect_env_steps_per_s_min"])


def measure_update(steps: CompiledSteps, plan: Plan, device: torch.device) -> dict:
    """Per update. With `train.updates_per_graph` k > 1 each timed call is a k-update block,
    and its times and kernel counts are divided by k (as `measure_collect` does)."""
    k = steps.fast.update_block
    step = steps.update_block if k > 1 else steps.update
    # CapturedStep captures on its 4th call: the warm-up must cover it.
    warmup = plan.warmup if k == 1 else max(4, plan.warmup // k)
    t = time_steps(step, max(1, plan.update_iters // k), warmup, device)
    out = {**per_step(t.summary(), k), "updates_per_s": round(k * t.per_s, 1),
           "updates_per_graph": k, "cuda_graph": step.captured,
           **per_step_profile(kernel_profile(step, PROFILE_ITERS, device), k)}
    if plan.timeline:
        out["timeline"] = kernel_timeline(step, device)
    return {**out, "target_met": update_met(out)}


def per_step(summary: dict, k: int) -> dict:
    """A k-step block's timing summary per step (the `*_ms` figures divided by k)."""
    return {key: (round(v / k, 4) if key.endswith("_ms") or key == "host_ms_per_step" else v)
            for key, v in summary.items()}


def per_step_profile(profile: dict, k: int) -> dict:
    """A k-step block's kernel profile per step."""
    for key in ("kernels_per_step", "kernel_ms_per_step"):
        if key in profile:
            profile[key] = round(profile[key] / k, 4)
    for kernel in profile.get("top_kernels", []):
        kernel["calls_per_step"] = round(kernel["calls_per_step"] / k, 2)
        kernel["ms_per_step"] = round(kernel["ms_per_step"] / k, 4)
    return profile


def measure_collect(steps: CompiledSteps, plan: Plan, device: torch.device) -> dict:
    """Per env step. With `train.collect_steps_per_graph` k > 1 each timed call is a k-step
    block, its times and kernel counts are divided by k, and the one-step graph is measured
    too (`single_step`), for the comparison."""
    k, n_envs = steps.fast.collect_block, steps.learner.env.n_envs
    if k == 1:
        return collect_figures(steps.collect, 1, n_envs, plan, device)
    out = collect_figures(steps.collect_block, k, n_envs, plan, device)
    return {**out, "single_step": collect_figures(steps.collect, 1, n_envs, plan, device)}


def collect_figures(step: CapturedStep, k: int, n_envs: int, plan: Plan,
                    device: torch.device) -> dict:
    # CapturedStep captures on its 4th call: the warm-up must cover it.
    t = time_steps(step, max(1, plan.collect_steps // k), max(4, plan.warmup // k), device)
    summary = per_step(t.summary(), k)
    profile = per_step_profile(kernel_profile(step, PROFILE_ITERS, device), k)
    out = {**summary, "env_steps_per_s": round(n_envs * k * t.per_s),
           "steps_per_graph": k, "cuda_graph": step.captured, **profile}
    if plan.timeline:
        out["timeline"] = kernel_timeline(step, device)
    return {**out, "target_met": collect_met(out)}


def measure_env_only(
    setup: MarketSetup, env_config: EnvConfig, n_envs: int, plan: Plan, device: torch.device,
    graphed: bool,
) -> dict:
    """`TradingVecEnv.step` (incl. the next observation gather) on uniformly random actions."""
    gen = torch.Generator(device=device).manual_seed(SEED) if device.type == "cpu" else None
    env = TradingVecEnv(setup.market, env_config, n_envs=n_envs, device=device, generator=gen,
                        start_range=(setup.window.start, setup.window.stop))
    action = torch.zeros(n_envs, 3, dtype=torch.long, device=device)

    def step() -> None:
        torch.randint(0, 3, (n_envs, 3), generator=gen, device=device, out=action)
        env.step(action)

    captured = CapturedStep(step, graphed)
    t = time_steps(captured, plan.env_steps, plan.warmup, device)
    return {**t.summary(), "env_steps_per_s": round(n_envs * t.per_s),
            "cuda_graph": captured.captured, **kernel_profile(captured, PROFILE_ITERS, device)}


# -- driver ----------------------------------------------------------------------------------

SKIPPED_GRAPHS = {"skipped": f"{NO_CUDA}: CUDA graphs need a CUDA device"}


def headline(measured: dict, mode: str, keys: tuple[str, ...], target: dict) -> dict:
    """The measurement the targets are judged on, lifted to the top of its section."""
    chosen = measured[mode]
    if "error" in chosen:
        return {"headline": mode, "error": chosen["error"], "target_met": False}
    return {"headline": mode, **{k: chosen[k] for k in keys},
            "target": {**target, "on": TARGET_DEVICE}, "target_met": chosen["target_met"]}


def attempt(what: str, measure: Callable[..., dict], *args: object) -> dict:
    """`measure(*args)`, or {"error": ...} when it raises: a compiler or capture failure in one
    measurement is reported in the JSON, and the others still run."""
    try:
        return measure(*args)
    except Exception as exc:  # noqa: BLE001
        error = one_line(exc)
        log(f"{what}: failed ({error})")
        return {"error": error}


def measure_mode(
    mode: Mode, sizes: Sizes, setup: MarketSetup, plan: Plan, device: torch.device
) -> tuple[dict, dict | None, dict]:
    """(update, collect or None, layout facts) of one fresh Learner running in `mode`."""
    log(f"{mode.name}: Learner with {sizes.n_envs} envs, replay of {sizes.replay_capacity:,}")
    steps = new_learner(sizes, setup, device, mode)
    learner = steps.learner
    facts = {"obs_dim": learner.env.obs_dim,
             "replay": {"capacity": learner.replay.capacity, "slots": learner.replay.slots,
                        "nbytes": learner.replay.nbytes()}}
    with learner.fast.precision():  # as run_updates does
        log(f"{mode.name}: {plan.update_iters} updates")
        update = attempt(f"{mode.name} update", measure_update, steps, plan, device)
        if "error" not in update:
            log(f"{mode.name}: update median {update['median_ms']} ms")
        log(f"{mode.name}: {plan.collect_steps} collect steps")
        collect = attempt(f"{mode.name} collect", measure_collect, steps, plan, device)
        if "error" not in collect:
            log(f"{mode.name}: collect {collect['env_steps_per_s']:,} env-steps/s")
    del learner, steps
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return update, collect, facts


def measure_breakdown(mode: Mode, sizes: Sizes, setup: MarketSetup, device: torch.device) -> dict:
    """Where an update's time goes, piece by piece (`range_profile`), in `mode` without graphs."""
    uncaptured = replace(mode, cuda_graphs=False)
    log(f"breakdown: {mode.name} without CUDA graphs, {PROFILE_ITERS} profiled updates")
    steps = new_learner(sizes, setup, device, uncaptured)
    with steps.fast.precision():
        for _ in range(3):  # compile and warm up
            steps.update()
        pieces = range_profile(steps.update, PROFILE_ITERS, device)
    for name, cost in pieces.items():
        count = f"{cost['kernels']:g} kernels, " if "kernels" in cost else ""
        log(f"breakdown: {name}: {count}{cost['ms']} ms")
    del steps
    gc.collect()
    return {
        "mode": f"{mode.name} without CUDA graphs",
        "measure": "per update: the kernels each piece launched (count, summed device ms)"
                   if device.type == "cuda" else "per update: each piece's CPU ms",
        "per_update": pieces,
        "note": "pieces on side streams overlap: their sum exceeds the update's wall time; "
                "'autograd' is the backward pass",
    }


def run(args: argparse.Namespace) -> dict:
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    size_name = "quick" if args.quick else "full"
    sizes, plan = SIZES[size_name], PLANS[(device.type, size_name)]
    if args.update_iters:
        plan = Plan(**{**asdict(plan), "update_iters": args.update_iters})
    if args.timeline:
        plan = replace(plan, timeline=True)
    if args.collect_steps:
        plan = Plan(**{**asdict(plan), "collect_steps": args.collect_steps,
                       "env_steps": args.collect_steps})
    torch.manual_seed(SEED)
    all_modes = modes(device, args.no_compile)
    if args.modes:
        known = all_modes + (ON_REQUEST if cuda and not args.no_compile else [])
        unknown = set(args.modes) - {m.name for m in known}
        if unknown:
            raise SystemExit(f"--modes: {', '.join(sorted(unknown))} not among "
                             f"{', '.join(m.name for m in known)} on {device.type}")
        all_modes = [m for m in known if m.name in args.modes]
    if args.inductor:
        hotpath.INDUCTOR_OPTIONS = {
            key: json.loads(value) for key, _, value in
            (option.partition("=") for option in args.inductor if option != "none")}
    if args.collect_block:
        all_modes = [replace(m, collect_steps_per_graph=args.collect_block) if m.cuda_graphs
                     else m for m in all_modes]
    if args.update_block:
        all_modes = [replace(m, updates_per_graph=args.update_block) if m.cuda_graphs
                     else m for m in all_modes]
    env_config = training_spec(sizes, device, all_modes[0]).env

    log(f"{size_name} sizes on {device}: synthetic market of {sizes.bars:,} bars and features")
    setup = build_market(sizes, env_config, device)

    updates: dict = {}
    collects: dict = {}
    env_only: dict = {}
    facts: dict = {}
    for mode in all_modes:
        try:
            updates[mode.name], collects[mode.name], facts = measure_mode(
                mode, sizes, setup, plan, device)
        except Exception as exc:  # noqa: BLE001 - a compiler failure is reported, not fatal
            error = {"error": one_line(exc)}
            updates[mode.name] = collects[mode.name] = error
            log(f"{mode.name}: failed ({error['error']})")
    for mode in [m for m in all_modes if not m.compile]:
        log(f"env only ({mode.name}): {plan.env_steps} steps of {sizes.n_envs} envs")
        env_only[mode.name] = measure_env_only(setup, env_config, sizes.n_envs, plan, device,
                                               mode.cuda_graphs)
    if not cuda:
        for measured in (updates, collects, env_only):
            measured["graphed"] = SKIPPED_GRAPHS
    names = [m.name for m in all_modes]
    main_mode = DEFAULT_MODE if DEFAULT_MODE in names else names[-1]
    if "error" in updates[main_mode]:
        main_mode = next((m.name for m in all_modes if "error" not in updates[m.name]), main_mode)
    update_headline = headline(updates, main_mode, ("median_ms", "updates_per_s"),
                               {"median_ms_max": TARGETS["update_median_ms_max"],
                                "updates_per_s_min": TARGETS["updates_per_s_min"]})
    collect = {"policy": collects, "env_only": env_only,
               **headline(collects, main_mode, ("env_steps_per_s",),
                          {"env_steps_per_s_min": TARGETS["collect_env_steps_per_s_min"]})}

    if args.skip_sb3:
        sb3: dict = {"skipped": "--skip-sb3"}
    else:
        sb3 = sb3_ratio(
            measure_sb3(setup.market, setup.window, env_config, sizes.hidden, sizes.batch_size,
                        plan.warmup, (plan.sb3_learning_starts, plan.sb3_learn_steps,
                                      plan.sb3_train_steps), device, SEED),
            update_headline.get("updates_per_s"), TARGETS["sb3_ratio_min"], TARGET_DEVICE)
    update = {**updates, **update_headline}
    if args.breakdown:
        update["breakdown"] = measure_breakdown(
            next(m for m in all_modes if m.name == main_mode), sizes, setup, device)

    notes = [
        ("Per-step times are gaps between CUDA events recorded after each step (CPU: "
        "perf_counter per step); updates_per_s and env_steps_per_s are throughput over the "
        "whole timed block."),
        ("The replay is filled with synthetic transitions (valid bar indices, random actions, "
        "rewards and priorities) via PrioritizedReplay.add; the update's cost depends on shapes "
        "only."),
        (f"Targets are for the {TARGET_DEVICE} with the trainer's defaults (mode "
        f"{DEFAULT_MODE}: graphs, torch.compile, bf16 autocast); "
        "target_met is reported for every mode on every device."),
        ("foxhunt's update does more work than SB3's: C51 (51 atoms) dueling branching heads, "
        "noisy layers, double-DQN online+target forwards on the next state, an auxiliary head, "
        "PER sampling and priority write-back, and a Polyak update every step."),
    ]
    if not cuda:
        notes.append(f"CPU run: only {plan.update_iters} updates, {plan.collect_steps} collect "
                     f"steps and {plan.env_steps} env-only steps are timed.")
    return {
        "mode": size_name,
        "quick": args.quick,
        "config": {**asdict(sizes), "n_features": setup.market.n_features, **facts,
                   "start_window": [setup.window.start, setup.window.stop],
                   "inductor_options": hotpath.INDUCTOR_OPTIONS,
                   "plan": asdict(plan)},
        "update": update,
        "collect": collect,
        "sb3": sb3,
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke test, CPU)")
    parser.add_argument("--out", metavar="FILE.json", help="also write the JSON document here")
    parser.add_argument("--skip-sb3", action="store_true", help="skip the SB3 peer")
    parser.add_argument("--no-compile", action="store_true",
                        help="CUDA: time only the plain eager and graphed modes (no torch.compile)")
    parser.add_argument("--modes", nargs="+", metavar="MODE",
                        help="time only these modes (eager, graphed, compiled, compiled_bf16; "
                        "on CUDA also one_stream: the defaults without side streams; "
                        "single_updates, single_collect: the defaults with one update or one "
                        "collect step per CUDA graph; tf32: the defaults with autocast = tf32)")
    parser.add_argument("--collect-block", type=int, metavar="K",
                        help="[train.performance] collect_steps_per_graph for the graphed modes (default: "
                        "the trainer's)")
    parser.add_argument("--update-block", type=int, metavar="K",
                        help="[train.performance] updates_per_graph for the graphed modes (default: the "
                        "trainer's)")
    parser.add_argument("--timeline", action="store_true",
                        help="CUDA: also record one update's and one collect step's kernel "
                        "timeline (streams, offsets, idle time)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also profile the headline mode's update piece by piece")
    parser.add_argument("--inductor", action="append", default=[], metavar="KEY=JSON",
                        help="inductor options for the compiled modes instead of the "
                        "trainer's (hotpath.INDUCTOR_OPTIONS), e.g. combo_kernels=false; "
                        "'none' for {}")
    parser.add_argument("--update-iters", type=int, metavar="N", help="timed updates per mode")
    parser.add_argument("--collect-steps", type=int, metavar="N",
                        help="timed collect and env-only steps per mode")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    emit("train", device, run(args), args.out)


if __name__ == "__main__":
    run_main(main, "bench_train")
