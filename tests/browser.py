"""Headless Chromium for the tests that render a page (the HTML report, the docs site).

``chromium()`` finds the browser (None where it is absent: the caller skips, saying
why); ``flags(profile)`` are the switches that keep it offline, quiet and sandbox-free in
CI; ``screenshot(browser, url, path, profile)`` writes a PNG and returns the run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

MISSING = (
    "headless Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)"
)


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def flags(profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
    ]


def run(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [browser, *flags(profile), *args], capture_output=True, text=True, timeout=120
    )


def screenshot(browser: str, url: str, path: Path, profile: Path, size="1400,1000"):
    return run(browser, profile, f"--window-size={size}", f"--screenshot={path}", url)
