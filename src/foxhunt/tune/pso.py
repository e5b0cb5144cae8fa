"""Particle swarm optimisation as an Optuna sampler, its whole swarm kept in the study's storage.

Optuna ships no PSO, and OptunaHub's is fetched from a git host at run time and keeps its swarm
in memory (lost on a crash). Here each trial is one particle's position in one generation: the
sampler writes the particle, the generation, the position and the velocity (in the unit cube,
one coordinate per parameter) into the trial's system attributes, and computes every new
position from the trials already stored. There is no other state, so a study resumed from its
storage continues the same swarm: the same slots, positions and random draws, from the same
personal and global bests.

Slots (generation g, particle i) are filled in order. A trial the runner marks interrupted
(`INTERRUPTED_ATTR`: its process died before it finished) gives its slot back; the next trial
takes that slot with the interrupted trial's position, so the swarm evaluates it after all.

Update (Kennedy and Eberhart 1995, with Clerc's constriction constants by default):

    v <- w v + c1 r1 (pbest_i - x) + c2 r2 (gbest - x),   |v| <= v_max per coordinate
    x <- x + v, clipped to [0, 1] (the velocity there set to 0)

pbest_i is particle i's best finished trial, gbest the swarm's, both over the trials finished
when the position is drawn (asynchronous PSO: with K trials at once a generation does not wait
for the previous one to end). Generation 0 is a Latin hypercube. The random draws of slot
(g, i) come from a generator seeded with (seed, g, i).

A unit coordinate u maps to a parameter as: linear or log between low and high (rounded to the
step or to an integer), or to choice floor(u * n) of n choices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

GEN, PARTICLE, POSITION, VELOCITY = "pso:gen", "pso:particle", "pso:x", "pso:v"
INTERRUPTED_ATTR = "foxhunt:interrupted"
"""System attribute the runner sets on a trial that was running when its study stopped."""

CLERC_INERTIA = 0.7298
CLERC_ACCELERATION = 1.49618
INITIAL_SPEED = 0.1
"""Generation 0's velocities: uniform in +-this, in unit-cube coordinates."""


class PSOSampler(BaseSampler):
    """PSO over a fixed search space (`search_space`: name -> Optuna distribution)."""

    def __init__(self, search_space: dict[str, BaseDistribution], n_particles: int = 8,
                 inertia: float = CLERC_INERTIA, cognitive: float = CLERC_ACCELERATION,
                 social: float = CLERC_ACCELERATION, max_velocity: float = 0.5, seed: int = 0):
        if n_particles < 2:
            raise ValueError(f"PSO needs at least 2 particles, got {n_particles}")
        self.space = dict(search_space)
        self.names = list(self.space)
        self.n_particles = n_particles
        self.inertia, self.cognitive, self.social = inertia, cognitive, social
        self.max_velocity = max_velocity
        self.seed = seed
        self._fallback = RandomSampler(seed=seed)

    # -- the sampler API ----------------------------------------------------------------------

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return dict(self.space)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        trials = study._storage.get_all_trials(study._study_id, deepcopy=False)
        maximize = study.direction == StudyDirection.MAXIMIZE
        gen, particle, x, v = self.next_position(trials, maximize)
        storage = study._storage
        storage.set_trial_system_attr(trial._trial_id, GEN, gen)
        storage.set_trial_system_attr(trial._trial_id, PARTICLE, particle)
        storage.set_trial_system_attr(trial._trial_id, POSITION, [float(c) for c in x])
        storage.set_trial_system_attr(trial._trial_id, VELOCITY, [float(c) for c in v])
        return {name: decode(self.space[name], float(u)) for name, u in zip(self.names, x)}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    # -- the swarm ----------------------------------------------------------------------------

    def next_position(self, trials: Sequence[FrozenTrial], maximize: bool = True
                      ) -> tuple[int, int, np.ndarray, np.ndarray]:
        """(generation, particle, position, velocity) of the next slot, from stored trials."""
        live = [t for t in trials if GEN in t.system_attrs and not _interrupted(t)]
        taken = {(t.system_attrs[GEN], t.system_attrs[PARTICLE]) for t in live}
        slot = 0
        while divmod(slot, self.n_particles) in taken:
            slot += 1
        gen, particle = divmod(slot, self.n_particles)
        lost = [t for t in trials if GEN in t.system_attrs and _interrupted(t)
                and (t.system_attrs[GEN], t.system_attrs[PARTICLE]) == (gen, particle)]
        if lost:  # evaluate the interrupted trial's position after all
            attrs = lost[-1].system_attrs
            return gen, particle, np.asarray(attrs[POSITION]), np.asarray(attrs[VELOCITY])
        if gen == 0:
            return (gen, particle, *self._initial(particle))
        prev = next(t for t in reversed(live)
                    if (t.system_attrs[GEN], t.system_attrs[PARTICLE]) == (gen - 1, particle))
        x0 = np.asarray(prev.system_attrs[POSITION])
        v0 = np.asarray(prev.system_attrs[VELOCITY])
        done = [t for t in live if t.state == TrialState.COMPLETE and t.value is not None
                and math.isfinite(t.value)]
        own = [t for t in done if t.system_attrs[PARTICLE] == particle]
        pbest = _position(_best(own, maximize)) if own else x0
        gbest = _position(_best(done, maximize)) if done else pbest
        rng = np.random.default_rng([self.seed, gen, particle])
        r1, r2 = rng.uniform(size=(2, x0.size))
        v = (self.inertia * v0 + self.cognitive * r1 * (pbest - x0)
             + self.social * r2 * (gbest - x0))
        v = np.clip(v, -self.max_velocity, self.max_velocity)
        x = x0 + v
        out = (x < 0.0) | (x > 1.0)
        x, v = np.clip(x, 0.0, 1.0), np.where(out, 0.0, v)
        return gen, particle, x, v

    def _initial(self, particle: int) -> tuple[np.ndarray, np.ndarray]:
        """Generation 0: a Latin hypercube over the particles (each coordinate's n strata
        taken once), jittered within the stratum."""
        d = len(self.names)
        strata = np.random.default_rng([self.seed, 0]).permuted(
            np.tile(np.arange(self.n_particles), (d, 1)), axis=1)
        rng = np.random.default_rng([self.seed, 0, particle])
        x = (strata[:, particle] + rng.uniform(size=d)) / self.n_particles
        v = rng.uniform(-INITIAL_SPEED, INITIAL_SPEED, size=d)
        return x, v


def _interrupted(t: FrozenTrial) -> bool:
    return t.state == TrialState.FAIL and bool(t.system_attrs.get(INTERRUPTED_ATTR))


def _best(trials: list[FrozenTrial], maximize: bool) -> FrozenTrial:
    return (max if maximize else min)(trials, key=lambda t: t.value)


def _position(t: FrozenTrial) -> np.ndarray:
    return np.asarray(t.system_attrs[POSITION])


def decode(dist: BaseDistribution, u: float) -> Any:
    """The parameter value at unit coordinate `u` of `dist`."""
    u = min(max(u, 0.0), 1.0)
    if isinstance(dist, CategoricalDistribution):
        n = len(dist.choices)
        return dist.choices[min(int(u * n), n - 1)]
    if not isinstance(dist, (FloatDistribution, IntDistribution)):
        raise TypeError(f"PSO cannot search a {type(dist).__name__}")
    low, high = float(dist.low), float(dist.high)
    if dist.log:
        value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
    else:
        value = low + u * (high - low)
    step = dist.step
    if step is not None:
        value = low + round((value - low) / step) * step
    value = min(max(value, low), high)
    return round(value) if isinstance(dist, IntDistribution) else float(value)


def encode(dist: BaseDistribution, value: Any) -> float:
    """The unit coordinate of `value` in `dist` (the inverse of `decode`, up to rounding)."""
    if isinstance(dist, CategoricalDistribution):
        return (dist.choices.index(value) + 0.5) / len(dist.choices)
    low, high = float(dist.low), float(dist.high)
    if dist.log:
        return (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
    return (float(value) - low) / (high - low)
