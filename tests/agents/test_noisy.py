"""Factorised noisy linear layers: initialisation, in-place noise, eval uses mean weights, grouped
layers equal separate ones, one draw refills a whole network."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.agents.dqn.noisy import GroupedLinear, NoisyLinear, draw_noise, scaled_noise
from foxhunt.agents.dqn.working import PerGroupLinear, WorkingLinear, pad_to_align


def test_initialisation_follows_the_paper():
    torch.manual_seed(0)
    layer = NoisyLinear(64, 8, sigma0=0.5)
    bound = 1 / math.sqrt(64)
    assert layer.weight_mu.abs().max() <= bound and layer.bias_mu.abs().max() <= bound
    torch.testing.assert_close(layer.weight_sigma, torch.full((8, 64), 0.5 / 8))
    torch.testing.assert_close(layer.bias_sigma, torch.full((8,), 0.5 / 8))


def test_reset_noise_refills_the_same_buffers_with_new_values():
    layer = NoisyLinear(16, 4)
    ptr_in, ptr_out = layer.eps_in.data_ptr(), layer.eps_out.data_ptr()
    before = layer.eps_in.clone(), layer.eps_out.clone()
    layer.reset_noise()
    assert layer.eps_in.data_ptr() == ptr_in and layer.eps_out.data_ptr() == ptr_out
    assert not torch.equal(before[0], layer.eps_in) and not torch.equal(before[1], layer.eps_out)


def test_noise_is_sign_sqrt_of_a_standard_normal_and_seedable():
    layer = NoisyLinear(4, 3)
    layer.reset_noise(torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)
    x_in, x_out = torch.randn(4, generator=g), torch.randn(3, generator=g)
    torch.testing.assert_close(layer.eps_in, x_in.sign() * x_in.abs().sqrt())
    torch.testing.assert_close(layer.eps_out, x_out.sign() * x_out.abs().sqrt())


def test_train_output_changes_with_noise_eval_output_is_the_mean_layer():
    torch.manual_seed(1)
    layer = NoisyLinear(16, 4)
    x = torch.randn(5, 16)
    y1 = layer(x)
    layer.reset_noise()
    y2 = layer(x)
    assert not torch.allclose(y1, y2)

    layer.eval()
    e1 = layer(x)
    layer.reset_noise()
    e2 = layer(x)
    torch.testing.assert_close(e1, e2, rtol=0, atol=0)
    torch.testing.assert_close(e1, F.linear(x, layer.weight_mu, layer.bias_mu))
    assert not torch.allclose(e1, y2)


def test_noise_is_not_saved_but_parameters_are():
    keys = set(NoisyLinear(3, 2).state_dict())
    assert keys == {"weight_mu", "weight_sigma", "bias_mu", "bias_sigma"}


def test_gradients_reach_sigma():
    layer = NoisyLinear(6, 3)
    layer(torch.randn(4, 6)).sum().backward()
    assert layer.weight_sigma.grad.abs().sum() > 0 and layer.bias_sigma.grad.abs().sum() > 0


def _per_group_reference(layer: GroupedLinear, x: torch.Tensor) -> torch.Tensor:
    """The same computation as `groups` separate layers, one F.linear each."""
    outs = []
    for g in range(layer.groups):
        w, b = layer.weight_mu[g], layer.bias_mu[g]
        if layer.noisy and layer.training:
            w = w + layer.weight_sigma[g] * torch.outer(layer.eps_out[g], layer.eps_in[g])
            b = b + layer.bias_sigma[g] * layer.eps_out[g]
        xg = x if layer.shared_input else x[..., g, :]
        outs.append(F.linear(xg, w, b))
    return torch.stack(outs, dim=-2)


@pytest.mark.parametrize("shared_input", [True, False])
@pytest.mark.parametrize("noisy", [True, False])
@pytest.mark.parametrize("lead", [(5,), (4, 3)])
def test_grouped_linear_equals_separate_layers(shared_input, noisy, lead):
    torch.manual_seed(2)
    layer = GroupedLinear(3, 8, 6, shared_input=shared_input, noisy=noisy)
    if noisy:
        draw_noise(list(layer.noise_buffers()), None)
    x = torch.randn(*lead, 8) if shared_input else torch.randn(*lead, 3, 8)
    y = layer(x)
    assert y.shape == (*lead, 3, 6)
    torch.testing.assert_close(y, _per_group_reference(layer, x))
    layer.eval()
    torch.testing.assert_close(layer(x), _per_group_reference(layer, x))


@pytest.mark.parametrize(("groups", "out"), [(3, 6), (4, 256)], ids=["narrow", "wide"])
@pytest.mark.parametrize("grad", [True, False])
def test_an_extra_layer_in_the_groups_matmul_equals_both_layers_run_apart(grad, groups, out):
    """Wide: 4 x 256 + 2 outputs, padded to 1088 columns (`pad_to_align`) and sliced back."""
    torch.manual_seed(4)
    layer = GroupedLinear(groups, 8, out, shared_input=True, noisy=True)
    draw_noise(list(layer.noise_buffers()), None)
    extra = WorkingLinear(8, 2)
    x = torch.randn(5, 8, requires_grad=grad)
    with torch.set_grad_enabled(grad):
        y, side = layer.forward_with(x, extra, relu=True)
    torch.testing.assert_close(y, F.relu(_per_group_reference(layer, x)))
    torch.testing.assert_close(side, extra(x))  # no ReLU on the extra layer's outputs
    if grad:
        (y.sum() + (side * side).sum()).backward()
        fused = [t.grad.clone() for t in (x, layer.weight_mu, layer.weight_sigma, extra.weight)]
        for t in (x, layer.weight_mu, layer.weight_sigma, extra.weight):
            t.grad = None
        (layer(x, relu=True).sum() + (extra(x) ** 2).sum()).backward()
        apart = [x.grad, layer.weight_mu.grad, layer.weight_sigma.grad, extra.weight.grad]
        for a, b in zip(fused, apart, strict=True):
            torch.testing.assert_close(a, b)


def test_matmul_outputs_are_padded_to_16_bytes_or_if_wide_to_128():
    assert [pad_to_align(w) for w in (8, 10, 1022, 1024, 1026, 2050, 2112)] == [0, 6, 2, 0, 62,
                                                                                 62, 0]


def test_an_extra_layer_needs_a_shared_input():
    layer = GroupedLinear(3, 8, 6, shared_input=False, noisy=False)
    with pytest.raises(ValueError, match="shared input"):
        layer.forward_with(torch.randn(5, 3, 8), WorkingLinear(8, 2))


def test_each_group_has_its_own_noise_and_eval_ignores_it():
    layer = GroupedLinear(2, 4, 3, shared_input=True, noisy=True)
    draw_noise(list(layer.noise_buffers()), None)
    assert not torch.equal(layer.eps_in[0], layer.eps_in[1])
    assert not torch.equal(layer.eps_out[0], layer.eps_out[1])
    x = torch.randn(5, 4)
    layer.eval()
    torch.testing.assert_close(layer(x), F.linear(x, layer.weight_mu.reshape(6, 4),
                                                  layer.bias_mu.reshape(6)).view(5, 2, 3))


def test_draw_noise_fills_every_buffer_in_order_from_one_draw():
    buffers = [torch.zeros(3), torch.zeros(2, 4), torch.zeros(5)]
    draw_noise(buffers, torch.Generator().manual_seed(11))
    x = torch.randn(16, generator=torch.Generator().manual_seed(11))
    expected = x.sign() * x.abs().sqrt()
    torch.testing.assert_close(torch.cat([b.flatten() for b in buffers]), expected)


def test_network_reset_noise_changes_every_noisy_buffer_in_one_draw():
    torch.manual_seed(0)
    net = BranchingQNetwork(12, AgentConfig(hidden=16, noisy_trunk=True))
    buffers = net.noise_buffers()
    assert len(buffers) == 2 * (2 + 3)  # trunk: 2 NoisyLinear; heads: hidden, advantage, value
    before = [b.clone() for b in buffers]
    net.reset_noise(torch.Generator().manual_seed(5))
    assert all(not torch.equal(a, b) for a, b in zip(before, net.noise_buffers(), strict=True))
    one_draw = scaled_noise(sum(b.numel() for b in buffers), buffers[0],
                            torch.Generator().manual_seed(5))
    torch.testing.assert_close(torch.cat([b.flatten() for b in net.noise_buffers()]), one_draw)


# -- working weights -------------------------------------------------------------------------

LAYERS = {
    "noisy_linear": lambda: NoisyLinear(8, 6),
    "grouped_shared": lambda: GroupedLinear(3, 8, 6, shared_input=True, noisy=True),
    "grouped_per_group": lambda: GroupedLinear(3, 8, 6, shared_input=False, noisy=True),
    "plain_linear": lambda: WorkingLinear(8, 6),
}


def _input(layer: torch.nn.Module) -> torch.Tensor:
    shape = (5, 3, 8) if getattr(layer, "shared_input", True) is False else (5, 8)
    return torch.randn(*shape, generator=torch.Generator().manual_seed(3))


def _noise(layer: torch.nn.Module, seed: int) -> None:
    if hasattr(layer, "noise_buffers"):
        draw_noise(list(layer.noise_buffers()), torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind", LAYERS)
def test_working_weights_give_the_inline_composed_output_and_master_gradients(kind):
    """float32 working copies: the same forward pass and, through `master_grads`, the same
    gradients as computing with the parameters (mu + sigma * eps composed inside the pass for
    a noisy layer), bit for bit."""
    torch.manual_seed(5)
    inline = LAYERS[kind]()
    _noise(inline, 1)
    working = LAYERS[kind]()
    working.load_state_dict(inline.state_dict())
    _noise(working, 1)
    working.enable_working(torch.float32)
    x = _input(inline)
    (inline(x) ** 2).sum().backward()
    (working(x) ** 2).sum().backward()
    names = {id(p): n for n, p in working.named_parameters()}
    params = [names[id(p)] for p in working.master_params()]
    assert sorted(params) == sorted(names.values())
    assert all(getattr(working, p).grad is None for p in params)  # they land on the copies
    for name, grad in zip(params, working.master_grads(), strict=True):
        assert torch.equal(grad, getattr(inline, name).grad), name


def test_working_weights_keep_zero_padding_rows_and_eval_ignores_them():
    layer = GroupedLinear(2, 4, 3, shared_input=True, noisy=True)  # 3 outputs -> 8 rows
    _noise(layer, 2)
    layer.enable_working(torch.float32)
    assert layer.weight_work.shape == (2, 8, 4) and layer.bias_work.shape == (2, 8)
    assert not layer.weight_work[:, 3:].any() and not layer.bias_work[:, 3:].any()
    layer.weight_work.data.fill_(7.0)  # a stale copy: eval reads the mean weights only
    layer.eval()
    x = torch.randn(5, 4)
    torch.testing.assert_close(layer(x), F.linear(x, layer.weight_mu.reshape(6, 4),
                                                  layer.bias_mu.reshape(6)).view(5, 2, 3))


def test_working_weights_hold_the_composed_weights_in_the_compute_dtype_until_recomposed():
    torch.manual_seed(6)
    layer = NoisyLinear(8, 6)
    layer.enable_working(torch.bfloat16)
    composed = layer.weight_mu + layer.weight_sigma * torch.outer(layer.eps_out, layer.eps_in)
    assert layer.weight_work.dtype == torch.bfloat16 and layer.weight_work.requires_grad
    assert torch.equal(layer.weight_work, composed.to(torch.bfloat16))
    with torch.no_grad():
        layer.weight_mu.add_(1.0)
    assert torch.equal(layer.weight_work, composed.to(torch.bfloat16))  # not recomposed yet
    layer.reset_noise()  # a layer's own reset recomposes
    fresh = layer.weight_mu + layer.weight_sigma * torch.outer(layer.eps_out, layer.eps_in)
    assert torch.equal(layer.weight_work, fresh.to(torch.bfloat16))


def test_a_network_with_working_weights_computes_and_differentiates_as_one_without():
    """`BranchingQNetwork.gradients()` in `parameters()` order equals autograd's gradients of the
    same network composing its noise inline; `zero_grad` clears the working copies' too."""
    config = AgentConfig(hidden=16, atoms=11, noisy_trunk=True)
    torch.manual_seed(7)
    inline = BranchingQNetwork(12, config)
    working = BranchingQNetwork(12, config)
    working.load_state_dict(inline.state_dict())
    torch._foreach_copy_(working.noise_buffers(), inline.noise_buffers())
    working.use_working_weights(torch.float32)
    obs = torch.randn(9, 12)
    for net in (inline, working):
        out = net(obs)
        (out.log_probs.exp()[..., 0].sum() + out.aux_logits.sum()).backward()
    expected = [p.grad for p in inline.parameters()]
    assert all(g is not None for g in expected)
    for (name, _), a, b in zip(inline.named_parameters(), expected, working.gradients(),
                               strict=True):
        assert torch.equal(a, b), name
    working.zero_grad()
    assert all(g is None for g in working.gradients())
    working.reset_noise()  # the network's reset recomposes every working copy
    inline.load_state_dict(working.state_dict())
    torch._foreach_copy_(inline.noise_buffers(), working.noise_buffers())
    assert torch.equal(working(obs).log_probs, inline(obs).log_probs)


def test_every_working_copy_receives_its_gradient_in_its_own_layout():
    """Backward hands each working copy a gradient laid out as the copy is, so autograd keeps it
    as it comes (a gradient in another layout is copied into the leaf's, a kernel per update).
    The advantage layers multiply by W^T, so their backward is `PerGroupLinear`'s."""
    net = BranchingQNetwork(40, AgentConfig(hidden=32, atoms=11, noisy_trunk=True))
    net.use_working_weights(torch.float32)
    arrived = {}
    for i, layer in enumerate(net.working_layers()):
        for name in ("weight_work", "bias_work"):
            work = getattr(layer, name)
            work.register_hook(lambda g, key=(i, name), w=work: arrived.__setitem__(
                key, (g.stride(), w.stride())))
    out = net(torch.randn(6, 40))
    (out.log_probs.exp()[..., 0].sum() + out.aux_logits.sum()).backward()
    assert len(arrived) == 2 * len(net.working_layers())
    assert {key: g for key, (g, w) in arrived.items() if g != w} == {}


def test_per_group_linear_is_a_batched_x_w_transpose_with_its_exact_gradients():
    torch.manual_seed(0)
    x = torch.randn(5, 3, 4, dtype=torch.float64).transpose(0, 1).requires_grad_()  # [g, N, in]
    weight = torch.randn(3, 2, 4, dtype=torch.float64, requires_grad=True)  # [g, out, in]
    torch.testing.assert_close(PerGroupLinear.apply(x, weight),
                               torch.einsum("gni,goi->gno", x, weight), rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(PerGroupLinear.apply, (x, weight))
    PerGroupLinear.apply(x.detach(), weight).sum().backward()
    assert weight.grad.is_contiguous()


def test_per_group_linear_under_autocast_computes_and_differentiates_as_bmm_would():
    """Autocast casts a plain `bmm`'s operands to bf16 and its backward casts the gradients back
    to each operand's dtype; a float32 weight works the same through `PerGroupLinear`."""
    torch.manual_seed(0)
    x = torch.randn(3, 5, 4, requires_grad=True)
    weight = torch.randn(3, 2, 4, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = PerGroupLinear.apply(x, weight)
        expected = torch.bmm(x, weight.transpose(1, 2))
    assert y.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(y, expected, rtol=0, atol=0)
    dx, dw = torch.autograd.grad(y.float().square().sum(), (x, weight))
    ex, ew = torch.autograd.grad(expected.float().square().sum(), (x, weight))
    assert dx.dtype == dw.dtype == torch.float32
    torch.testing.assert_close((dx, dw), (ex, ew), rtol=0, atol=0)


def test_moving_a_layer_keeps_its_working_weights_leaves_that_take_gradients():
    layer = GroupedLinear(2, 4, 3, shared_input=True, noisy=True)
    layer.enable_working(torch.float32)
    layer.double()
    work = layer.weight_work
    assert work.dtype == torch.float64 and work.is_leaf and work.requires_grad
    layer(torch.randn(5, 4, dtype=torch.float64)).sum().backward()
    assert layer.weight_work.grad is not None and layer.bias_work.grad is not None
    assert all(g is not None for g in layer.master_grads())


def test_noise_drawn_ahead_waits_until_taken_and_is_the_draw_reset_would_make():
    net = BranchingQNetwork(12, AgentConfig(hidden=16, noisy_trunk=True))
    before = [b.clone() for b in net.noise_buffers()]
    net.draw_noise_ahead(torch.Generator().manual_seed(9))
    assert all(torch.equal(a, b) for a, b in zip(before, net.noise_buffers(), strict=True))
    net.take_noise_ahead()
    taken = [b.clone() for b in net.noise_buffers()]
    net.draw_noise(torch.Generator().manual_seed(9))
    assert all(torch.equal(a, b) for a, b in zip(taken, net.noise_buffers(), strict=True))
    assert not any(torch.equal(a, b) for a, b in zip(before, taken, strict=True))
