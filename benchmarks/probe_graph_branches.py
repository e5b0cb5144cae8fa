"""How a CUDA-graph replay runs two independent chains of small kernels: a probe of the device
and driver, apart from foxhunt's code.

The training update is a graph of ~86 small kernels in two chains (the loss pass and backward on
the main stream; the next batch's staging on a side stream) that join before the optimiser step.
Its kernel timelines show the side chain starting only after most of the main chain, and its
wall time tracks the kernel count more than the work (docs/benchmarks.md). This probe replays
synthetic graphs of the same shape, with kernels of a chosen size, to say which it is:

- `main_only`: the main chain alone (N kernels);
- `side_only`: the side chain alone (M kernels);
- `both`: both chains, the side one captured after the main one's first kernel (as the update
  captures its staging after the loss pass), joined at the end;
- `both_side_first`: the same, the side chain captured before the main one;
- `both_side_high_priority`: `both` with the side stream at high priority;
- `both_x4`: four copies of `both` in one graph (per copy: the cost of a replay's launch).

For each: the replay's median and mean time (CUDA events), the host's time to issue a replay
(`host_ms_per_step`), and from one profiled replay the offset at which each chain's first
kernel starts. If `both` is
close to `main_only` + `side_only`, the chains do not overlap; if the side chain starts late,
the replay issues its kernels in an order that holds it back. Run it with
CUDA_DEVICE_MAX_CONNECTIONS set to compare hardware queue counts. Prints one JSON document.
`--quick`: 30 timed replays a variant; without CUDA it reports every variant skipped (CI runs
it so on the CPU) where a full run stops with one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _common import NO_CUDA, emit, log, run_main, time_steps

ITERS = 300
WARMUP = 20
QUICK_ITERS = 30
QUICK_WARMUP = 5


def chain(x: torch.Tensor, kernels: int) -> None:
    """`kernels` dependent elementwise kernels on x, in place."""
    for _ in range(kernels):
        x.add_(1.0)


def build(variant: str, main_n: int, side_n: int, numel: int,
          device: torch.device) -> tuple[torch.cuda.CUDAGraph, Callable[[], None]]:
    """A captured graph of `variant` over fresh tensors; returns it and its replay."""
    a = torch.zeros(numel, device=device)
    b = torch.zeros(numel, device=device)
    high = variant == "both_side_high_priority"
    side = torch.cuda.Stream(device, priority=-1 if high else 0)
    copies = 4 if variant == "both_x4" else 1

    def body() -> None:
        for _ in range(copies):
            start = torch.cuda.current_stream().record_event()
            if variant == "side_only":
                chain(b, side_n)
                continue
            if variant == "main_only":
                chain(a, main_n)
                continue
            if variant == "both_side_first":
                side.wait_event(start)
                with torch.cuda.stream(side):
                    chain(b, side_n)
                chain(a, main_n)
            else:
                chain(a, 1)
                side.wait_event(start)
                with torch.cuda.stream(side):
                    chain(b, side_n)
                chain(a, main_n - 1)
            torch.cuda.current_stream().wait_stream(side)

    warm = torch.cuda.Stream(device)
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        body()
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph, graph.replay


def first_kernels(replay: Callable[[], None], device: torch.device) -> dict:
    """From one profiled replay: kernel count, span, and each stream's first kernel offset."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        replay()
        torch.cuda.synchronize(device)
    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    if not kernels:
        return {}
    t0 = kernels[0].time_range.start
    first: dict[str, float] = {}
    for e in kernels:
        first.setdefault(str(getattr(e, "device_resource_id", "?")), e.time_range.start - t0)
    return {"kernels": len(kernels),
            "span_us": round(max(e.time_range.end for e in kernels) - t0, 1),
            "first_kernel_us_by_stream": {k: round(v, 1) for k, v in first.items()}}


VARIANTS = ("main_only", "side_only", "both", "both_side_first", "both_side_high_priority",
            "both_x4")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--main", type=int, default=50, help="kernels in the main chain")
    parser.add_argument("--side", type=int, default=35, help="kernels in the side chain")
    parser.add_argument("--numel", type=int, default=262_144,
                        help="elements each kernel touches (the update's are ~10^5-10^6)")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_ITERS} timed replays a variant; without CUDA, every "
                        "variant reported skipped (CI)")
    parser.add_argument("--out", metavar="FILE.json")
    args = parser.parse_args()
    notes = ["each kernel is one in-place add on --numel float32 elements"]
    if not torch.cuda.is_available():
        if not args.quick:
            raise SystemExit("error: probe_graph_branches.py needs a CUDA device")
        skipped = {"skipped": f"{NO_CUDA}: CUDA graphs need a CUDA device"}
        emit("probe_graph_branches", torch.device("cpu"),
             {"quick": True, "config": vars(args), "results": dict.fromkeys(VARIANTS, skipped),
              "notes": notes}, args.out)
        return
    device = torch.device("cuda")
    iters, warmup = (QUICK_ITERS, QUICK_WARMUP) if args.quick else (ITERS, WARMUP)
    results = {}
    for variant in VARIANTS:
        _, replay = build(variant, args.main, args.side, args.numel, device)
        summary = time_steps(replay, iters, warmup, device).summary()
        row = {**summary, **first_kernels(replay, device)}
        if variant == "both_x4":
            row["median_ms_per_copy"] = round(row["median_ms"] / 4, 4)
        results[variant] = row
        log(f"{variant}: median {row['median_ms']} ms, host {row['host_ms_per_step']} ms")
    emit("probe_graph_branches", device,
         {"quick": args.quick, "config": vars(args), "results": results, "notes": notes},
         args.out)


if __name__ == "__main__":
    run_main(main, "probe_graph_branches")
