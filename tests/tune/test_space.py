"""The search space file: any training-config key, checked before a trial runs; mistakes are
one line naming the key and the file."""

from __future__ import annotations

import pytest

from foxhunt.errors import ConfigError
from foxhunt.training.config import TrainingSpec
from foxhunt.tune.space import apply, load_space, overrides, parse_space


def test_the_shipped_space_reads_and_every_bound_validates():
    space = load_space()
    assert {"agent.lr", "agent.hidden", "replay.n_step", "replay.alpha", "env.hold_cost",
            "train.replay_ratio"} <= set(space.keys())
    lr = next(p for p in space.params if p.key == "agent.lr")
    assert (lr.kind, lr.log) == ("float", True)


def test_kinds_follow_the_bounds():
    space = parse_space({"replay": {"n_step": {"low": 1, "high": 5}, "alpha": {"low": 0, "high": 1.0}},
                         "agent": {"hidden": {"choices": [64, 128]}},
                         "train": {"performance": {"autocast": {"choices": ["bf16", "off"]}}}},
                        "s.toml")
    kinds = {p.key: p.kind for p in space.params}
    assert kinds == {"replay.n_step": "int", "replay.alpha": "float", "agent.hidden": "categorical",
                     "train.performance.autocast": "categorical"}
    dists = space.distributions()
    assert dists["replay.n_step"].low == 1 and dists["agent.hidden"].choices == (64, 128)


@pytest.mark.parametrize("doc, message", [
    ({"agent": {"lrr": {"low": 1e-4, "high": 1e-3}}}, "s.toml: unknown key 'agent.lrr'"),
    ({"agnet": {"lr": {"low": 1e-4, "high": 1e-3}}}, "s.toml: unknown key 'agnet'"),
    ({"agent": {"lr": {"low": 1e-3, "high": 1e-3}}}, "s.toml: agent.lr: empty range [0.001, 0.001]"),
    ({"agent": {"lr": {"low": 1e-2, "high": 1e-3}}}, "s.toml: agent.lr: empty range"),
    ({"agent": {"lr": {"low": 0.0, "high": 1e-3, "log": True}}}, "s.toml: agent.lr: a log range needs low > 0"),
    ({"agent": {"hidden": {"choices": []}}}, "s.toml: agent.hidden: empty choices"),
    ({"agent": {"lr": {"low": 1e-4}}}, "s.toml: agent.lr: a range needs 'low' and 'high'"),
    ({"agent": {"lr": 0.001}}, "s.toml: agent.lr: expected a range"),
    ({"replay": {"alpha": {"low": 0.5, "high": 2.0}}}, "s.toml: replay.alpha: the value 2.0 is refused"),
    ({"agent": {"atoms": {"choices": [11, 33]}}}, "s.toml: agent.atoms: the value 33 is refused"),
    ({"train": {"performance": 3}}, "s.toml: 'train.performance' is a section"),
    ({}, "s.toml: no parameters to search"),
])
def test_mistakes_are_one_line_naming_key_and_file(doc, message):
    with pytest.raises(ConfigError) as err:
        parse_space(doc, "s.toml")
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_or_broken_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.toml: file not found"):
        load_space(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[agent\n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_space(bad)


def test_params_apply_as_nested_overrides():
    assert overrides({"agent.lr": 1e-3, "train.performance.compile": False}) == {
        "agent": {"lr": 1e-3}, "train": {"performance": {"compile": False}}}
    spec = apply(TrainingSpec(), {"agent.lr": 1e-3, "replay.n_step": 2}, "trial 0")
    assert spec.agent.lr == 1e-3 and spec.replay.n_step == 2
    assert "lr" in spec.agent.model_fields_set  # set explicitly: a GPU profile does not replace it
