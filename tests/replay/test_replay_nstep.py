"""n-step returns built at sample time equal a brute-force walk over each env's history.

A window starts at the sampled transition and takes up to n_step steps of the same env; it stops
after a terminated step (reward included, discount 0), after a truncated step (reward included,
bootstrap from its true next state) and at the newest transition written (bootstrap from its
next state). It never crosses an episode boundary or reaches data the ring has overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.replay import PrioritizedReplay, ReplayConfig


@dataclass
class Step:
    bar: int
    pos: list[float]
    action: list[int]
    reward: float  # the float32 value the buffer stores
    terminated: bool
    truncated: bool
    next_bar: int
    next_pos: list[float]


def simulate(
    rb: PrioritizedReplay, steps: int, p_term: float, p_trunc: float, seed: int
) -> list[list[Step]]:
    """Run `steps` lock-step env steps into rb; return every env's full history, in order."""
    rng = np.random.default_rng(seed)
    E, P = rb.n_envs, rb.pos_dim
    history: list[list[Step]] = [[] for _ in range(E)]
    bar = rng.integers(0, 1000, E)
    pos = rng.integers(-64, 64, (E, P)) / 32  # exact in float16
    for _ in range(steps):
        action = rng.integers(0, 3, (E, 3))
        reward = rng.standard_normal(E).astype(np.float32)
        terminated = rng.random(E) < p_term
        truncated = rng.random(E) < p_trunc
        next_bar = bar + 1
        next_pos = rng.integers(-64, 64, (E, P)) / 32
        columns = (bar, pos, action, reward, terminated, truncated, next_bar, next_pos)
        rb.add(*(torch.from_numpy(c) for c in columns))
        for e in range(E):
            history[e].append(Step(*(c[e].tolist() for c in columns)))
        # Auto-reset: an ended episode restarts at a random bar with a flat position.
        ended = terminated | truncated
        bar = np.where(ended, rng.integers(0, 1000, E), next_bar)
        pos = np.where(ended[:, None], 0.0, next_pos)
    return history


def reference(history: list[Step], slot: int, slots: int, n: int, gamma: float):
    """(first step, return, discount, bootstrap step) for the transition now stored in `slot`."""
    newest = len(history) - 1
    t = newest - (newest - slot) % slots  # the latest step written to this slot
    ret, used = 0.0, 0
    for k in range(n):
        if t + k > newest:
            break
        step = history[t + k]
        ret += gamma**k * step.reward
        used = k + 1
        if step.terminated or step.truncated:
            break
    last = history[t + used - 1]
    discount = 0.0 if last.terminated else gamma**used
    return history[t], ret, discount, last


def check_all_stored(rb: PrioritizedReplay, history: list[list[Step]]) -> None:
    stored = rb.size.item() * rb.n_envs
    batch = rb.lookup(torch.arange(stored))
    cfg = rb.config
    for i in range(stored):
        slot, env = divmod(i, rb.n_envs)
        first, ret, discount, last = reference(history[env], slot, rb.slots, cfg.n_step, cfg.gamma)
        assert batch.bar[i].item() == first.bar
        assert batch.pos_state[i].tolist() == first.pos
        assert batch.action[i].tolist() == first.action
        assert batch.ret[i].item() == pytest.approx(ret, abs=1e-6)
        assert batch.discount[i].item() == pytest.approx(discount, abs=1e-6)
        assert batch.next_bar[i].item() == last.next_bar
        assert batch.next_pos_state[i].tolist() == last.next_pos


@settings(max_examples=60, deadline=None)
@given(
    n_envs=st.integers(1, 4),
    slots=st.integers(1, 7),
    n_step=st.integers(1, 5),
    steps=st.integers(1, 25),  # up to several times around the ring
    p_term=st.sampled_from([0.0, 0.15, 0.5]),
    p_trunc=st.sampled_from([0.0, 0.15, 0.5]),
    gamma=st.sampled_from([1.0, 0.99, 0.5]),
    state_dtype=st.sampled_from(["float16", "float32"]),
    seed=st.integers(0, 2**31 - 1),
)
def test_n_step_targets_match_brute_force_reference(
    n_envs, slots, n_step, steps, p_term, p_trunc, gamma, state_dtype, seed
):
    cfg = ReplayConfig(capacity=slots * n_envs, n_step=n_step, gamma=gamma, state_dtype=state_dtype)
    rb = PrioritizedReplay(cfg, n_envs=n_envs, pos_dim=3)
    history = simulate(rb, steps, p_term, p_trunc, seed)
    check_all_stored(rb, history)


def test_sampled_batches_carry_the_same_targets_as_lookup():
    cfg = ReplayConfig(capacity=40, n_step=3)
    rb = PrioritizedReplay(cfg, n_envs=4, pos_dim=3, generator=torch.Generator().manual_seed(0))
    simulate(rb, steps=23, p_term=0.2, p_trunc=0.2, seed=1)  # wrapped around the 10-slot ring
    batch = rb.sample(64)
    again = rb.lookup(batch.index, batch.weight)
    for name in vars(batch):
        assert torch.equal(getattr(batch, name), getattr(again, name)), name


def test_worked_example_one_env():
    """gamma 0.5, rewards 1, 2, 4, 8, 16; step 1 truncated, step 3 terminated; n = 3."""
    cfg = ReplayConfig(capacity=8, n_step=3, gamma=0.5, state_dtype="float32")
    rb = PrioritizedReplay(cfg, n_envs=1, pos_dim=1)
    for t, (r, term, trunc) in enumerate([(1, 0, 0), (2, 0, 1), (4, 0, 0), (8, 1, 0), (16, 0, 0)]):
        rb.add(torch.tensor([t]), torch.tensor([[float(t)]]), torch.zeros(1, 3, dtype=torch.long),
               torch.tensor([float(r)]), torch.tensor([bool(term)]), torch.tensor([bool(trunc)]),
               torch.tensor([100 + t]), torch.tensor([[100.0 + t]]))  # fmt: skip
    b = rb.lookup(torch.arange(5))
    # t=0: 1 + .5*2, stops after the truncation at t=1, bootstraps from t=1's next state with .5^2.
    # t=1: truncated itself. t=2: 4 + .5*8, ends in a termination. t=3: terminated.
    # t=4: the newest transition, no successor yet: bootstraps from its own next state.
    assert b.ret.tolist() == [2.0, 2.0, 8.0, 8.0, 16.0]
    assert b.discount.tolist() == [0.25, 0.5, 0.0, 0.0, 0.5]
    assert b.next_bar.tolist() == [101, 101, 103, 103, 104]
    assert b.next_pos_state.squeeze(1).tolist() == [101.0, 101.0, 103.0, 103.0, 104.0]


def test_uniform_sampling_caps_each_window_at_a_drawn_number_of_steps():
    """Each target is the m-step target of `reference` for some m in 1..n_step, every m occurs,
    and the cap only ever shortens a window (episode ends and the ring head still stop it)."""
    cfg = ReplayConfig(capacity=400, n_step=4, gamma=0.9, n_step_sampling="uniform",
                       state_dtype="float32")
    rb = PrioritizedReplay(cfg, n_envs=4, pos_dim=3, generator=torch.Generator().manual_seed(0))
    history = simulate(rb, steps=100, p_term=0.02, p_trunc=0.02, seed=3)
    batch = rb.sample(512)
    drawn = []
    for i, index in enumerate(batch.index.tolist()):
        slot, env = divmod(index, rb.n_envs)
        targets = [reference(history[env], slot, rb.slots, m, cfg.gamma) for m in (1, 2, 3, 4)]
        m = next(m for m, (_, ret, discount, last) in enumerate(targets, 1)
                 if batch.next_bar[i].item() == last.next_bar
                 and batch.ret[i].item() == pytest.approx(ret, abs=1e-5)
                 and batch.discount[i].item() == pytest.approx(discount, abs=1e-6))
        drawn.append(m)
    counts = np.bincount(drawn, minlength=5)[1:]
    assert (counts > 0).all(), counts
    assert counts[0] > counts[3]  # windows cut short by episode ends and the head add to m=1..3


def test_fixed_sampling_is_the_default_and_uses_every_step():
    cfg = ReplayConfig(capacity=40, n_step=3)
    assert cfg.n_step_sampling == "fixed"
    rb = PrioritizedReplay(cfg, n_envs=4, pos_dim=3, generator=torch.Generator().manual_seed(0))
    history = simulate(rb, steps=23, p_term=0.2, p_trunc=0.2, seed=1)
    batch = rb.sample(64)
    for i, index in enumerate(batch.index.tolist()):
        slot, env = divmod(index, rb.n_envs)
        _, ret, _, _ = reference(history[env], slot, rb.slots, cfg.n_step, cfg.gamma)
        assert batch.ret[i].item() == pytest.approx(ret, abs=1e-6)
