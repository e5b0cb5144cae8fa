"""Factorised noisy linear layer: initialisation, in-place noise, eval uses mean weights."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from foxhunt.agents.dqn import NoisyLinear


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
