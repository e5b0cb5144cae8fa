"""Headless Chromium for the report: read back the rendered DOM, take a screenshot.

Used by the browser test and by scripts/make_report_screenshot.py. Every run gets a fresh
profile directory and the flags that keep Chromium off the network (no background
networking, component updates, sync or QUIC).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from foxhunt.errors import FoxhuntError

CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
    "--force-device-scale-factor=1",
    "--enable-logging=stderr",
    "--v=0",
)


class BrowserError(FoxhuntError):
    """Chromium is missing or failed to render a page."""


@dataclass(frozen=True)
class BrowserRun:
    stdout: str
    stderr: str

    def console_messages(self) -> list[str]:
        """Every console message and uncaught exception the page produced (Chromium's log).

        Chromium logs all console levels alike, so callers that expect a silent page (the
        report logs nothing) should treat any message as a failure.
        """
        return [
            line.strip()
            for line in self.stderr.splitlines()
            if ":CONSOLE" in line or "Uncaught" in line
        ]


def find_chromium() -> str | None:
    """Path of a Chromium binary, or None."""
    for name in CANDIDATES:
        path = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if path:
            return path
    return None


def _run(args: list[str], url: str, timeout: float, chromium: str | None) -> BrowserRun:
    exe = chromium or find_chromium()
    if exe is None:
        raise BrowserError("Chromium not found: install it (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="foxhunt-chromium-") as profile:
        env = {**os.environ, "HOME": profile}
        cmd = [exe, *FLAGS, f"--user-data-dir={profile}", *args, url]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                               check=False)
        except subprocess.TimeoutExpired as exc:
            raise BrowserError(f"Chromium did not finish within {timeout:.0f}s on {url}") from exc
    if p.returncode != 0:
        raise BrowserError(
            f"Chromium exited with {p.returncode} on {url}: {p.stderr.strip()[-500:]}"
        )
    return BrowserRun(p.stdout, p.stderr)


def dump_dom(html: Path, timeout: float = 120, chromium: str | None = None,
             width: int | None = None, height: int = 2000) -> BrowserRun:
    """Load `html` (file://) and return the DOM after its scripts ran, plus Chromium's log;
    in a `width` x `height` window where `width` is given (for layout checks)."""
    size = [f"--window-size={width},{height}"] if width else []
    return _run(
        [*size, "--virtual-time-budget=5000", "--dump-dom"],
        Path(html).resolve().as_uri(),
        timeout,
        chromium,
    )


def screenshot(
    html: Path,
    png: Path,
    width: int = 1400,
    height: int = 2400,
    timeout: float = 120,
    chromium: str | None = None,
) -> Path:
    """Render `html` in a `width` x `height` window and save the viewport as `png`."""
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(
        [f"--window-size={width},{height}", "--virtual-time-budget=5000", f"--screenshot={png}"],
        Path(html).resolve().as_uri(),
        timeout,
        chromium,
    )
    if not png.is_file():
        raise BrowserError(f"Chromium wrote no screenshot to {png}")
    return png
