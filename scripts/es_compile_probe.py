"""Where a `foxhunt train` run's compile time goes, step by step (a device probe, issue 33).

    FOXHUNT_HOME=... TORCHINDUCTOR_CACHE_DIR=<fresh dir> python3 scripts/es_compile_probe.py \
        VARIANT [SYMBOL]

Runs `foxhunt train SYMBOL --folds 3` (default ES, the bundled sample) in this process and times
each compiled step's calls that compiled something (dynamo's frame counter moved), to a device
sync, then prints the per-step seconds and the run's phases. VARIANT: `base` (the settings as
shipped), `nocombo` (inductor without combo kernels), `lean` (collect steps and the validation
rollout uncompiled, as `compile = "updates"` does). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import collections
import json
import sys
import time

sys.path.insert(0, "src")

import torch

from foxhunt.backtest import engine
from foxhunt.cli import main
from foxhunt.training import compiled, evaluate, graphs, hotpath

variant = sys.argv[1]
symbol = sys.argv[2] if len(sys.argv) > 2 else "ES"
seconds: dict[str, float] = collections.defaultdict(float)


def timed_compiles(call, name_of):
    def wrapper(self, *args):
        frames = graphs._compiled_frames()
        start = time.perf_counter()
        out = call(self, *args)
        if graphs._compiled_frames() != frames:
            if not torch.cuda.is_current_stream_capturing():
                torch.cuda.synchronize()
            seconds[name_of(self)] += time.perf_counter() - start
        return out
    return wrapper


graphs.CompiledStep.__call__ = timed_compiles(graphs.CompiledStep.__call__, lambda s: s.name)
backtest_step = engine._compiled_record_step
engine._compiled_record_step = lambda: (lambda *a: timed_compiles(
    lambda _, *b: backtest_step()(*b), lambda _: "backtest")(None, *a))
if variant == "nocombo":
    hotpath.INDUCTOR_OPTIONS.clear()
elif variant == "lean":
    eager = set(compiled.Learner.COLLECT_STEPS) | {"rollout"}

    def step(fn, enabled, name, *args, **kwargs):
        return graphs.CompiledStep(fn, enabled and name not in eager, name, *args, **kwargs)

    compiled.CompiledStep = evaluate.CompiledStep = step

out = f"/tmp/compile_probe_{variant}_{symbol}/run"
start = time.perf_counter()
try:
    main(["train", symbol, "--folds", "3", "--out", out])
except SystemExit:
    pass
print("VARIANT", variant, symbol, f"wall {time.perf_counter() - start:.1f}")
print("per-step compile s:", {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])})
print("sum", round(sum(seconds.values()), 1))
with open(f"{out}/phases.json") as f:
    print(json.load(f))
