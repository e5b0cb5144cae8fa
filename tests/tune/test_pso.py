"""The PSO sampler: it optimises, and its swarm lives in the study's storage, so a study that
stops (even mid-trial) and resumes continues the same swarm."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from foxhunt.tune.pso import GEN, INTERRUPTED_ATTR, PARTICLE, POSITION, PSOSampler, decode, encode
from foxhunt.tune.study import mark_interrupted

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {"x": FloatDistribution(-5, 5), "y": FloatDistribution(1e-3, 10, log=True),
         "n": IntDistribution(1, 8), "c": CategoricalDistribution(["a", "b", "c"])}


def bowl(params) -> float:
    """Maximised at x = 1, y = 0.1, n = 6, c = 'b'."""
    import math

    return -((params["x"] - 1) ** 2 + math.log10(params["y"] / 0.1) ** 2 + (params["n"] - 6) ** 2 / 4
             + (params["c"] != "b"))


def ask_tell(study, n: int, leave_running: int = 0) -> list[dict]:
    asked = []
    for k in range(n):
        trial = study.ask(SPACE)
        asked.append(dict(trial.params))
        if k < n - leave_running:
            study.tell(trial, bowl(trial.params))
    return asked


def test_decode_and_encode_are_inverse_on_the_grid():
    for dist, value in ((SPACE["x"], 2.5), (SPACE["y"], 0.5), (SPACE["n"], 3), (SPACE["c"], "c")):
        assert decode(dist, encode(dist, value)) == pytest.approx(value)
    assert decode(SPACE["n"], 0.0) == 1 and decode(SPACE["n"], 1.0) == 8
    assert decode(SPACE["c"], 1.0) == "c"


def test_the_swarm_finds_the_top_of_a_bowl():
    study = optuna.create_study(direction="maximize", sampler=PSOSampler(SPACE, 8, seed=3))
    ask_tell(study, 200)
    assert study.best_value > -0.05
    assert study.best_params["c"] == "b" and study.best_params["n"] == 6
    first = study.trials[:8]
    assert [(t.system_attrs[GEN], t.system_attrs[PARTICLE]) for t in first] == [(0, i) for i in range(8)]
    # Generation 0 is a Latin hypercube: each coordinate's 8 strata taken once.
    for j in range(4):
        strata = sorted(int(t.system_attrs[POSITION][j] * 8) for t in first)
        assert strata == list(range(8))


def test_a_resumed_study_continues_the_same_swarm(log_url):
    """Run 20 trials straight; then run 11, leave 2 running (a crash), resume from storage with
    a new sampler object: the interrupted slots are evaluated at their positions, and every
    later trial draws what the straight run drew. The storage is a SQLite file or a real
    PostgreSQL database (`log_url`)."""
    straight = optuna.create_study(direction="maximize", sampler=PSOSampler(SPACE, 4, seed=9))
    expected = ask_tell(straight, 20)

    url = log_url
    first = optuna.create_study(study_name="s", storage=url, direction="maximize",
                                sampler=PSOSampler(SPACE, 4, seed=9))
    asked = ask_tell(first, 13, leave_running=2)  # trials 11 and 12 never finish
    assert asked == expected[:13]
    del first

    resumed = optuna.load_study(study_name="s", storage=url, sampler=PSOSampler(SPACE, 4, seed=9))
    assert mark_interrupted(resumed) == [11, 12]
    redo = ask_tell(resumed, 9)
    assert redo == expected[11:20]
    lost = [t for t in resumed.trials if t.system_attrs.get(INTERRUPTED_ATTR)]
    assert [t.state for t in lost] == [TrialState.FAIL] * 2
    done = [t for t in resumed.trials if t.state == TrialState.COMPLETE]
    assert len(done) == 20
    assert sorted((t.system_attrs[GEN], t.system_attrs[PARTICLE]) for t in done) == \
        [divmod(k, 4) for k in range(20)]


def test_a_minimising_study_moves_toward_lower_values():
    study = optuna.create_study(direction="minimize", sampler=PSOSampler(SPACE, 6, seed=1))
    for _ in range(120):
        t = study.ask(SPACE)
        study.tell(t, -bowl(t.params))
    assert study.best_value < 0.1


def test_too_small_a_swarm_is_refused():
    with pytest.raises(ValueError, match="at least 2 particles"):
        PSOSampler(SPACE, 1)
