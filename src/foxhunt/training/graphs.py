"""Run a step function eagerly, or capture it once as a CUDA graph and replay it; compile a step
with a fall-back to eager; run independent parts of a step side by side on CUDA streams; and
clock the one-off cost of all that (`SETUP`: compiling, warm-up calls, capture), so that a
phase's time splits into that setup and its steady work.

A captured step must read and write only tensors that live as long as the graph (module
parameters, optimiser state, env and replay buffers, accumulators), draw random numbers from the
default CUDA generator, and never synchronise with the host. Each call runs the step exactly
once: the first `warmup` calls run eagerly on a side stream (as `torch.cuda.graphs` requires, so
lazily-created state such as optimiser moments exists before capture); the next call captures
and replays.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


class SetupClock:
    """Seconds spent on one-off work: compiling a step (`CompiledStep`), and the warm-up calls
    and capture of a CUDA graph (`CapturedStep`). Readers take the difference of `seconds`
    around a phase. Timed spans do not nest: time inside an outer span counts once. Host time,
    measured without synchronising the device (a sync would be a host sync in the hot loop):
    compiling and capturing are host work, and the warm-up calls' kernels, which run later,
    are tiny beside them."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    @contextmanager
    def span(self) -> Iterator[None]:
        if self._depth:
            yield
            return
        start = time.perf_counter()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.seconds += time.perf_counter() - start

    def add(self, seconds: float) -> None:
        """A span measured by the caller (ignored inside a timed span, which covers it)."""
        if not self._depth:
            self.seconds += seconds


SETUP = SetupClock()
"""The process's one clock of setup work: compile caches are per process too."""


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
        if self.graph is not None:
            self.graph.replay()
            return
        with SETUP.span():  # warm-up (compiling, if the step is) and capture
            if self._calls < self.warmup:
                self._calls += 1
                self._side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self._side):
                    self.fn()
                torch.cuda.current_stream().wait_stream(self._side)
                return
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.fn()
            self.graph = graph
            graph.replay()


class SideStreams:
    """Independent parts of a step run on side streams beside the current one on CUDA, and
    inline (in program order) elsewhere.

    Most kernels of an update at batch 512 occupy a few of the GPU's SMs, so independent chains
    (the target network's pass beside the online network's, the priority write-back beside the
    backward pass) overlap instead of queueing. Inside a CUDA-graph capture the branches become
    parallel paths of the graph. `branch(k)` starts after everything queued so far on the
    current stream, `branch(k, after=mark)` after an earlier `mark()` of it; `wait(k, j)` orders
    branch k after branch j; `join()` orders the current stream after every branch, `join(k)`
    after branch k only. Tensors passed between streams must stay referenced until the full
    `join()` that follows their last use (the caching allocator could otherwise hand their
    memory to another stream early); locals of the step function are.
    """

    def __init__(self, device: torch.device, n: int, enabled: bool = True):
        on = enabled and device.type == "cuda"
        self.streams = [torch.cuda.Stream(device) for _ in range(n)] if on else []
        # Branches entered since the last full join. Only those may be joined: inside a graph
        # capture, waiting on a stream that took no part in it is an error.
        self._open: set[int] = set()

    def mark(self) -> torch.cuda.Event | None:
        """A point on the current stream that a later `branch(k, after=...)` can start from."""
        if not self.streams:
            return None
        return torch.cuda.current_stream().record_event()

    @contextmanager
    def branch(self, k: int, after: torch.cuda.Event | None = None) -> Iterator[None]:
        """Run the block on branch k, after everything queued so far on the current stream, or
        only after the `mark()` given as `after`."""
        if not self.streams:
            yield
            return
        stream = self.streams[k]
        if after is None:
            stream.wait_stream(torch.cuda.current_stream())
        else:
            stream.wait_event(after)
        self._open.add(k)
        with torch.cuda.stream(stream):
            yield

    def wait(self, k: int, j: int) -> None:
        if self.streams:
            if j not in self._open:
                raise RuntimeError(f"SideStreams.wait({k}, {j}): branch {j} was not entered")
            self.streams[k].wait_stream(self.streams[j])

    def join(self, *branches: int) -> None:
        """Order the current stream after the given branches (all entered ones when none are
        given; that full join closes them)."""
        if not self.streams:
            return
        main = torch.cuda.current_stream()
        for k in branches or sorted(self._open):
            if k in self._open:
                main.wait_stream(self.streams[k])
        if not branches:
            self._open.clear()


RECOMPILE_LIMIT = 1024
"""Compilations torch keeps per compiled step function (its default is 8). Every fold builds a
new learner: its optimiser step is traced again (dynamo guards the optimiser object), and with
anchored folds, whose training windows grow, every step compiles again; once a function
reaches the limit torch runs it uncompiled for good, with only a log warning, and a
walk-forward run of more than a few folds would have trained its later folds about ten times
slower."""


class CompiledStep:
    """`fn` through `torch.compile` when `enabled`, falling back to `fn` itself, with one
    warning, if compiling fails (e.g. no Triton for this GPU). Compilation happens on the first
    call, before any kernel of the step runs, so a failed attempt changes no state.
    `options` go to the compiler as inductor options;
    `compiler` is `torch.compile` unless a test substitutes one. Each call is a profiler range
    named `foxhunt.<name>`, so a profile attributes kernels to the step that launched them."""

    def __init__(self, fn: Callable[..., Any], enabled: bool, name: str,
                 compiler: Callable[..., Callable[..., Any]] | None = None,
                 options: dict[str, Any] | None = None):
        self.fn, self.name = fn, name
        self.compiled = enabled
        self._call = fn
        if enabled:
            extra = {"options": dict(options)} if options else {}
            self._call = (compiler or torch.compile)(fn, dynamic=False, **extra)
        self._first = enabled

    def __call__(self, *args: Any) -> Any:
        if not self.compiled:
            with torch.profiler.record_function(f"foxhunt.{self.name}"):
                return self._run(*args)
        frames = _compiled_frames()
        start = time.perf_counter()
        with torch.profiler.record_function(f"foxhunt.{self.name}"), _recompile_limit():
            out = self._run(*args)
        if _compiled_frames() != frames:  # this call compiled (or recompiled) something
            SETUP.add(time.perf_counter() - start)
        return out

    def _run(self, *args: Any) -> Any:
        if not self._first:
            return self._call(*args)
        self._first = False
        try:
            return self._call(*args)
        except Exception as exc:  # noqa: BLE001 - any compiler failure falls back to eager
            first = str(exc).splitlines()[0] if str(exc) else ""
            warnings.warn(f"torch.compile of the {self.name} step failed ({type(exc).__name__}: "
                          f"{first}); running it uncompiled", RuntimeWarning, stacklevel=2)
            self._call, self.compiled = self.fn, False
            return self.fn(*args)


def _compiled_frames() -> int:
    """Frames dynamo has compiled in this process (its counter moves only when one compiles)."""
    return torch._dynamo.utils.counters["frames"]["total"]


@contextmanager
def _recompile_limit() -> Iterator[None]:
    """torch's per-function compilation limits raised to `RECOMPILE_LIMIT` for this call only,
    for a step that `torch.compile` wrapped (so dynamo is loaded). Set and restored directly:
    `torch._dynamo.config.patch`, or importing the config module here, costs ~150-400 us a
    call."""
    dynamo_config = torch._dynamo.config
    names = [k for k in ("recompile_limit", "accumulated_recompile_limit")
             if hasattr(dynamo_config, k)]
    saved = {k: getattr(dynamo_config, k) for k in names}
    for k in names:
        setattr(dynamo_config, k, RECOMPILE_LIMIT)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(dynamo_config, k, v)
