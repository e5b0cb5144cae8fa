"""How inductor compiles the gradients' total norm of `ClippedAdam`: a probe of three ways to
write it, on the bench's full-size network (its gradients as the optimiser step derives them
from the working weights' after one bf16 update).

- `cat`: the L2 norm of all gradients laid end to end (`torch.cat`, then one norm): inductor
  writes the concatenation (3.5M float32) to memory before reducing it;
- `foreach`: one norm per gradient (`torch._foreach_norm`), then the norm of those;
- `squares`: each gradient's sum of squares, summed, then the square root.

For each, compiled (`combo_kernels`, as the trainer compiles) and replayed as a CUDA graph: the
replay's median time, its kernels, and the norm it computes (to check the forms agree).
Prints one JSON document.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _common import emit, kernel_profile, log, time_steps
from bench_train import SIZES, Mode, build_market, new_learner, training_spec
from torch import Tensor

from foxhunt.training.graphs import CapturedStep

ITERS = 300
WARMUP = 20


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
    parser.add_argument("--out", metavar="FILE.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_grad_norm.py needs a CUDA device")
    device, sizes = torch.device("cuda"), SIZES["full"]
    mode = Mode("eager_bf16", cuda_graphs=False, autocast="bf16")
    setup = build_market(sizes, training_spec(sizes, device, mode).env, device)
    learner = new_learner(sizes, setup, device, mode)
    learner.run_updates(1)
    net = learner.online
    out = torch.zeros((), device=device)
    results = {}
    for name, form in FORMS.items():
        compiled = torch.compile(lambda form=form: out.copy_(form(net.gradients())),
                                 fullgraph=True, options={"combo_kernels": True})
        replay = CapturedStep(compiled, enabled=True)  # warm-up, capture, then replays
        row = {**time_steps(replay, ITERS, WARMUP, device).summary(),
               **kernel_profile(replay, 10, device), "norm": float(out)}
        results[name] = row
        log(f"{name}: median {row['median_ms']} ms, {row['kernels_per_step']} kernels, "
            f"norm {row['norm']:.6g}")
    emit("probe_grad_norm", device, {"results": results}, args.out)


if __name__ == "__main__":
    main()
