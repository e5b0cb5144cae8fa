"""A learner's initial weights depend on its seed alone, even when learners are built at once in
threads (`foxhunt tune --backend thread`), which share torch's global generator."""

from __future__ import annotations

import threading

import torch

from foxhunt.training.trainer import WalkForwardTrainer

from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")


def initial_weights(trainer: WalkForwardTrainer) -> list[torch.Tensor]:
    learner = trainer.start_fold(trainer.folds[0]).learner
    return [p.detach().clone() for p in learner.online.parameters()]


def test_learners_built_in_threads_start_from_their_seeds_weights(tmp_path):
    bars = synth(3_000, 0.3, seed=11).bars
    trainers = [WalkForwardTrainer(tiny_spec(seed=k % 2), bars, pipeline(), instrument(),
                                   tmp_path / str(k), CPU) for k in range(8)]
    alone = [initial_weights(t) for t in trainers[:2]]
    assert any(not torch.equal(a, b) for a, b in zip(*alone, strict=True))
    together: list[list[torch.Tensor] | None] = [None] * len(trainers)
    start = threading.Barrier(len(trainers))

    def build(k: int) -> None:
        start.wait()
        together[k] = initial_weights(trainers[k])

    threads = [threading.Thread(target=build, args=(k,)) for k in range(len(trainers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, weights in enumerate(together):
        assert weights is not None
        assert all(torch.equal(a, b) for a, b in zip(alone[k % 2], weights, strict=True)), k


def test_a_cpu_run_never_draws_from_torchs_global_generator(tmp_path):
    """Training, validation and test rollouts draw from the run's own generators only: a draw
    from the global one would shift the weights of a learner being seeded in another thread."""
    bars = synth(3_000, 0.3, seed=11).bars
    trainer = WalkForwardTrainer(tiny_spec(), bars, pipeline(), instrument(), tmp_path, CPU)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    trainer.run()
    assert torch.equal(before, torch.get_rng_state())
