"""JSON-lines files that a crash may cut short: read back, a torn last line dropped.

A line is written whole and flushed before anything depends on it, so only the last line can
be torn (the process died writing it): what it said never took effect, and it is cut from the
file. A damaged line before the last is an error naming the file and the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_json_lines(path: Path, apply: Callable[[Any], None],
                    error: Callable[[str], Exception]) -> None:  # fmt: skip
    """`apply` each line's JSON in order; a torn last line is truncated away (and a whole
    last line that lacks its newline gets one). `apply` raises ValueError, TypeError or
    KeyError for a line it cannot take; `error(message)` builds what is raised then."""
    try:
        data = path.read_bytes() if path.exists() else b""
    except OSError as exc:
        raise error(f"{path}: cannot read it ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    offset = 0
    for i, raw in enumerate(lines):
        start, offset = offset, offset + len(raw) + 1
        if not raw:
            continue
        try:
            apply(json.loads(raw))
        except (ValueError, TypeError, KeyError) as exc:
            if i < len(lines) - 1:
                raise error(f"{path}: line {i + 1} is damaged ({str(exc)[:80]})") from None
            with open(path, "r+b") as fh:
                fh.truncate(start)
                os.fsync(fh.fileno())
            return
    if data and not data.endswith(b"\n"):
        with open(path, "ab") as fh:
            fh.write(b"\n")
