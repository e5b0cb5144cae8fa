"""Compiled steps fall back to eager, once and loudly, when the compiler fails; each call is a
profiler range."""

from __future__ import annotations

import pytest

from foxhunt.training.graphs import CompiledStep


def failing_compiler(fn, dynamic):
    def compiled(*args):
        raise RuntimeError("triton: no kernel for this GPU\nlong traceback")

    return compiled


def test_a_failed_compile_warns_once_and_runs_the_step_eagerly():
    calls = []
    step = CompiledStep(lambda x: calls.append(x) or x * 2, True, "collect",
                        compiler=failing_compiler)
    with pytest.warns(RuntimeWarning, match=r"torch.compile of the collect step failed "
                                            r"\(RuntimeError: triton: no kernel for this GPU\)"):
        assert step(3) == 6
    assert not step.compiled
    assert step(4) == 8 and calls == [3, 4]


def test_a_working_compile_is_used_and_disabled_means_plain():
    compiled_calls = []

    def compiler(fn, dynamic):
        assert dynamic is False
        return lambda *a: compiled_calls.append(a) or fn(*a)

    step = CompiledStep(lambda x: x + 1, True, "loss", compiler=compiler)
    assert step(1) == 2 and step(2) == 3 and step.compiled and len(compiled_calls) == 2
    plain = CompiledStep(lambda x: x + 1, False, "loss", compiler=failing_compiler)
    assert plain(1) == 2 and not plain.compiled


def test_inductor_options_reach_the_compiler():
    seen = {}

    def compiler(fn, dynamic, options=None):
        seen.update(options or {})
        return fn

    step = CompiledStep(lambda: 1, True, "loss", compiler=compiler,
                        options={"combo_kernels": True})
    assert step() == 1 and seen == {"combo_kernels": True}


def test_each_call_is_a_profiler_range_named_after_the_step():
    import torch
    from torch.profiler import ProfilerActivity, profile

    step = CompiledStep(lambda x: x @ x, False, "online_forward")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(torch.ones(4, 4))
        step(torch.ones(4, 4))
    ranges = {row.key: row.count for row in prof.key_averages()}
    assert ranges.get("foxhunt.online_forward") == 2


def test_every_folds_step_compiles_however_many_folds_a_run_has():
    """Each fold's learner compiles its steps again (its market tensors have the fold's
    length); torch's default limit of 8 compilations per function would leave folds 9 onwards
    running uncompiled."""
    import torch

    compiles = []

    def counting_backend(gm, example_inputs):
        compiles.append(len(example_inputs))
        return gm.forward

    def compiler(fn, dynamic):
        return torch.compile(fn, backend=counting_backend, dynamic=dynamic)

    class Fold:
        def __init__(self, bars: int):
            self.prices = torch.zeros(bars)
            self.step = CompiledStep(self._step, True, "collect", compiler=compiler)

        def _step(self, x):
            self.prices.add_(x)
            return self.prices.sum()

    for fold in range(12):
        bars = 100 + fold
        assert Fold(bars).step(torch.ones(bars)).item() == bars
    assert len(compiles) == 12
