"""ClippedAdam is torch's clip_grad_norm_ followed by torch's Adam, in one pass."""

import pytest
import torch

from foxhunt.training.optim import ClippedAdam


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    shapes = ((7, 5), (5,), (3, 2, 4))
    return [torch.nn.Parameter(torch.randn(shape, generator=g)) for shape in shapes]


def _set_grads(params, step: int, scale: float) -> None:
    g = torch.Generator().manual_seed(100 + step)
    for p in params:
        p.grad = scale * torch.randn(p.shape, generator=g)


@pytest.mark.parametrize("scale", [0.01, 50.0], ids=["below_the_clip", "clipped"])
def test_matches_clip_grad_norm_then_adam_over_many_steps(scale):
    ours, ref = _params(0), _params(0)
    opt = ClippedAdam(ours, lr=1e-2, betas=(0.9, 0.99), eps=1e-6, max_norm=1.0)
    ref_opt = torch.optim.Adam(ref, lr=1e-2, betas=(0.9, 0.99), eps=1e-6)
    for step in range(20):
        _set_grads(ours, step, scale)
        _set_grads(ref, step, scale)
        norm = opt.step()
        ref_norm = torch.nn.utils.clip_grad_norm_(ref, 1.0)
        ref_opt.step()
        torch.testing.assert_close(norm, ref_norm)
        for p, q in zip(ours, ref, strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert (norm > 1.0) == (scale > 1.0)  # the gradients' norm is about 8.4 scale


def test_weight_decay_is_adamw_decoupled_from_the_moments():
    ours, ref = _params(1), _params(1)
    opt = ClippedAdam(ours, lr=1e-2, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.5)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.5)
    for step in range(20):
        _set_grads(ours, step, 0.1)
        _set_grads(ref, step, 0.1)
        opt.step()
        ref_opt.step()
    for p, q, start in zip(ours, ref, _params(1), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        assert not torch.allclose(p, start)


def test_leaves_the_gradients_unscaled():
    params = _params(1)
    _set_grads(params, 0, 50.0)
    before = [p.grad.clone() for p in params]
    ClippedAdam(params, lr=1e-3, max_norm=1.0).step()
    for p, g in zip(params, before, strict=True):
        assert torch.equal(p.grad, g)


def test_state_dicts_load_both_ways_with_torch_adam():
    ours, ref = _params(2), _params(2)
    opt, ref_opt = ClippedAdam(ours, lr=1e-2), torch.optim.Adam(ref, lr=1e-2)
    for step in range(3):
        _set_grads(ours, step, 1.0)
        _set_grads(ref, step, 1.0)
        opt.step()
        ref_opt.step()
    fresh = ClippedAdam(_params(2), lr=1e-2, max_norm=0.5)
    saved = ref_opt.state_dict()
    for st in saved["state"].values():
        st["step"] = st["step"].double()  # as an older checkpoint may hold it
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["max_norm"] == 0.5  # torch's Adam has none: ours is kept
    for p, q in zip(fresh.param_groups[0]["params"], ref, strict=True):
        step = fresh.state[p]["step"]
        assert float(step) == 3.0 and step.dtype == torch.float32 and step.device == p.device
        torch.testing.assert_close(fresh.state[p]["exp_avg_sq"], ref_opt.state[q]["exp_avg_sq"])
    _set_grads(fresh.param_groups[0]["params"], 3, 1.0)
    fresh.step()
    torch.optim.Adam(_params(2), lr=1e-2).load_state_dict(opt.state_dict())


def test_state_exists_before_the_first_step():
    params = _params(3)
    opt = ClippedAdam(params, lr=1e-3)
    assert all(set(opt.state[p]) == {"step", "exp_avg", "exp_avg_sq"} for p in params)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": 0.0}, "lr"),
        ({"lr": 1e-3, "max_norm": -1.0}, "max_norm"),
        ({"lr": 1e-3, "betas": (0.9, 1.0)}, "betas"),
        ({"lr": 1e-3, "weight_decay": -0.1}, "weight_decay"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ClippedAdam(_params(4), **kwargs)


def test_a_step_without_every_gradient_is_an_error():
    params = _params(5)
    with pytest.raises(RuntimeError, match=r"parameters \[0, 1, 2\] have no gradient"):
        ClippedAdam(params, lr=1e-3).step()
    _set_grads(params[1:], 0, 1.0)
    with pytest.raises(RuntimeError, match=r"parameters \[0\]"):
        ClippedAdam(params, lr=1e-3).step()


def test_explicit_gradients_step_as_the_parameters_own_would():
    """`step(grads=...)`: gradients handed in parameter order (derived elsewhere, e.g. from a
    noisy layer's working weights) give the step `.grad` would have given."""
    ours, ref = _params(0), _params(0)
    opt = ClippedAdam(ours, lr=1e-2, max_norm=1.0)
    ref_opt = ClippedAdam(ref, lr=1e-2, max_norm=1.0)
    for step in range(3):
        _set_grads(ref, step, 5.0)
        grads = [p.grad.clone() for p in ref]
        torch.testing.assert_close(opt.step(grads=grads), ref_opt.step(), rtol=0, atol=0)
    for a, b in zip(ours, ref, strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="2 gradients for 3 parameters"):
        opt.step(grads=grads[:2])
    with pytest.raises(RuntimeError, match=r"parameters \[1\] have no gradient"):
        opt.step(grads=[grads[0], None, grads[2]])


def test_one_step_count_serves_every_parameter_and_saves_as_one_each():
    params = _params(6)
    opt = ClippedAdam(params, lr=1e-3)
    for step in range(2):
        _set_grads(params, step, 1.0)
        opt.step()
    assert len({id(opt.state[p]["step"]) for p in params}) == 1
    saved = opt.state_dict()["state"]
    assert [float(s["step"]) for s in saved.values()] == [2.0] * len(params)
    assert len({id(s["step"]) for s in saved.values()}) == len(params)
    saved[0]["step"] += 5  # a copy: the optimiser's count does not move
    assert float(opt.state[params[0]]["step"]) == 2.0


def test_loading_keeps_the_state_tensors_a_captured_step_reads():
    params = _params(7)
    opt = ClippedAdam(params, lr=1e-3)
    before = {k: [opt.state[p][k] for p in params] for k in ("step", "exp_avg", "exp_avg_sq")}
    donor = ClippedAdam(_params(7), lr=1e-3)
    for step in range(3):
        _set_grads(donor.param_groups[0]["params"], step, 1.0)
        donor.step()
    opt.load_state_dict(donor.state_dict())
    for key, tensors in before.items():
        assert all(opt.state[p][key] is t for p, t in zip(params, tensors, strict=True))
    for p, q in zip(params, donor.param_groups[0]["params"], strict=True):
        assert torch.equal(opt.state[p]["exp_avg"], donor.state[q]["exp_avg"])
    assert float(opt.state[params[0]]["step"]) == 3.0
    opt.load_state_dict(ClippedAdam(_params(7), lr=1e-3).state_dict())
    assert float(opt.state[params[0]]["step"]) == 0.0
    opt.load_state_dict(torch.optim.Adam(_params(7), lr=1e-3).state_dict())  # no state at all
    assert not any(opt.state[p]["exp_avg"].any() for p in params)


def test_loading_rejects_step_counts_that_differ_between_parameters():
    params = _params(8)
    saved = ClippedAdam(params, lr=1e-3).state_dict()
    saved["state"][1]["step"] = torch.tensor(4.0)
    with pytest.raises(ValueError, match=r"step counts differ between parameters \(\[0.0, 4.0\]\)"):
        ClippedAdam(_params(8), lr=1e-3).load_state_dict(saved)


def test_parameters_on_two_devices_are_an_error():
    params = _params(9)
    params[1] = torch.nn.Parameter(params[1].detach().to("meta"))
    with pytest.raises(ValueError, match="parameters on one device"):
        ClippedAdam(params, lr=1e-3)
