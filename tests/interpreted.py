"""Triton kernels' tests on the CPU, under Triton's interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_interpreted(module: str, function: str = "interpreted_checks") -> None:
    """Call `module.function` in a fresh process started with TRITON_INTERPRET=1 (Triton reads it
    when a kernel is defined, so it cannot be switched on inside the test's own process); skip
    without triton."""
    pytest.importorskip("triton")
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", f"from {module} import {function}; {function}()"],
                         check=False, cwd=root, env={**os.environ, "TRITON_INTERPRET": "1"},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
