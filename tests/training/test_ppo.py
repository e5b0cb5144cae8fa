"""PPO through the walk-forward trainer: the kind chosen by config, its metrics, one seed one
run, fold isolation, resume, checkpoints that load as PPO policies (MLP and LSTM), and
`foxhunt train`, `backtest` and `paper` end to end."""

from __future__ import annotations

import json
from functools import partial

import pytest
import torch

from foxhunt.agents.ppo import ActorCritic
from foxhunt.agents.ppo.update import log_prob_entropy
from foxhunt.training.checkpoint import load_policy, read_checkpoint
from foxhunt.training.ppo import PPOLearner, PPOSteps
from foxhunt.training.pqn import rollout_schedule
from foxhunt.training.trainer import WalkForwardTrainer

from ..cli.test_cli import run_json
from .builders import (
    assert_folds_isolated,
    assert_one_seed_one_run,
    config_error,
    cpu_trainer,
    crash_after,
    run_lines,
    small_market,
    tiny_spec,
    with_learner,
)
from .test_pqn import TINY_PQN

ppo = partial(with_learner, kind="ppo")
"""`ppo(spec, **ppo_keys)`: `spec` trained by PPO, rollouts of 8 steps in 4 minibatches unless
`ppo_keys` say otherwise."""


def make(run_dir, spec=None, **kwargs) -> WalkForwardTrainer:
    """A CPU trainer of `spec` (tiny PPO by default) on `small_market`."""
    return cpu_trainer(small_market(), run_dir, spec or ppo(tiny_spec()), **kwargs)


def test_the_kind_picks_the_ppo_learner(tmp_path):
    first = make(tmp_path).folds[0]
    ctx = make(tmp_path).start_fold(first)
    assert isinstance(ctx.learner, PPOLearner) and isinstance(ctx.steps, PPOSteps)
    assert isinstance(ctx.learner.policy_net, ActorCritic)
    assert ctx.learner.policy_net.lstm is None


def test_a_bad_ppo_key_is_one_line_naming_the_key_and_the_file(tmp_path):
    path, message = config_error(tmp_path, '[agent]\nkind = "ppo"\n[ppo]\nclip_coef = -0.1\n')
    assert message.startswith(f"{path}: key 'ppo.clip_coef': ")


def test_each_epoch_trains_its_rollouts_and_logs_ppos_metrics(tmp_path):
    spec = ppo(tiny_spec(epochs=3))
    make(tmp_path, spec).run()
    schedule = rollout_schedule(spec.train.budget(), 8)
    fold0 = [x for x in run_lines(tmp_path) if x["fold"] == 0]
    assert [x["env_steps"] for x in fold0] == [r * 8 * spec.train.n_envs for r in schedule]
    assert [x["updates"] for x in fold0] == [r * spec.ppo.update_epochs * 4 for r in schedule]
    for key in ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac",
                "grad_norm", "val", "train_eval", "action_mix"):
        assert key in fold0[0]
    assert 0 < fold0[0]["entropy"] <= 3 * torch.log(torch.tensor(3.0)).item() + 1e-6


@pytest.mark.parametrize("recurrent", [False, True])
def test_one_seed_reproduces_a_cpu_run_exactly(tmp_path, recurrent):
    assert_one_seed_one_run(small_market(), tmp_path, ppo(tiny_spec(), recurrent=recurrent))


@pytest.mark.parametrize("recurrent", [False, True])
def test_the_update_starts_from_the_policy_that_collected(tmp_path, recurrent):
    """Before the first gradient step the rollout's log-probabilities and values, recomputed as
    the update does (an LSTM replaying each env's sequence from the rollout's first state,
    zeroed at episode starts), are those the envs were sampled with."""
    trainer = make(tmp_path, ppo(tiny_spec(), recurrent=recurrent, rollout_steps=40))
    learner = trainer.start_fold(trainer.folds[0]).learner
    with torch.no_grad():
        learner.collect()
        learner.collect()  # a second rollout: the envs and the LSTM state run on
        rollout = learner.prepared()
        logits, value = learner.online.sequence(rollout.obs, rollout.starts, rollout.state)
    assert rollout.starts[1:].any()  # episodes of 32 steps ended inside the rollout
    logprob = log_prob_entropy(logits, rollout.action)[0]
    torch.testing.assert_close(logprob, rollout.logprob)
    torch.testing.assert_close(value, rollout.value)


def test_every_stateful_ppo_attribute_declares_its_boundary_rule_and_nothing_crosses_folds(tmp_path):
    continued = assert_folds_isolated(small_market(), tmp_path, ppo(tiny_spec(), recurrent=True),
                                      {"rollout", "env", "market", "recurrent_state",
                                       "first_state"})
    assert continued.episode_start.all() and not continued.recurrent_state[0].any()


def test_a_resumed_run_continues_the_folds_schedule(tmp_path):
    spec = ppo(tiny_spec(epochs=3), anneal_lr=True)
    make(tmp_path / "whole", spec).run()

    with pytest.raises(KeyboardInterrupt):
        make(tmp_path / "cut", spec, on_epoch=crash_after(1, 0)).run()
    cut_dir = tmp_path / "cut"
    result = make(cut_dir, spec).run(resume=True)
    assert [r["fold"] for r in result.table()] == [0, 1]
    keys = ("fold", "epoch", "transitions", "updates")
    assert [tuple(x[k] for k in keys) for x in run_lines(cut_dir)] == \
        [tuple(x[k] for k in keys) for x in run_lines(tmp_path / "whole")]
    last = read_checkpoint(cut_dir / "checkpoints" / "fold1_last.pt")["extra"]
    assert last["rollouts"] == sum(rollout_schedule(spec.train.budget(), 8))
    lr = last["optimizer"]["param_groups"][0]["lr"]  # set before the fold's last rollout
    assert lr == pytest.approx(spec.ppo.lr / last["rollouts"])


@pytest.mark.parametrize("recurrent", [False, True])
def test_a_fold_checkpoint_holds_the_kind_and_loads_as_the_policy_that_was_validated(tmp_path, recurrent):
    trainer = make(tmp_path, ppo(tiny_spec(), recurrent=recurrent))
    trainer.run()
    path = tmp_path / "checkpoints" / "fold0.pt"
    assert read_checkpoint(path)["kind"] == "ppo"
    policy = load_policy(path)
    assert policy.kind == "ppo" and isinstance(policy.network, ActorCritic)
    assert (policy.network.lstm is not None) == recurrent and not policy.network.training
    ctx = trainer.start_fold(trainer.folds[0])
    ctx.learner.online.load_state_dict(read_checkpoint(path)["state_dict"])
    ctx.learner.policy_net.eval()
    obs = torch.randn(6, 64, policy.observation.size)
    for t in range(6):  # an LSTM's carried state too
        assert torch.equal(policy.network.act(obs[t]), ctx.learner.policy_net.act(obs[t]))


TINY_PPO = TINY_PQN.replace('kind = "pqn"', 'kind = "ppo"').replace(
    "[pqn]", "[ppo]\nrecurrent = {recurrent}")


@pytest.mark.parametrize("recurrent", ["false", "true"])
def test_foxhunt_train_with_kind_ppo_then_backtest_and_paper_its_run(capsys, tmp_path,
                                                                     recurrent):
    cfg = tmp_path / "ppo.toml"
    cfg.write_text(TINY_PPO.format(recurrent=recurrent))
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4",
             "--signal-strength", "0.3")
    run_dir = tmp_path / "run"
    trained = run_json(capsys, "--config", str(cfg), "train", "SYN", "--bars", "1min", "--seed",
                       "1", "--out", str(run_dir))
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["agent"]["kind"] == "ppo" and str(spec["ppo"]["recurrent"]).lower() == recurrent
    assert [f["fold"] for f in trained["folds"]] == [0, 1]
    backtest = run_json(capsys, "--config", str(cfg), "backtest", "SYN", "--run", str(run_dir),
                        "--device", "cpu")
    agents = [r for r in backtest["results"] if r["policy"] == "agent"]
    assert len(agents) == 2
    for fold, agent in zip(trained["folds"], agents, strict=True):  # the trainer's test, again
        assert agent["window"] == fold["windows"]["test"]
        assert agent["total_pnl"] == pytest.approx(fold["test"]["pnl"])
        assert agent["trades"] == fold["test"]["trades"]
    # a tiny budget learns to stay flat; paper trades the checkpoint's network as it is: with
    # its direction head biased to long it buys
    payload = read_checkpoint(run_dir / "checkpoints" / "fold1.pt")
    payload["state_dict"]["policy.advantage.bias_mu"][0, 1] += 100.0
    torch.save(payload, run_dir / "checkpoints" / "long.pt")
    paper = run_json(capsys, "paper", "SYN", "--checkpoint",
                     str(run_dir / "checkpoints" / "long.pt"), "--account", "ppo1")
    assert paper["policy"] == "long" and paper["fills"] > 0
