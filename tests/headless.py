"""Headless Chromium for the report tests (Debian's chromium; CI installs it): one way to find it, start
it with a private profile, read its console, and load a page once for its DOM, a screenshot and a PDF."""

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


def render(url: str, *, png: Path | None = None, size: str = "1280,2400", pdf: Path | None = None,
           min_png_bytes: int = 0, keep_as: str = "") -> subprocess.CompletedProcess:
    """One Chromium run over ``url``: its DOM on stdout (``--dump-dom``), and where asked a PNG at ``size``
    (asserted to be a PNG of ``min_png_bytes`` or more; copied to ``$TILEPROOF_SCREENSHOT_DIR/keep_as`` when
    that is set) and a PDF through the page's print CSS. Asserts Chromium succeeded; its stderr holds the
    console of all three (``console_messages``)."""
    args = ["--dump-dom"]
    if png is not None:
        args += [f"--screenshot={png}", f"--window-size={size}"]
    if pdf is not None:
        args += ["--no-pdf-header-footer", f"--print-to-pdf={pdf}"]
    got = chromium(*args, url)
    assert got.returncode == 0, got.stderr[-2000:]
    if png is not None:
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(data) > min_png_bytes
        keep = os.environ.get("TILEPROOF_SCREENSHOT_DIR")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(png, Path(keep) / keep_as)
    return got
