"""PQN through the walk-forward trainer: the kind chosen by config, one seed one run, fold
isolation, resume, checkpoints that load as PQN policies, and `foxhunt train`, `backtest` and
`paper` end to end."""

from __future__ import annotations

import json

import pytest
import torch

from foxhunt.agents.pqn import QNetwork
from foxhunt.errors import CheckpointError
from foxhunt.training.checkpoint import load_policy, read_checkpoint
from foxhunt.training.config import TrainingSpec, fold_budget
from foxhunt.training.learner import Learner
from foxhunt.training.pqn import PQNLearner, PQNSteps, rollout_schedule
from foxhunt.training.trainer import WalkForwardTrainer

from ..cli.test_cli import run_json
from .builders import (
    assert_folds_isolated,
    assert_one_seed_one_run,
    config_error,
    cpu_trainer,
    crash_after,
    run_lines,
    synth,
    tiny_spec,
    with_learner,
)


def pqn(spec: TrainingSpec, **pqn_keys) -> TrainingSpec:
    """`spec` trained by PQN: rollouts of 8 steps in 4 minibatches unless `pqn_keys` say
    otherwise."""
    return with_learner(spec, "pqn", **pqn_keys)


@pytest.fixture(scope="module")
def market():
    return synth(3_000, 0.3)


def make(market, run_dir, spec=None, **kwargs) -> WalkForwardTrainer:
    return cpu_trainer(market, run_dir, spec or pqn(tiny_spec()), **kwargs)


def test_the_kind_defaults_to_dqn_and_picks_the_learner(market, tmp_path):
    assert TrainingSpec().agent.kind == "dqn"
    dqn = make(market, tmp_path / "a", tiny_spec()).start_fold(make(market, tmp_path).folds[0])
    assert isinstance(dqn.learner, Learner)
    ctx = make(market, tmp_path / "b").start_fold(make(market, tmp_path).folds[0])
    assert isinstance(ctx.learner, PQNLearner) and isinstance(ctx.steps, PQNSteps)
    assert isinstance(ctx.learner.policy_net, QNetwork)


def test_a_bad_kind_is_one_line_naming_the_key_and_the_file(tmp_path):
    path, message = config_error(tmp_path, '[agent]\nkind = "sac"\n')
    assert message.startswith(f"{path}: key 'agent.kind': ") and "'dqn', 'pqn' or 'ppo'" in message


def test_a_fold_collects_its_budgets_transitions_in_whole_rollouts_spread_over_its_epochs():
    budget = fold_budget(updates=100, epochs=3, batch_size=32, n_envs=16, replay_ratio=2.5)
    assert budget.transitions == 1_280
    assert rollout_schedule(budget, rollout_steps=8) == (3, 3, 4)  # 10 rollouts of 8 x 16
    assert rollout_schedule(budget, rollout_steps=1_000) == (1, 1, 1)  # at least one an epoch


def test_each_epoch_trains_its_rollouts_and_logs_pqns_metrics(market, tmp_path):
    spec = pqn(tiny_spec(epochs=3))
    make(market, tmp_path, spec).run()
    lines = run_lines(tmp_path)
    schedule = rollout_schedule(spec.train.budget(), 8)
    fold0 = [x for x in lines if x["fold"] == 0]
    assert [x["env_steps"] for x in fold0] == [r * 8 * spec.train.n_envs for r in schedule]
    assert [x["updates"] for x in fold0] == [r * spec.pqn.update_epochs * 4 for r in schedule]
    starts = [sum(schedule[:e]) for e in range(len(schedule))]
    epsilon = [sum(spec.pqn.epsilon(k, sum(schedule)) for k in range(s, s + r)) / r
               for s, r in zip(starts, schedule, strict=True)]
    assert [x["epsilon"] for x in fold0] == pytest.approx(epsilon)
    assert epsilon[0] > 0.5 and epsilon[-1] == pytest.approx(0.01)
    for key in ("loss", "mean_q", "target_q", "grad_norm", "val", "train_eval", "action_mix"):
        assert key in fold0[0]


def test_one_seed_reproduces_a_cpu_run_exactly(market, tmp_path):
    assert_one_seed_one_run(market, tmp_path, pqn(tiny_spec()))


def test_every_stateful_pqn_attribute_declares_its_boundary_rule_and_nothing_crosses_folds(
        market, tmp_path):
    assert_folds_isolated(market, tmp_path, pqn(tiny_spec()), {"rollout", "env", "market"})


def test_a_resumed_run_continues_epsilons_schedule(market, tmp_path):
    spec = pqn(tiny_spec(epochs=3))
    make(market, tmp_path / "whole", spec).run()

    with pytest.raises(KeyboardInterrupt):
        make(market, tmp_path / "cut", spec, on_epoch=crash_after(1, 0)).run()
    result = make(market, tmp_path / "cut", spec).run(resume=True)
    assert [r["fold"] for r in result.table()] == [0, 1]
    whole, cut = (run_lines(tmp_path / d) for d in ("whole", "cut"))
    assert [(x["fold"], x["epoch"], x["epsilon"], x["transitions"]) for x in cut] == \
        [(x["fold"], x["epoch"], x["epsilon"], x["transitions"]) for x in whole]


def test_a_fold_checkpoint_holds_the_kind_and_loads_as_the_policy_that_was_validated(
        market, tmp_path):
    trainer = make(market, tmp_path)
    trainer.run()
    path = tmp_path / "checkpoints" / "fold0.pt"
    assert read_checkpoint(path)["kind"] == "pqn"
    policy = load_policy(path)
    assert policy.kind == "pqn" and isinstance(policy.network, QNetwork)
    assert not policy.network.training
    ctx = trainer.start_fold(trainer.folds[0])
    ctx.learner.online.load_state_dict(read_checkpoint(path)["state_dict"])
    obs = torch.randn(64, policy.observation.size)
    assert torch.equal(policy.network.act(obs), ctx.learner.policy_net.act(obs))


def test_a_dqn_checkpoint_holds_its_kind_and_an_unknown_kind_is_one_line(market, tmp_path):
    make(market, tmp_path, tiny_spec()).run()
    path = tmp_path / "checkpoints" / "fold0.pt"
    assert read_checkpoint(path)["kind"] == "dqn" and load_policy(path).kind == "dqn"
    payload = read_checkpoint(path)
    payload["kind"] = "sac"
    torch.save(payload, tmp_path / "other.pt")
    with pytest.raises(CheckpointError) as err:
        load_policy(tmp_path / "other.pt")
    assert "\n" not in str(err.value) and "kind 'sac'" in str(err.value)


TINY_PQN = """
[env]
window = 4
episode_len = 32
[agent]
kind = "pqn"
hidden = 32
[pqn]
rollout_steps = 8
minibatches = 4
[train]
epochs = 2
updates_per_fold = 20
replay_ratio = 2.5
batch_size = 32
n_envs = 16
device = "cpu"
[walkforward]
folds = 2
purge = 8
"""


def test_foxhunt_train_with_kind_pqn_then_backtest_and_paper_its_run(capsys, tmp_path):
    cfg = tmp_path / "pqn.toml"
    cfg.write_text(TINY_PQN)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4",
             "--signal-strength", "0.3")
    run_dir = tmp_path / "run"
    trained = run_json(capsys, "--config", str(cfg), "train", "SYN", "--bars", "1min", "--seed",
                       "1", "--out", str(run_dir))
    assert json.loads((run_dir / "spec.json").read_text())["agent"]["kind"] == "pqn"
    assert [f["fold"] for f in trained["folds"]] == [0, 1]
    backtest = run_json(capsys, "--config", str(cfg), "backtest", "SYN", "--run", str(run_dir),
                        "--device", "cpu")
    assert len(backtest["results"]) == 2 * 4
    agents = [r for r in backtest["results"] if r["policy"] == "agent"]
    for fold, agent in zip(trained["folds"], agents, strict=True):  # the trainer's test, again
        assert agent["window"] == fold["windows"]["test"]
        assert agent["total_pnl"] == pytest.approx(fold["test"]["pnl"])
        assert agent["trades"] == fold["test"]["trades"]
    paper = run_json(capsys, "paper", "SYN", "--checkpoint",
                     str(run_dir / "checkpoints" / "fold1.pt"), "--account", "pqn1")
    assert paper["policy"] == "fold1" and paper["fills"] > 0
