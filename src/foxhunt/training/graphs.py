"""Run a step function eagerly, or capture it once as a CUDA graph and replay it.

A captured step must read and write only tensors that live as long as the graph (module
parameters, optimiser state, env and replay buffers, accumulators), draw random numbers from the
default CUDA generator, and never synchronise with the host. Each call runs the step exactly
once: the first `warmup` calls run eagerly on a side stream (as `torch.cuda.graphs` requires, so
lazily-created state such as optimiser moments exists before capture); the next call captures
and replays.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class CapturedStep:
    def __init__(self, fn: Callable[[], None], enabled: bool, warmup: int = 3):
        self.fn, self.enabled, self.warmup = fn, enabled, warmup
        self.graph: torch.cuda.CUDAGraph | None = None
        self._calls = 0
        self._side = torch.cuda.Stream() if enabled else None

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def __call__(self) -> None:
        if not self.enabled:
            self.fn()
            return
        if self._calls < self.warmup:
            self._calls += 1
            self._side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._side):
                self.fn()
            torch.cuda.current_stream().wait_stream(self._side)
            return
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.fn()
        self.graph.replay()
