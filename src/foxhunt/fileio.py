"""Whole-or-nothing file writes: every document foxhunt writes (run files, study files, TOML,
reports, benchmark JSON) goes through a synced temp file and a rename, so a process killed
mid-write leaves the previous file, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
