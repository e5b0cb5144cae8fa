"""Small synthetic markets, CPU-sized training specs and an oracle policy shared by the training
tests."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from foxhunt.agents.dqn.config import AgentConfig
from foxhunt.config import load_settings
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.synth import SynthConfig, SynthMarket, generate
from foxhunt.env.config import EnvConfig
from foxhunt.env.market import MarketTensors
from foxhunt.errors import ConfigError
from foxhunt.features.config import FeatureConfig
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.replay.config import ReplayConfig
from foxhunt.training.checkpoint import load_checkpoint, read_checkpoint
from foxhunt.training.config import PerformanceConfig, TrainConfig, TrainingSpec
from foxhunt.training.evaluate import Policy, rollout
from foxhunt.training.fold_state import FOLD_BOUNDARY
from foxhunt.training.trainer import FoldReport, WalkForwardTrainer, market_head
from foxhunt.training.walkforward import WalkForwardConfig


def synth(n_bars: int, signal: float, seed: int = 7) -> SynthMarket:
    return generate(SynthConfig(n_bars=n_bars, seed=seed, signal_strength=signal))


@functools.cache
def small_market() -> SynthMarket:
    """3,000 bars with a planted signal of 0.3, built once per session: for plumbing tests."""
    return synth(3_000, 0.3)


def instrument():
    return InstrumentRegistry.load().get("SYN")


def pipeline() -> FeaturePipeline:
    return FeaturePipeline(FeatureConfig(), instrument().session)


def tiny_spec(epochs: int = 2, folds: int = 2, performance: dict | None = None,
              **train) -> TrainingSpec:
    """Seconds on CPU: for plumbing, determinism and fold-isolation tests; `performance` sets
    [train.performance] keys (compile on: the GPU tests test it), `train` other [train] keys.
    By default each epoch: 10 updates of 32 and 8 collect steps of 16 envs. The sample augmentations (mirror, input noise) are off:
    the tests built on it hold the update to `reference_update` on the replay's own batches;
    test_regularisers.py tests the augmentations."""
    train = {"updates_per_fold": 10 * epochs, "replay_ratio": 2.5, **train}
    return TrainingSpec(
        env=EnvConfig(window=4, episode_len=32, slippage_ticks=0),
        agent=AgentConfig(hidden=32, atoms=11, lr=1e-3, mirror=False, input_noise=0.0),
        replay=ReplayConfig(capacity=4096, beta_anneal_steps=200),
        train=TrainConfig(epochs=epochs, learning_starts=128, batch_size=32, n_envs=16,
                          eval_windows=8,
                          performance=PerformanceConfig(**{"compile": True,
                                                           **(performance or {})}), **train),
        walkforward=WalkForwardConfig(folds=folds, purge=8),
    )


def learning_spec() -> TrainingSpec:
    """Tens of seconds on CPU: enough updates to learn the planted signal of `synth`. Each
    epoch: 60 updates of 128 and 16 collect steps of 32 envs."""
    return TrainingSpec(
        env=EnvConfig(window=4, episode_len=64, slippage_ticks=0),
        agent=AgentConfig(hidden=64, atoms=11, lr=1e-3),
        replay=ReplayConfig(capacity=40_000, beta_anneal_steps=1_000),
        train=TrainConfig(epochs=8, updates_per_fold=480, replay_ratio=15.0, learning_starts=512,
                          batch_size=128, n_envs=32, eval_windows=16),
        walkforward=WalkForwardConfig(folds=1, purge=8),
    )


def position_policy(direction_by_bar: Tensor, size: int = 2) -> Policy:
    """Hold sign(direction_by_bar[t]) decided at bar t (e.g. an oracle's), at size index `size`."""
    side = torch.sign(direction_by_bar).long()

    def act(obs: Tensor, bar: Tensor) -> Tensor:
        d = side.to(bar.device)[bar]
        direction = torch.where(d > 0, 1, torch.where(d < 0, 2, 0))
        return torch.stack((direction, torch.full_like(direction, size), torch.zeros_like(direction)), 1)

    return act


def with_learner(spec: TrainingSpec, kind: str, **keys: Any) -> TrainingSpec:
    """`spec` trained by the rollout learner `kind` ("pqn" or "ppo"): rollouts of 8 steps in 4
    minibatches unless `keys` (of its own section) say otherwise."""
    section = getattr(spec, kind).model_copy(update={"rollout_steps": 8, "minibatches": 4, **keys})
    return spec.model_copy(update={"agent": spec.agent.model_copy(update={"kind": kind}),
                                   kind: section})


def cpu_trainer(market: SynthMarket, run_dir: Path, spec: TrainingSpec,
                **kwargs: Any) -> WalkForwardTrainer:
    return WalkForwardTrainer(spec, market.bars, pipeline(), instrument(), run_dir,
                              torch.device("cpu"), **kwargs)


def run_lines(run_dir: Path) -> list[dict[str, Any]]:
    """A run's run.jsonl, one dict an epoch."""
    return [json.loads(x) for x in (run_dir / "run.jsonl").read_text().splitlines()]


def crash_after(fold: int, epoch: int) -> Callable[[dict[str, Any]], None]:
    """An `on_epoch` that interrupts the run once fold `fold`'s epoch `epoch` is logged."""

    def crash(line: dict[str, Any]) -> None:
        if line["fold"] == fold and line["epoch"] == epoch:
            raise KeyboardInterrupt

    return crash


def assert_one_seed_one_run(market: SynthMarket, run_dir: Path, spec: TrainingSpec) -> None:
    """Two CPU runs of `spec` give the same run.jsonl and weights whatever torch's global
    generator did between them; the next seed gives another run."""
    cpu_trainer(market, run_dir / "a", spec).run()
    torch.rand(3)  # the global generator's state must not matter
    cpu_trainer(market, run_dir / "b", spec).run()
    a, b = (read_checkpoint(run_dir / d / "checkpoints" / "fold1.pt") for d in "ab")
    assert (run_dir / "a" / "run.jsonl").read_text() == (run_dir / "b" / "run.jsonl").read_text()
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    other = spec.train.model_copy(update={"seed": spec.train.seed + 1})
    cpu_trainer(market, run_dir / "c", spec.model_copy(update={"train": other})).run()
    assert (run_dir / "a" / "run.jsonl").read_text() != (run_dir / "c" / "run.jsonl").read_text()


def assert_folds_isolated(market: SynthMarket, run_dir: Path, spec: TrainingSpec,
                          declared: set[str]) -> Any:
    """Every stateful attribute of a fold's learner (besides `declared`, held in containers)
    has its rule in `FOLD_BOUNDARY`, and fold 1's learner after fold 0 trained starts as a
    fresh one: weights, generator, empty Adam, nothing collected. Returns that learner."""
    after = cpu_trainer(market, run_dir / "a", spec)
    ctx0 = after.start_fold(after.folds[0])
    stateful = {name for name, v in vars(ctx0.learner).items()
                if isinstance(v, (torch.nn.Module, torch.optim.Optimizer, torch.Tensor,
                                  torch.Generator)) and not name.startswith("_")}
    assert stateful | declared <= set(FOLD_BOUNDARY)
    after.train_fold(ctx0)
    continued = after.start_fold(after.folds[1]).learner
    fresh = cpu_trainer(market, run_dir / "b", spec).start_fold(after.folds[1]).learner
    for a, b in ((continued.online.state_dict(), fresh.online.state_dict()),
                 ({"generator": continued.generator.get_state()},
                  {"generator": fresh.generator.get_state()})):
        assert all(torch.equal(a[k], b[k]) for k in b)
    assert continued.optimizer.state_dict()["state"] == {}
    assert continued.rollouts == 0 and continued.transitions == 0
    return continued


def train_planted(spec: TrainingSpec, signal: float, run_dir: Path, seed: int = 0,
                  epochs: int = 4, updates: int = 1_920) -> tuple[SynthMarket, WalkForwardTrainer,
                                                                  FoldReport]:
    """`spec` on the 10,000-bar planted AR(1) market of strength `signal` (`synth`), `epochs`
    of a fold budget of `updates` (its transitions: `updates` x batch / replay ratio), seeded
    `seed`: the market, the trainer and its first fold's report."""
    market = synth(10_000, signal)
    train = spec.train.model_copy(update={"epochs": epochs, "updates_per_fold": updates,
                                          "seed": seed})
    trainer = cpu_trainer(market, run_dir, spec.model_copy(update={"train": train}))
    return market, trainer, trainer.run().folds[0]


def oracle_sharpe(market: SynthMarket, trainer: WalkForwardTrainer) -> float:
    """The oracle's test Sharpe on the trainer's first fold: sign(s[t]) held through the same
    env, costs and window as the agent."""
    fold, spec = trainer.folds[0], trainer.spec
    features = pipeline().transform(market.bars, fit_until=fold.train.stop)
    mt = MarketTensors.from_bars(market.bars, features.values.copy(), instrument(), spec.env, "cpu")
    return rollout(position_policy(torch.as_tensor(market.signal)),
                   market_head(mt, fold.test.stop), spec.env, fold.test, spec.train.capital,
                   chunks=1).sharpe


def assert_no_edge_in_noise(trainer: WalkForwardTrainer, report: FoldReport,
                            run_dir: Path) -> None:
    """A leak detector on a market without signal: the first fold's checkpoint, tested again,
    gives the report's test PnL, and no significant positive t-statistic (or stays flat)."""
    from .test_learning import t_stat  # test_learning imports this module

    test = report.test if report.deployed == "agent" else report.undeployed_test
    ctx = trainer.start_fold(trainer.folds[0])
    load_checkpoint(run_dir / "checkpoints" / "fold0.pt", ctx.learner.policy_net)
    result = trainer.evaluate(ctx, ctx.test_market, ctx.fold.test, chunks=1)
    assert result.summary()["pnl"] == pytest.approx(test["pnl"])
    assert not result.pnl.any() or t_stat(result.pnl) < 2.0, result.summary()


def config_error(run_dir: Path, toml: str) -> tuple[Path, str]:
    """(the file, its one-line error) of a config `toml` that foxhunt refuses."""
    path = run_dir / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_settings(path, home=run_dir)
    message = str(err.value)
    assert "\n" not in message
    return path, message
