"""Headless Chromium for the report tests (Debian's chromium; CI installs it): one way to find it, start
it with a private profile, read its console, and take a screenshot."""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "",
                             shutil.which("chromium-browser") or "") if p and os.access(p, os.X_OK)), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE[^\]]*\]\s*(.*)")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")


def chromium(*args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    """Run headless Chromium with a fresh profile of its own."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                              check=False, capture_output=True, text=True, timeout=timeout)


def console_messages(stderr: str) -> list[str]:
    """What the page wrote to the browser console (Chromium logs it to stderr)."""
    return [m.group(1) for line in stderr.splitlines() if (m := CONSOLE.search(line))]


def screenshot(url: str, png: Path, size: str, min_bytes: int, keep_as: str) -> subprocess.CompletedProcess:
    """A PNG of ``url`` at ``size``: asserts Chromium succeeded and wrote a PNG of ``min_bytes`` or more;
    copied to ``$TILEPROOF_SCREENSHOT_DIR/keep_as`` when that is set. Returns the run (for its console)."""
    shot = chromium(f"--screenshot={png}", f"--window-size={size}", url)
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > min_bytes
    keep = os.environ.get("TILEPROOF_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / keep_as)
    return shot
