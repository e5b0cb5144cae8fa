"""The replay stores indices and small state, so a million transitions cost megabytes."""

from __future__ import annotations

import torch

from foxhunt.replay import PrioritizedReplay, ReplayConfig


def test_one_million_transitions_with_six_position_features_fit_in_64_mb():
    rb = PrioritizedReplay(ReplayConfig(capacity=1_000_000), n_envs=1000, pos_dim=6)
    assert rb.capacity == 1_000_000
    assert rb.nbytes() <= 64 * 10**6
    # 45 B per transition (float16 states); sampling needs no workspace the size of the buffer.
    assert rb.nbytes() // rb.capacity == 45


def test_nbytes_counts_every_tensor_the_buffer_holds():
    rb = PrioritizedReplay(ReplayConfig(capacity=100), n_envs=5, pos_dim=3)
    held = [v for v in vars(rb).values() if isinstance(v, torch.Tensor)]
    assert rb.nbytes() == sum(t.numel() * t.element_size() for t in held)
