"""tileproof started as its own child process: a fleet task's ``run``, the merge's ``audit``, a
``--devices`` fan-out's one ``run`` per GPU.

Each starts contained (``process.start_and_wait``), with a deadline its caller gives: its
whole tree dies when it ends, at the deadline, or when this tileproof is stopped.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tileproof.runner.process import start_and_echo, start_and_wait

AUDIT_DEADLINE_S = 3600.0
"""An ``audit`` child still running after an hour is killed (a course's audit takes seconds)."""


@dataclass(frozen=True)
class Child:
    """A tileproof child that ended: its argv, exit status (None: killed at its deadline) and output."""

    argv: tuple[str, ...]
    exit_code: int | None
    deadline_s: float | None
    stdout: str
    stderr: str

    @property
    def status(self) -> int:
        """The exit status to pass on: the child's own, or 1 when it was killed (at its deadline or by a
        signal)."""
        return self.exit_code if self.exit_code is not None and self.exit_code >= 0 else 1

    def lines(self) -> list[str]:
        """What it printed: stdout's lines, then stderr's."""
        return self.stdout.splitlines() + self.stderr.splitlines()

    def summary(self, prefix: str) -> str:
        """The last line starting with ``prefix``, in either stream: a command's summary line wherever it printed
        it (the audit prints its own to stderr when it fails, after its findings and trust lines on stdout); else
        ``last_line()``."""
        said = [ln.strip() for ln in self.lines() if ln.strip().startswith(prefix)]
        return said[-1] if said else self.last_line()

    def last_line(self) -> str:
        """What it said last: the line the command line prints on its way out when a command cannot go on
        (``tileproof CMD: ...`` on stderr), else its summary line (stdout's last)."""
        if self.exit_code is None:
            return f"(killed at its deadline, {self.deadline_s:g} s)"
        err = [ln for ln in self.stderr.splitlines() if ln.strip()]
        if err and err[-1].startswith("tileproof "):
            return err[-1].strip()
        out = [ln for ln in self.stdout.splitlines() if ln.strip()] or err
        return out[-1].strip() if out else "(no output)"


def tileproof(args: list[str], cwd: Path, *, deadline_s: float | None, python: str | None = None,
              pythonpath: Path | None = None, echo: bool = False) -> Child:
    """``python -m tileproof ARGS`` in ``cwd``, with this process's environment; ``pythonpath`` puts that
    checkout's tileproof first; ``echo`` copies its output here as it comes (its log is watched)."""
    argv = [python or sys.executable, "-m", "tileproof", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    done = (start_and_echo if echo else start_and_wait)(argv, env=env, cwd=cwd, timeout=deadline_s)
    return Child(argv=tuple(argv), exit_code=done.exit_code, deadline_s=deadline_s,
                 stdout=done.stdout.decode(errors="replace"), stderr=done.stderr.decode(errors="replace"))


def in_parallel(jobs: list[tuple[list[str], Path]], deadline_s: float | None) -> list[Child]:
    """Each ``(tileproof args, cwd)`` as its own process, all at once; results in the same order."""
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(tileproof, args, cwd, deadline_s=deadline_s) for args, cwd in jobs]
        return [f.result() for f in futures]
