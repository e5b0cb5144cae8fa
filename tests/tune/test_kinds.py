"""Tune searches the learner (`[agent] kind`) and each kind's own space (issue 37, point 6): a
trial samples its kind first and then only keys its kind reads; a key given where a searched
kind does not read it is one line naming the key and the kind; study.json, the CLI and the
study page say per kind how its trials did and which kind won."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import optuna
import pytest

from foxhunt import schemas
from foxhunt.agents.dqn.config import KINDS
from foxhunt.errors import ConfigError
from foxhunt.report.study import render_study_report
from foxhunt.schemas import envelope
from foxhunt.training.config import TrainingSpec
from foxhunt.tune import study as study_mod
from foxhunt.tune.objective import COMPLETE, FAILED, PRUNED, TrialOutcome, trial_dir
from foxhunt.tune.pso import POSITION, PSOSampler, decode
from foxhunt.tune.space import NETWORK_FIELDS, load_space, parse_space, readers
from foxhunt.tune.study import BEST_FILE, kind_table, run_study
from tests.cli.test_cli import run, run_json
from tests.tune.test_cli_tune import TINY

from .builders import SOURCE, config, context

optuna.logging.set_verbosity(optuna.logging.WARNING)

KINDS_SPACE = {
    "agent": {"kind": {"choices": ["dqn", "pqn", "ppo"]}, "hidden": {"choices": [32, 64]}},
    "env": {"hold_cost": {"low": 0.0, "high": 0.01}},
    "kind": {"dqn": {"agent": {"lr": {"low": 1e-4, "high": 3e-3, "log": True}},
                     "replay": {"n_step": {"low": 1, "high": 4}}},
             "pqn": {"pqn": {"q_lambda": {"low": 0.3, "high": 0.9},
                             "lr": {"low": 1e-4, "high": 3e-3, "log": True}}},
             "ppo": {"ppo": {"clip_coef": {"low": 0.05, "high": 0.3},
                             "ent_coef": {"low": 0.003, "high": 0.1, "log": True}}}}}
OWN = {"dqn": {"agent.lr", "replay.n_step"}, "pqn": {"pqn.q_lambda", "pqn.lr"},
       "ppo": {"ppo.clip_coef", "ppo.ent_coef"}}
SHARED = {"agent.kind", "agent.hidden", "env.hold_cost"}


def kinds_space():
    return parse_space(KINDS_SPACE, "space.toml", "kinds")


def test_the_network_keys_are_the_learners_layout_fields():
    from foxhunt.agents.ppo.network import LAYOUT_FIELDS as PPO_LAYOUT
    from foxhunt.agents.pqn.network import LAYOUT_FIELDS as PQN_LAYOUT

    assert NETWORK_FIELDS == {"pqn": PQN_LAYOUT, "ppo": PPO_LAYOUT}
    assert set(NETWORK_FIELDS) | {"dqn"} == set(KINDS)


def test_which_kind_reads_which_key():
    assert readers("replay.n_step") == ("dqn",)
    assert readers("agent.lr") == ("dqn",) and readers("agent.tau") == ("dqn",)
    assert readers("agent.hidden") == KINDS and readers("agent.dueling") == ("dqn", "pqn")
    assert readers("pqn.q_lambda") == ("pqn",) and readers("ppo.clip_coef") == ("ppo",)
    assert readers("env.hold_cost") == KINDS and readers("walkforward.folds") == KINDS
    assert readers("train.replay_ratio") == KINDS and readers("train.n_envs") == KINDS
    assert readers("train.average_epochs") == ("dqn",)
    assert readers("train.performance.autocast") == ("dqn",)


def test_the_space_has_a_shared_part_and_one_per_kind():
    space = kinds_space()
    assert space.kinds == ("dqn", "pqn", "ppo") and space.searches_kind
    assert [p.key for p in space.shared] == ["agent.kind", "agent.hidden", "env.hold_cost"]
    assert {k: {p.key for p in v} for k, v in space.own.items()} == OWN
    assert set(space.keys()) == SHARED | set().union(*OWN.values())
    assert "ppo.clip_coef float [0.05, 0.3] (ppo only)" in space.describe()
    assert space.summary().startswith("agent.kind in ['dqn', 'pqn', 'ppo'], agent.hidden")


@pytest.mark.parametrize("sampler", ["random", "tpe", "cmaes", "pso"])
def test_a_trial_samples_its_kind_then_only_what_that_kind_reads(sampler):
    space = kinds_space()
    make = {"random": lambda: optuna.samplers.RandomSampler(seed=1),
            "tpe": lambda: optuna.samplers.TPESampler(seed=1, n_startup_trials=4),
            "cmaes": lambda: optuna.samplers.CmaEsSampler(seed=1, warn_independent_sampling=False),
            "pso": lambda: PSOSampler(space.distributions(), n_particles=3, seed=1)}[sampler]
    study = optuna.create_study(direction="maximize", sampler=make())
    seen = set()
    for n in range(24):
        trial = study.ask()
        params = space.suggest(trial)
        kind = params["agent.kind"]
        seen.add(kind)
        assert set(params) == SHARED | OWN[kind], params
        assert all(kind in readers(k) for k in params)  # a PPO trial has no DQN parameter
        assert trial.params == params
        study.tell(trial, {"dqn": 1.0, "pqn": 2.0, "ppo": 0.5}[kind] + 0.01 * n)
    assert seen == set(KINDS)


def test_pso_trials_take_their_values_from_the_particle():
    """The swarm flies over every kind's coordinates at once; a trial reads the kind's
    coordinate and its own keys'. Generation 0 is a Latin hypercube, so 3 particles over 3
    kinds try each kind once."""
    space = kinds_space()
    dists = space.distributions()
    study = optuna.create_study(direction="maximize",
                                sampler=PSOSampler(dists, n_particles=3, seed=0))
    kinds = []
    for _ in range(3):
        trial = study.ask()
        params = space.suggest(trial)
        x = study._storage.get_trial(trial._trial_id).system_attrs[POSITION]
        assert len(x) == len(dists)
        for j, key in enumerate(dists):
            if key in params:
                assert params[key] == pytest.approx(decode(dists[key], x[j]))
        kinds.append(params["agent.kind"])
        study.tell(trial, 0.0)
    assert sorted(kinds) == sorted(KINDS)


def test_without_kind_in_the_space_the_config_kind_and_its_table_are_searched():
    ppo = TrainingSpec().with_overrides({"agent": {"kind": "ppo"}}, "config")
    space = parse_space({**KINDS_SPACE, "agent": {"hidden": {"choices": [32, 64]}}},
                        "space.toml", "", ppo)
    assert space.kinds == ("ppo",) and not space.searches_kind
    assert set(space.keys()) == {"agent.hidden", "env.hold_cost", "ppo.clip_coef", "ppo.ent_coef"}
    assert space.unused == ("dqn", "pqn") and space.kind_of({}) == "ppo"


@pytest.mark.parametrize("kind, own", [
    ("dqn", {"agent.lr", "agent.tau", "replay.n_step", "train.average_epochs"}),
    ("pqn", {"pqn.lr", "pqn.q_lambda", "pqn.gamma", "pqn.eps_decay"}),
    ("ppo", {"ppo.lr", "ppo.clip_coef", "ppo.ent_coef", "ppo.gae_lambda", "ppo.update_epochs"}),
])
def test_the_shipped_space_searches_each_kinds_own_knobs(kind, own):
    base = TrainingSpec().with_overrides({"agent": {"kind": kind}}, "config")
    space = load_space(None, base)
    keys = set(space.keys())
    assert own <= keys and {"agent.hidden", "env.window", "env.hold_cost"} <= keys
    assert all(kind in readers(k) for k in keys), keys


BAD = [
    ({"kind": {"ppo": {"replay": {"n_step": {"low": 1, "high": 4}}}}},
     ("s.toml: [kind.ppo] replay.n_step: kind ppo does not read this setting (dqn's); "
      "search it under [kind.dqn]")),
    ({"kind": {"pqn": {"agent": {"lr": {"low": 1e-4, "high": 1e-3}}}}},
     ("s.toml: [kind.pqn] agent.lr: kind pqn does not read this setting (dqn's); "
      "search it under [kind.dqn]")),
    ({"agent": {"kind": {"choices": ["dqn", "ppo"]}, "lr": {"low": 1e-4, "high": 1e-3}}},
     ("s.toml: agent.lr: kind ppo (among agent.kind's choices) does not read this setting "
      "(dqn's); search it under [kind.dqn]")),
    ({"ppo": {"clip_coef": {"low": 0.1, "high": 0.2}}},
     ("s.toml: ppo.clip_coef: kind dqn (the config's [agent] kind) does not read this setting "
      "(ppo's); search it under [kind.ppo]")),
    ({"kind": {"sac": {"agent": {"lr": {"low": 1e-4, "high": 1e-3}}}}},
     "s.toml: [kind.sac]: unknown kind 'sac' (kinds: dqn, pqn, ppo)"),
    ({"agent": {"kind": {"choices": ["dqn", "sac"]}}},
     "s.toml: agent.kind: unknown kind 'sac' (kinds: dqn, pqn, ppo)"),
    ({"agent": {"kind": {"low": 0, "high": 2}}},
     's.toml: agent.kind: search the learner as { choices = ["dqn", "pqn", "ppo"] }'),
    ({"kind": {"ppo": {"agent": {"kind": {"choices": ["ppo"]}}}}},
     "s.toml: [kind.ppo] agent.kind: the kind is searched in the shared [agent] table"),
    ({"kind": {"ppo": {"clip_coef": {"low": 0.1, "high": 0.2}}}},
     "s.toml [kind.ppo]: unknown key 'clip_coef' (a setting of [ppo]: write ppo.clip_coef)"),
    ({"kind": {"pqn": {"lr": {"low": 1e-4, "high": 1e-3}}}},
     "s.toml [kind.pqn]: unknown key 'lr' (a setting of [agent], [pqn], [ppo]: write pqn.lr)"),
    ({"kind": {"ppo": {"ppo": {"clip_koef": {"low": 0.1, "high": 0.2}}}}},
     "s.toml [kind.ppo]: unknown key 'ppo.clip_koef'"),
    ({"kind": {"ppo": {"ppo": {"clip_coef": {"low": 0.3, "high": 0.2}}}}},
     "s.toml [kind.ppo]: ppo.clip_coef: empty range [0.3, 0.2]"),
    ({"kind": {"pqn": {"pqn": {"q_lambda": {"low": 0.5, "high": 1.5}}}}},
     "s.toml: pqn.q_lambda: the value 1.5 is refused"),
    ({"kind": {"ppo": 3}}, "s.toml: [kind.ppo] is a table of ppo's own keys"),
    ({"kind": 3}, "s.toml: 'kind' holds a table per kind"),
    ({"agent": {"kind": {"choices": ["dqn", "pqn"]}},
      "kind": {"dqn": {"train": {"n_envs": {"low": 8, "high": 16}}},
               "pqn": {"train": {"n_envs": {"low": 8, "high": 64}}}}},
     "s.toml: train.n_envs: searched by dqn and pqn with different ranges"),
    ({"kind": {"ppo": {}}},
     "s.toml: no parameters to search; declare bounds such as [agent] lr = { low = 1e-5"),
    ({"kind": {"ppo": {"ppo": {"lr": {"low": 1e-4, "high": 1e-3}}}}},
     ("s.toml: no parameters to search for kind dqn (the config's [agent] kind; [kind.ppo] is "
      "searched where ppo trains: search agent.kind too)")),
]


@pytest.mark.parametrize("doc, message", BAD)
def test_a_key_of_another_kind_is_one_line_naming_key_and_kind(doc, message):
    with pytest.raises(ConfigError) as err:
        parse_space(doc, "s.toml")
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_a_key_two_kinds_search_with_one_range_is_one_parameter():
    space = parse_space({"agent": {"kind": {"choices": ["dqn", "pqn"]}},
                         "kind": {"dqn": {"train": {"n_envs": {"low": 8, "high": 16}}},
                                  "pqn": {"train": {"n_envs": {"low": 8, "high": 16}}}}},
                        "s.toml")
    assert space.keys() == ["agent.kind", "train.n_envs"]
    assert space.describe()[1] == "train.n_envs int [8, 16] (dqn, pqn only)"


def test_the_docs_example_space_reads():
    """docs/tune.md's "Searching over learners" example is a space file that parses."""
    text = (Path(__file__).parents[2] / "docs" / "tune.md").read_text()
    section = text.split("## Searching over learners", 1)[1]
    example = re.search(r"```toml\n(.*?)```", section, re.DOTALL).group(1)
    space = parse_space(tomllib.loads(example), "docs/tune.md", example)
    assert space.kinds == ("dqn", "pqn", "ppo")
    assert all(space.own.get(k) for k in KINDS)


# -- the record: per kind, and which kind won --------------------------------------------------


def _fake_trial(ctx, task, prune=None):
    """What a trial of each kind scores, without training: dqn 1 + x, pqn 3 + x, ppo fails
    where clip_coef > 0.25 and is pruned below 0.1."""
    kind = task.params["agent.kind"]
    x = task.params["env.hold_cost"] * 10
    if kind == "ppo" and task.params["ppo.clip_coef"] > 0.25:
        return TrialOutcome(task.number, FAILED, None, 0.01, error="boom")
    if kind == "ppo" and task.params["ppo.clip_coef"] < 0.1:
        return TrialOutcome(task.number, PRUNED, None, 0.01)
    value = {"dqn": 1.0, "pqn": 3.0, "ppo": 2.0}[kind] + x
    bars = np.arange(64)
    returns = np.random.default_rng(task.number).normal(1e-4 * value, 1e-3, 64)
    return TrialOutcome(task.number, COMPLETE, value, 0.01,
                        [{"fold": 0, "best_epoch": 0, "val": {"sharpe": value}, "verdict": ""}],
                        bars, returns)


def test_the_record_counts_trials_per_kind_and_names_the_winner(tmp_path, monkeypatch):
    monkeypatch.setattr(study_mod, "run_trial", _fake_trial)
    space = kinds_space()
    doc = run_study(config(tmp_path, trials=30, sampler="random", pruner="none"),
                    context(tmp_path), space, SOURCE)
    rows = doc["trials"]
    assert all(r["kind"] == r["params"]["agent.kind"] for r in rows)
    by_kind = {r["kind"]: r for r in doc["by_kind"]}
    assert list(by_kind) == ["dqn", "pqn", "ppo"]
    for kind, r in by_kind.items():
        mine = [t for t in rows if t["kind"] == kind]
        done = [t["value"] for t in mine if t["state"] == "complete"]
        assert r["trials"] == len(mine) and r["completed"] == len(done)
        assert r["pruned"] == sum(t["state"] == "pruned" for t in mine)
        assert r["failed"] == sum(t["state"] == "fail" for t in mine)
        assert r["best"] == (max(done) if done else None)
        assert r["median"] == (pytest.approx(float(np.median(done))) if done else None)
    assert sum(r["trials"] for r in by_kind.values()) == 30
    assert by_kind["ppo"]["failed"] + by_kind["ppo"]["pruned"] > 0
    assert doc["kind_won"] == "pqn" == doc["best"]["kind"]
    assert doc["kind_searched"] and doc["kinds"] == ["dqn", "pqn", "ppo"]
    assert doc["kind_keys"] == {k: [p.key for p in space.own[k]] for k in KINDS}
    assert json.loads((tmp_path / "study.json").read_text())["by_kind"] == doc["by_kind"]
    assert f"(trial {doc['best']['number']}, kind pqn, validation sharpe" in \
        (tmp_path / BEST_FILE).read_text()
    best = tomllib.loads((tmp_path / BEST_FILE).read_text())
    assert best["agent"]["kind"] == "pqn" and set(best["pqn"]) == {"q_lambda", "lr"}
    html = render_study_report(doc)
    assert '<section id="kinds"><h2>Learners</h2>' in html and "<b>pqn</b> won" in html
    schemas.validate(envelope("tune.study", {"study_dir": str(tmp_path), "rows": 3000, **doc}))


def test_kind_table_of_a_study_without_a_finished_trial():
    rows = [{"number": 0, "state": "fail", "value": None, "kind": "ppo", "params": {}},
            {"number": 1, "state": "running", "value": None, "kind": "dqn", "params": {},
             "interrupted": True}]
    got = kind_table(rows, ("dqn", "ppo"), None)
    assert got["kind_won"] is None
    assert got["by_kind"] == [
        {"kind": "dqn", "trials": 0, "completed": 0, "pruned": 0, "failed": 0, "best": None,
         "median": None, "best_trial": None},
        {"kind": "ppo", "trials": 1, "completed": 0, "pruned": 0, "failed": 1, "best": None,
         "median": None, "best_trial": None}]


def test_a_flat_space_records_its_one_kind(tmp_path, monkeypatch):
    monkeypatch.setattr(study_mod, "run_trial", lambda ctx, task, prune=None: TrialOutcome(
        task.number, COMPLETE, task.params["agent.lr"] * 1000, 0.0,
        bars=np.arange(40), returns=np.random.default_rng(task.number).normal(0, 1, 40)))
    space = parse_space({"agent": {"lr": {"low": 1e-4, "high": 1e-3}}}, "s.toml", "flat")
    doc = run_study(config(tmp_path, trials=3, sampler="random"), context(tmp_path), space,
                    SOURCE)
    assert not doc["kind_searched"] and doc["kind_won"] == "dqn"
    assert [r["kind"] for r in doc["trials"]] == ["dqn"] * 3
    assert doc["by_kind"][0]["trials"] == 3 and len(doc["by_kind"]) == 1
    assert '<section id="kinds">' not in render_study_report(doc)


# -- end to end: real trials of every kind ----------------------------------------------------

E2E_SPACE = """
[agent]
kind = { choices = ["dqn", "pqn", "ppo"] }
[env]
hold_cost = { low = 0.0, high = 0.01 }
[kind.dqn]
agent.lr = { low = 1e-4, high = 3e-3, log = true }
[kind.pqn]
pqn.q_lambda = { low = 0.3, high = 0.9 }
[kind.ppo]
ppo.clip_coef = { low = 0.05, high = 0.3 }
"""


def test_foxhunt_tune_over_kinds_end_to_end(capsys, tmp_path, isolated_home):
    """Three PSO particles over three kinds: generation 0 trains one trial of each, through
    the same walk-forward objective; the CLI's table says per kind and which won; best.toml
    trains the winning kind. (--parallel 2: one intra-op thread a trial; on a busy 2-core
    machine two threads made these tiny trials ten times slower.)"""
    (tmp_path / "tiny.toml").write_text(TINY + "[train.performance]\ncompile = false\n")
    (tmp_path / "space.toml").write_text(E2E_SPACE)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4",
             "--signal-strength", "0.5")
    args = ("--config", str(tmp_path / "tiny.toml"), "tune", "SYN", "--space",
            str(tmp_path / "space.toml"), "--trials", "3", "--particles", "3", "--backend",
            "thread", "--parallel", "2", "--pruner", "none", "--no-final")
    code, out, err = run(capsys, *args)
    assert code == 0, err
    root = isolated_home / "studies" / "SYN-1min-pso"
    doc = json.loads((root / "study.json").read_text())
    assert sorted(t["kind"] for t in doc["trials"]) == ["dqn", "ppo", "pqn"]
    assert [t["state"] for t in doc["trials"]] == ["complete"] * 3, doc["trials"]
    for t in doc["trials"]:  # each trial trained its own kind
        spec = json.loads((trial_dir(root, t["number"]) / "spec.json").read_text())
        assert _find(spec, "kind") == t["kind"]
        assert len(t["folds"]) == 2
    won = max(doc["trials"], key=lambda t: t["value"])
    assert doc["kind_won"] == won["kind"]
    assert {r["kind"]: r["completed"] for r in doc["by_kind"]} == {"dqn": 1, "pqn": 1, "ppo": 1}
    flat = " ".join(out.split())
    assert "learners: validation sharpe by kind" in flat and f"kind won: {won['kind']}" in flat
    assert "searching agent.kind in ['dqn', 'pqn', 'ppo'], env.hold_cost; dqn: agent.lr" in \
        " ".join(err.split())
    shown = run_json(capsys, "--config", str(root / BEST_FILE), "config", "show")
    assert shown["settings"]["agent"]["kind"] == won["kind"]


def _find(doc, key):
    """`doc["agent"]["kind"]` wherever spec.json nests the spec."""
    if isinstance(doc, dict):
        if "agent" in doc and isinstance(doc["agent"], dict) and key in doc["agent"]:
            return doc["agent"][key]
        for v in doc.values():
            found = _find(v, key)
            if found is not None:
                return found
    return None
