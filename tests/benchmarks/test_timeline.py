"""The benchmarks' kernel timeline: busy time is the union of kernel intervals across streams."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _common import timeline_summary


def kernel(name, ts, dur, stream):
    return {"name": name, "ts": ts, "dur": dur, "args": {"stream": stream}}


def test_overlapping_streams_count_once_and_gaps_are_idle():
    events = [
        kernel("c", 30.0, 5.0, 7),  # after a 10 us gap
        kernel("a", 0.0, 10.0, 7),
        kernel("b", 5.0, 15.0, 9),  # overlaps a by 5 us
    ]
    out = timeline_summary(events)
    assert out["kernels"] == 3
    assert out["span_us"] == 35.0
    assert out["busy_us"] == 25.0  # [0, 20] and [30, 35]
    assert out["idle_us"] == 10.0
    assert out["streams"] == {"7": 15.0, "9": 15.0}
    assert [k["name"] for k in out["timeline"]] == ["a", "b", "c"]
    assert [k["start_us"] for k in out["timeline"]] == [0.0, 5.0, 30.0]


def test_a_kernel_inside_another_adds_no_busy_time():
    out = timeline_summary([kernel("outer", 100.0, 50.0, 1), kernel("inner", 110.0, 5.0, 2)])
    assert out["busy_us"] == 50.0 and out["idle_us"] == 0.0


def test_a_graph_copy_fills_a_gap_but_is_not_counted_as_a_kernel():
    copy = {**kernel("Memcpy DtoD (Device -> Device)", 10.0, 8.0, 7), "cat": "gpu_memcpy"}
    out = timeline_summary([kernel("a", 0.0, 10.0, 7), copy, kernel("b", 18.0, 2.0, 7)])
    assert (out["kernels"], out["copies"]) == (2, 1)
    assert out["busy_us"] == 20.0 and out["idle_us"] == 0.0
    assert out["timeline"][1]["name"].startswith("Memcpy")


def test_no_kernels():
    assert timeline_summary([]) == {"kernels": 0}


# -- kernels charged to the profiler range that launched them ---------------------------------

from _common import kernel_attribution


def _range(name, ts, dur, tid=1):
    return {"cat": "user_annotation", "name": name, "ts": ts, "dur": dur, "tid": tid}


def _launch(correlation, ts, tid=1, cat="cuda_runtime"):
    return {"cat": cat, "name": "cudaLaunchKernel", "ts": ts, "dur": 1, "tid": tid,
            "args": {"correlation": correlation}}


def _kernel(name, correlation, ts, dur):
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "stream": 7}}


def test_kernels_go_to_the_innermost_range_that_launched_them():
    events = [
        _range("foxhunt.update", 0, 400), _range("foxhunt.loss", 0, 100),
        _range("foxhunt.stage", 100, 100), _range("other.range", 200, 100),
        _launch(1, 10), _launch(2, 150, cat="cuda_driver"), _launch(3, 160),
        _launch(4, 250), _launch(5, 50, tid=2), _launch(6, 500),
        _kernel("gemm", 1, 20, 4.0), _kernel("fused_0", 2, 400, 2.0), _kernel("fused_1", 3, 402, 3.0),
        _kernel("tail", 4, 410, 1.0), _kernel("grad", 5, 60, 5.0), _kernel("late", 6, 600, 1.0),
        _kernel("orphan", 99, 700, 1.0),
    ]
    out = kernel_attribution(events)
    assert list(out) == ["loss", "autograd", "stage", "update", "other", "unmatched"]
    assert out["loss"] == {"kernels": 1, "kernel_us": 4.0, "names": ["gemm"]}
    assert out["stage"] == {"kernels": 2, "kernel_us": 5.0, "names": ["fused_0", "fused_1"]}
    assert out["update"]["names"] == ["tail"]  # inside update, outside its inner ranges
    assert out["autograd"]["names"] == ["grad"]  # launched from a thread without ranges
    assert out["other"]["names"] == ["late"]  # the ranges' thread, outside every range
    assert out["unmatched"]["names"] == ["orphan"]


def test_on_the_cpu_each_range_reports_its_cpu_time():
    from _common import range_profile

    def step():
        with torch.profiler.record_function("foxhunt.matmul"):
            torch.randn(64, 64) @ torch.randn(64, 64)

    out = range_profile(step, 3, torch.device("cpu"))
    assert list(out) == ["matmul"] and out["matmul"]["ms"] > 0 and "kernels" not in out["matmul"]
