"""A self-tuning bound sits at a running high quantile of what it bounds, follows it as it
drifts, is not dragged by one outlier, and clips gradients only at the run's own outliers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from foxhunt.training.bounds import RunningQuantile
from foxhunt.training.optim import ClippedAdam

CPU = torch.device("cpu")


def feed(bound: RunningQuantile, xs) -> None:
    for x in xs:
        bound.observe(torch.tensor(float(x)))


def test_the_first_observations_give_the_exact_running_mean_and_variance_of_log_x():
    xs = np.exp(np.random.default_rng(0).normal(0.5, 0.3, 40))
    bound = RunningQuantile(0.99, CPU, rate=0.01, warmup=1_000)  # no winsorising yet
    feed(bound, xs)
    assert bound.mean.item() == pytest.approx(np.log(xs).mean(), rel=1e-5)
    assert bound.var.item() == pytest.approx(np.log(xs).var(), rel=1e-4)


def test_the_level_is_the_quantile_of_a_lognormal_stream_and_unbounded_before_warmup():
    rng = np.random.default_rng(1)
    bound = RunningQuantile(0.99, CPU, rate=0.01, warmup=50)
    feed(bound, np.exp(rng.normal(0.0, 0.5, 49)))
    assert math.isinf(bound.level().item())
    feed(bound, np.exp(rng.normal(0.0, 0.5, 2_000)))
    true_q = math.exp(2.326 * 0.5)
    assert bound.level().item() == pytest.approx(true_q, rel=0.15)
    fresh = np.exp(rng.normal(0.0, 0.5, 20_000))
    assert 0.002 < (fresh > bound.level().item()).mean() < 0.03


def test_one_outlier_moves_the_level_by_little():
    rng = np.random.default_rng(2)
    bound = RunningQuantile(0.99, CPU)
    feed(bound, np.exp(rng.normal(0.0, 0.5, 1_000)))
    before = bound.level().item()
    bound.observe(torch.tensor(1e9))
    assert before < bound.level().item() < 1.1 * before


def test_the_level_follows_a_drifting_scale():
    rng = np.random.default_rng(3)
    bound = RunningQuantile(0.99, CPU, rate=0.02)
    feed(bound, np.exp(rng.normal(0.0, 0.3, 500)))
    feed(bound, 10 * np.exp(rng.normal(0.0, 0.3, 500)))  # the norms grow tenfold
    assert bound.level().item() == pytest.approx(10 * math.exp(2.326 * 0.3), rel=0.25)


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(4, 3, generator=g)), torch.nn.Parameter(torch.zeros(3))]


def test_the_optimiser_clips_an_outlier_at_the_running_quantile_and_never_above_max_norm():
    params = _params(0)
    bound = RunningQuantile(0.99, CPU, warmup=20)
    opt = ClippedAdam(params, lr=1e-3, max_norm=50.0, adaptive=bound)
    g = torch.Generator().manual_seed(1)
    for _ in range(200):  # gradient norms around 1
        grads = [torch.randn(p.shape, generator=g) / 3 for p in params]
        opt.step(grads=grads)
    level = bound.level().item()
    assert 1.0 < level < 5.0
    big = [torch.full(p.shape, 100.0) for p in params]
    clipped_ref = [g_ * min(1.0, level / (torch.cat([b.reshape(-1) for b in big]).norm() + 1e-6))
                   for g_ in big]
    twin_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
    twin = ClippedAdam(twin_params, lr=1e-3)  # no clip: fed the clipped gradients by hand
    twin.load_state_dict({k: v for k, v in opt.state_dict().items() if k != "adaptive_clip"})
    norm = opt.step(grads=big)
    twin.step(grads=clipped_ref)
    assert norm.item() == pytest.approx(torch.cat([b.reshape(-1) for b in big]).norm().item())
    for a, b in zip(params, twin_params, strict=True):
        torch.testing.assert_close(a, b)


def test_the_clip_state_travels_with_the_optimiser_state():
    params = _params(0)
    opt = ClippedAdam(params, lr=1e-3, adaptive=RunningQuantile(0.99, CPU, warmup=5))
    for _ in range(10):
        opt.step(grads=[torch.ones_like(p) for p in params])
    fresh_bound = RunningQuantile(0.99, CPU, warmup=5)
    fresh = ClippedAdam(_params(0), lr=1e-3, adaptive=fresh_bound)
    fresh.load_state_dict(opt.state_dict())
    assert fresh_bound.n.item() == 10
    assert fresh_bound.level().item() == pytest.approx(opt.adaptive.level().item())


@pytest.mark.parametrize("kwargs", [{"quantile": 0.4}, {"quantile": 1.0}, {"rate": 0.0},
                                    {"warmup": 0}])
def test_bad_settings_are_refused(kwargs):
    args = {"quantile": 0.99, "rate": 0.01, "warmup": 50, **kwargs}
    with pytest.raises(ValueError, match="RunningQuantile"):
        RunningQuantile(args.pop("quantile"), CPU, **args)


def test_a_learner_with_the_self_tuning_clip_reports_its_level_and_restarts_it_every_fold(tmp_path):
    from .test_reference_update import make_learner

    steps = make_learner(tmp_path, {"grad_clip_quantile": 0.99})
    assert steps.learner.optimizer.adaptive is steps.learner.clip_bound
    steps.run_collect(8)
    steps.run_updates(60)
    m = steps.learner.read_metrics().update
    assert 0 < m["grad_clip_level"] <= steps.learner.spec.agent.grad_clip
    assert steps.learner.clip_bound.n.item() == 60
    assert make_learner(tmp_path / "next", {"grad_clip_quantile": 0.99}).learner.clip_bound.n.item() == 0
