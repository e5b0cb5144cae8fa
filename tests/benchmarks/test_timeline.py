"""The benchmarks' kernel timeline: busy time is the union of kernel intervals across streams."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _common import timeline_summary  # noqa: E402


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


def test_no_kernels():
    assert timeline_summary([]) == {"kernels": 0}
