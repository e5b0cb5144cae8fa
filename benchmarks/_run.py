"""How a benchmark script ends, without importing torch (bench_risk does not need it).

- `run_main(main, name)`: an exception ends the script with one line on stderr, `error: name:
  Type: message (at file:line in function)`, and exit status 1, never a traceback;
- `errors(doc)`: the measurements a document reports as failed in place (`"error"`), which
  `_common.emit` turns into exit status 1 once the whole document is out;
- `NO_CUDA`: what a GPU-only figure says without CUDA: `{"skipped": "no CUDA..."}`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["NO_CUDA", "errors", "one_line", "run_main"]

NO_CUDA = "no CUDA"
"""What a GPU-only figure says when the benchmark runs without CUDA: {"skipped": "no CUDA..."}."""


def run_main(main: Callable[[], object], name: str) -> None:
    """Run a benchmark's `main`: an exception ends it with one line on stderr (what, and where
    it was raised) and exit status 1, never a traceback; `SystemExit` passes through."""
    try:
        main()
    except Exception as exc:  # noqa: BLE001 - every failure is one line
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in " \
                f"{frames[-1].name})" if frames else ""
        raise SystemExit(f"error: {name}: {one_line(exc)}{where}") from None


def one_line(exc: BaseException) -> str:
    """`Type: message`, cut at the message's first line."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def errors(doc: object, path: str = "") -> Iterator[str]:
    """Every `"error"` a benchmark's document holds (a measurement that failed and was
    reported in place), as "where: message"."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "error" and isinstance(value, str):
                yield f"{path or '.'}: {value}"
            else:
                yield from errors(value, f"{path}.{key}")
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from errors(value, f"{path}[{i}]")
