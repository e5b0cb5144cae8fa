"""Whole-or-nothing file writes: every document foxhunt writes (run files, study files, TOML,
reports, benchmark JSON) goes through a synced temp file and a rename, so a process killed
mid-write leaves the previous file, never half of one. And the one reader of the append-only
journals (venues, gateways, the live trader's bars), which a crash can only cut at the end."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_text_atomic(text: str, path: Path | str) -> Path:
    """Write `text` to `path` through a synced temp file beside it and a rename; returns the
    path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_json_lines(path: Path, apply: Callable[[Any], None],
                    damaged: Callable[[str], Exception]) -> None:  # fmt: skip
    """Read back an append-only JSON-lines journal that a crash may have cut short: `apply`
    each line's JSON in order. A line is written whole and flushed before anything depends on
    it, so only the last one can be torn (the process died writing it): a last line that is
    not JSON never took effect and is cut from the file; a whole last line that lacks its
    newline gets one. A line before the last that is not JSON, or any line `apply` refuses
    (KeyError, TypeError, ValueError, AttributeError), raises `damaged(message)`, the message
    naming the file and the line. A file that does not exist holds nothing."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise damaged(f"{path}: cannot read it ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    offset = 0
    for i, raw in enumerate(lines):
        start, offset = offset, offset + len(raw) + 1
        if not raw:
            continue
        try:
            rec = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            if i == len(lines) - 1:
                with open(path, "r+b") as fh:
                    fh.truncate(start)
                    os.fsync(fh.fileno())
                return
            raise damaged(f"{path}: line {i + 1} is not JSON ({str(exc)[:60]})") from None
        try:
            apply(rec)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            why = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
            raise damaged(f"{path}: line {i + 1} is damaged ({why[:100]})") from None
    if data and not data.endswith(b"\n"):
        with open(path, "ab") as fh:
            fh.write(b"\n")
            os.fsync(fh.fileno())
