"""How inductor compiles the gradients' total norm of `ClippedAdam`: a probe of three ways to
write it, on the bench's full-size network (its gradients as the optimiser step derives them
from the working weights' after one bf16 update).

- `cat`: the L2 norm of all gradients laid end to end (`torch.cat`, then one norm): inductor
  writes the concatenation (3.5M float32) to memory before reducing it;
- `foreach`: one norm per gradient (`torch._foreach_norm`), then the norm of those;
- `squares`: each gradient's sum of squares, summed, then the square root.

For each, compiled (`combo_kernels`, as the trainer compiles) and replayed as a CUDA graph: the
replay's median time, its kernels, and the norm it computes (to check the forms agree).
Prints one JSON document. `--quick`: bench_train's quick network and 30 timed replays; without
CUDA (CI runs it so on the CPU) each form runs eagerly on the CPU, its compiled CUDA-graph
replay skipped, where a full run stops with one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _common import NO_CUDA, emit, kernel_profile, log, run_main, time_steps
from bench_train import SIZES, Mode, build_market, new_learner, training_spec
from torch import Tensor

from foxhunt.training.graphs import CapturedStep

ITERS = 300
WARMUP = 20
QUICK_ITERS = 30
QUICK_WARMUP = 3


def norm_cat(grads: list[Tensor]) -> Tensor:
    return torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))


def norm_foreach(grads: list[Tensor]) -> Tensor:
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))


def norm_squares(grads: list[Tensor]) -> Tensor:
    return torch.stack([g.square().sum() for g in grads]).sum().sqrt()


FORMS: dict[str, Callable[[list[Tensor]], Tensor]] = {
    "cat": norm_cat, "foreach": norm_foreach, "squares": norm_squares}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="the quick network, few replays; without CUDA, the forms eagerly "
                        "on the CPU (CI)")
    parser.add_argument("--out", metavar="FILE.json")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    if not cuda and not args.quick:
        raise SystemExit("error: probe_grad_norm.py needs a CUDA device (--quick runs the "
                         "forms eagerly on the CPU)")
    device = torch.device("cuda" if cuda else "cpu")
    sizes = SIZES["quick" if args.quick else "full"]
    iters, warmup = (QUICK_ITERS, QUICK_WARMUP) if args.quick else (ITERS, WARMUP)
    mode = Mode("eager_bf16", cuda_graphs=False, autocast="bf16")
    setup = build_market(sizes, training_spec(sizes, device, mode).env, device)
    steps = new_learner(sizes, setup, device, mode)
    steps.run_updates(1)
    net = steps.learner.online
    out = torch.zeros((), device=device)
    results = {}
    for name, form in FORMS.items():
        step = lambda form=form: out.copy_(form(net.gradients()))
        if cuda:
            compiled = torch.compile(step, fullgraph=True, options={"combo_kernels": True})
            step = CapturedStep(compiled, enabled=True)  # warm-up, capture, then replays
        row = {**time_steps(step, iters, warmup, device).summary(),
               **kernel_profile(step, 10, device), "norm": float(out)}
        results[name] = row
        kernels = f", {row['kernels_per_step']} kernels" if cuda else ""
        log(f"{name}: median {row['median_ms']} ms{kernels}, norm {row['norm']:.6g}")
    doc: dict = {"quick": args.quick, "results": results}
    if not cuda:
        doc["skipped"] = f"{NO_CUDA}: the forms ran eagerly on the CPU, not compiled or replayed"
    emit("probe_grad_norm", device, doc, args.out)


if __name__ == "__main__":
    run_main(main, "probe_grad_norm")
