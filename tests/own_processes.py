"""A test's own processes, found by a name no other process has, never by a machine-wide pattern
(other suites run on this machine at the same time, and a PID read inside a step's own PID namespace
means nothing outside it).

``named_sleep`` links ``sleep`` under a fresh name, ``tp`` and 12 hex digits: what the kernel calls
a process started from that link (its ``comm``, which ``ps`` shows and a zombie keeps); ``name_self``
gives a running Python program such a name.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path


def fresh_name() -> str:
    """``tp`` + 12 hex digits: 14 characters, under the kernel's 15 for a process name."""
    return "tp" + secrets.token_hex(6)


def named_sleep(folder: Path) -> Path:
    """A link to ``sleep`` with a fresh name (the name of every process started from it)."""
    link = folder / fresh_name()
    link.symlink_to(shutil.which("sleep") or "/bin/sleep")
    return link


NAME_SELF = "open('/proc/self/comm', 'w').write({name!r})"
"""A line of Python that gives the program running it the name ``name``."""


def in_proc(name: str) -> list[str]:
    """``pid state`` of every process named ``name`` in /proc, zombies included."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        comm = stat[stat.index(b"(") + 1:stat.rfind(b")")].decode(errors="replace")
        if comm == name:
            found.append(f"{entry.name} {stat[stat.rfind(b')') + 2:][:1].decode()}")
    return found


def in_ps(name: str) -> list[str]:
    """What ``ps`` lists for processes named ``name`` (zombies included)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,stat=,comm="], capture_output=True, text=True, timeout=30).stdout
    return [line.strip() for line in out.splitlines() if line.split()[2:] == [name]]


def left(*names: str, zombies: bool = True) -> list[str]:
    """Every process of these names that /proc or ps still lists; ``zombies=False``: the live ones only (a
    zombie whose parent died waits for whoever reaps orphans on this machine)."""
    return [f"{n}: {found}" for n in names for found in in_proc(n) + in_ps(n)
            if zombies or found.split()[1][:1] != "Z"]


def left_after(seconds: float, *names: str, zombies: bool = True) -> list[str]:
    """``left(*names, zombies=zombies)`` once it is empty, or after ``seconds``."""
    until = time.perf_counter() + seconds
    while (found := left(*names, zombies=zombies)) and time.perf_counter() < until:
        time.sleep(0.05)
    return found


def wait_named(name: str, seconds: float = 20) -> None:
    """Until a live process named ``name`` exists."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        if any(not p.endswith(" Z") for p in in_proc(name)):
            return
        time.sleep(0.02)
    raise AssertionError(f"no process named {name} started")


def kill_named(*names: str) -> None:
    """Clean up after a test that left these processes (ours only: the names are fresh)."""
    for name in names:
        for found in in_proc(name):
            try:
                os.kill(int(found.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                continue
