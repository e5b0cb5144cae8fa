"""Helpers shared by the benchmark scripts: device choice, timing, summary statistics, JSON output.

Every benchmark prints one JSON document on stdout (progress goes to stderr) whose `meta` block
says when and where it ran: UTC date, device, torch/CUDA versions and host facts, so a number
in `docs/benchmarks.md` can always be traced to the machine that produced it.

Timing. On CUDA a step is timed with CUDA events recorded between consecutive steps, so the
host never waits inside the timed block: it synchronises once before (after the warm-up) and
once after. Per-step samples are the gaps between consecutive events, i.e. the steady-state wall
time per step seen by the GPU (GPU busy time, or the host's launch time when the host is the
bottleneck). On the CPU each step is timed with `time.perf_counter`.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _run import NO_CUDA, errors, one_line, run_main  # noqa: F401 (re-exported)

from foxhunt import devices
from foxhunt.errors import ConfigError
from foxhunt.fileio import write_text_atomic

_T0 = time.perf_counter()


def log(message: str) -> None:
    """Progress line on stderr, prefixed with seconds since the script started."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


def resolve_device(name: str) -> torch.device:
    """`foxhunt.devices.resolve_device`, with a usage error as the exit message."""
    try:
        return devices.resolve_device(name)
    except ConfigError as exc:
        raise SystemExit(f"--{exc}") from None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- statistics ------------------------------------------------------------------------------


def summarize_ms(samples_ms: list[float]) -> dict[str, float]:
    """Median, 10th and 90th percentile and mean of per-step times in milliseconds."""
    a = np.asarray(samples_ms, dtype=np.float64)
    p10, median, p90 = np.percentile(a, [10, 50, 90])
    return {
        "median_ms": round(float(median), 4),
        "p10_ms": round(float(p10), 4),
        "p90_ms": round(float(p90), 4),
        "mean_ms": round(float(a.mean()), 4),
    }


@dataclass(frozen=True)
class Timing:
    """Per-step times of one timed block and the block's total wall time; on CUDA also the
    host's time to issue the block (`host_s`, None elsewhere)."""

    samples_ms: list[float]
    total_s: float
    warmup: int
    host_s: float | None = None

    @property
    def iters(self) -> int:
        return len(self.samples_ms)

    @property
    def per_s(self) -> float:
        """Steps per second over the whole block (throughput, not 1 / median)."""
        return self.iters / self.total_s

    def summary(self) -> dict[str, float | int]:
        out = {**summarize_ms(self.samples_ms), "iters": self.iters, "warmup": self.warmup,
               "total_s": round(self.total_s, 4)}
        if self.host_s is not None:
            # Issuing as fast as the device runs (host_ms_per_step close to the mean) means the
            # host, not the device, sets the pace.
            out["host_ms_per_step"] = round(self.host_s / self.iters * 1e3, 4)
        return out


def time_steps(
    step: Callable[[], object], iters: int, warmup: int, device: torch.device
) -> Timing:
    """Run `step` `warmup` times untimed, then `iters` times timed (see the module docstring)."""
    for _ in range(warmup):
        step()
    synchronize(device)
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        events[0].record()
        start = time.perf_counter()
        for i in range(iters):
            step()
            events[i + 1].record()
        host_s = time.perf_counter() - start
        events[-1].synchronize()
        samples = [a.elapsed_time(b) for a, b in itertools.pairwise(events)]
        return Timing(samples, events[0].elapsed_time(events[-1]) / 1e3, warmup, host_s)
    samples = []
    start = time.perf_counter()
    for _ in range(iters):
        t = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t) * 1e3)
    return Timing(samples, time.perf_counter() - start, warmup)


def time_block(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of one call of `fn`, synchronising the device before and after."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


# -- where and when --------------------------------------------------------------------------


TOP_KERNELS = 24


def kernel_profile(fn: Callable[[], object], iters: int, device: torch.device) -> dict[str, Any]:
    """CUDA kernels one call of `fn` runs (also inside CUDA-graph replays), and their summed
    device time, from `torch.profiler` over `iters` calls; {} on the CPU.

    Compare `kernel_ms` with the step's wall time: when the kernels' own time is a small part
    of it, the step is bound by launches (kernel count), not by arithmetic or memory.
    """
    if device.type != "cuda":
        return {}
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset"))]
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name, []).append(e.device_time)
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:TOP_KERNELS]
    return {
        "kernels_per_step": round(len(kernels) / iters, 1),
        "kernel_ms_per_step": round(sum(e.device_time for e in kernels) / iters / 1e3, 4),
        "top_kernels": [{"name": name[:90], "calls_per_step": round(len(t) / iters, 1),
                         "ms_per_step": round(sum(t) / iters / 1e3, 4)} for name, t in top],
    }


def kernel_timeline(fn: Callable[[], object], device: torch.device) -> dict[str, Any]:
    """One call of `fn` as a kernel timeline (also inside a CUDA-graph replay); {} on the CPU.

    Says what bounds a step whose kernels run on several streams: `span_us` is first kernel
    start to last kernel end, `busy_us` the time at least one kernel runs, `idle_us` the rest
    (launch gaps and dependency waits), and `streams` each stream's summed kernel time. The
    kernels are listed in start order with their stream, offset and duration.
    """
    if device.type != "cuda":
        return {}
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize(device)
    events = _chrome_trace(prof)
    return timeline_summary([e for e in events if e.get("cat") in TIMELINE_CATEGORIES])


TIMELINE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
"""Chrome-trace categories a timeline lists: kernels, and the copies and fills beside them (a
graph's memcpy or memset node, which a list of kernels alone shows as an unexplained gap)."""


def timeline_summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """`kernel_timeline`'s figures from chrome-trace events (`name`, `ts` and `dur` in us,
    `args.stream`, `cat` one of TIMELINE_CATEGORIES): busy time is the union of their intervals
    over all streams; `kernels` counts the kernels only, `copies` the memcpy and memset events."""
    events = sorted(events, key=lambda e: e["ts"])
    if not events:
        return {"kernels": 0}
    t0 = events[0]["ts"]
    busy, end = 0.0, t0
    streams: dict[str, float] = {}
    for e in events:
        start, stop = e["ts"], e["ts"] + e["dur"]
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
        stream = str(e.get("args", {}).get("stream", "?"))
        streams[stream] = streams.get(stream, 0.0) + e["dur"]
    span = end - t0
    n_kernels = sum(e.get("cat", "kernel") == "kernel" for e in events)
    return {
        "kernels": n_kernels,
        "copies": len(events) - n_kernels,
        "span_us": round(span, 1),
        "busy_us": round(busy, 1),
        "idle_us": round(span - busy, 1),
        "streams": {k: round(v, 1) for k, v in streams.items()},
        "timeline": [{"name": e["name"][:70], "stream": e.get("args", {}).get("stream"),
                      "start_us": round(e["ts"] - t0, 1), "dur_us": round(e["dur"], 1)}
                     for e in events],
    }


def _chrome_trace(prof: Any) -> list[dict[str, Any]]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text()).get("traceEvents", [])


def range_profile(fn: Callable[[], object], iters: int, device: torch.device,
                  prefix: str = "foxhunt.") -> dict[str, dict[str, float]]:
    """Per call of `fn`, what each profiler range named `prefix...` costs: on CUDA the kernels
    it launched (`kernel_attribution`: count and summed device time), elsewhere its CPU time
    (and autograd's backward nodes'), as {piece: {"kernels": n, "ms": t}} ("kernels", and the
    first call's kernel "names" in launch order, on CUDA only).

    Run `fn` uncaptured (a CUDA-graph replay has no ranges). Pieces on side streams overlap in
    wall time, so the times add up to more than a step takes; they say where the work is."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    fn()
    if cuda:
        torch.cuda.synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(iters):
            fn()
        if cuda:
            torch.cuda.synchronize(device)
    if cuda:
        pieces = kernel_attribution(_chrome_trace(prof), prefix)
        out = {k: {"kernels": round(v["kernels"] / iters, 1),
                   "ms": round(v["kernel_us"] / iters / 1e3, 4),
                   "names": v["names"][: max(1, round(v["kernels"] / iters))]}
               for k, v in pieces.items()}
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["ms"]))
    cpu: dict[str, float] = {}
    for row in prof.key_averages():
        if row.key.startswith(prefix):
            name = row.key[len(prefix):]
        elif row.key.startswith("autograd::engine::evaluate_function: "):
            name = "backward." + row.key.split(": ", 1)[1]
        else:
            continue
        cpu[name] = cpu.get(name, 0.0) + row.cpu_time_total / iters / 1e3
    return {k: {"ms": round(v, 4)} for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])
            if v > 0}


def kernel_attribution(events: list[dict[str, Any]],
                       prefix: str = "foxhunt.") -> dict[str, dict[str, Any]]:
    """Which profiler range launched each kernel of a chrome trace, by launch correlation.

    A kernel (cat "kernel") is matched to its launch call (cat "cuda_runtime" or "cuda_driver",
    same `args.correlation`) and charged to the innermost range named `prefix...` (cat
    "user_annotation") that contains the launch on the launching thread. Launches outside every
    such range are charged to "autograd" when they come from a thread that holds none of those
    ranges (autograd's backward runs on its own threads), else to "other"; kernels with no
    launch in the trace to "unmatched". Returns {piece: {"kernels", "kernel_us", "names"}},
    pieces in the order of their first kernel, names in start order."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in e.get("args", {})}
    ranges = [e for e in events
              if e.get("cat") == "user_annotation" and e.get("name", "").startswith(prefix)]
    range_threads = {r["tid"] for r in ranges}
    out: dict[str, dict[str, Any]] = {}
    for k in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        launch = launches.get(k.get("args", {}).get("correlation"))
        if launch is None:
            piece = "unmatched"
        else:
            inside = [r for r in ranges if r["tid"] == launch["tid"]
                      and r["ts"] <= launch["ts"] <= r["ts"] + r["dur"]]
            if inside:
                piece = min(inside, key=lambda r: r["dur"])["name"][len(prefix):]
            else:
                piece = "other" if launch["tid"] in range_threads else "autograd"
        row = out.setdefault(piece, {"kernels": 0, "kernel_us": 0.0, "names": []})
        row["kernels"] += 1
        row["kernel_us"] += k["dur"]
        row["names"].append(k["name"][:70])
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load_average() -> float | None:
    """1-minute load average: on a shared host, a value above the core count means contention."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"type": device.type}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            name=props.name,
            count=torch.cuda.device_count(),
            memory_gib=round(props.total_memory / 2**30, 1),
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
        )
    else:
        info.update(name=_cpu_model(), threads=torch.get_num_threads())
    return info


def meta(device: torch.device) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": device_info(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "host": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "load_avg_1m": _load_average(),
        },
        "argv": sys.argv[1:],
    }


def document(name: str, device: torch.device, results: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's JSON document: `{"benchmark": name, "meta": ..., **results}`."""
    return {"benchmark": name, "meta": meta(device), **results}


def emit(name: str, device: torch.device, results: dict[str, Any], out: str | None) -> None:
    """Print `document(name, device, results)` on stdout and write it to `out`; then, if a
    measurement failed and was reported in place (an `"error"`), end with one line saying so
    and exit status 1: the document is whole either way."""
    doc = document(name, device, results)
    if out:
        write_json(Path(out), doc)
        log(f"wrote {out}")
    print(json.dumps(doc, indent=2), flush=True)
    failed = list(errors(doc))
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise SystemExit(f"error: {name}: a measurement failed: {failed[0]}{more}")


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write `doc` whole or not at all (a temp file renamed over `path`): a benchmark killed
    mid-write leaves the previous document, never half of one."""
    write_text_atomic(json.dumps(doc, indent=2) + "\n", path)
