"""tileproof started as its own child process: a fleet task's ``run``, the merge's ``audit``, a
``--devices`` fan-out's one ``run`` per GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finished:
    """A tileproof child that ended: its argv, exit status and (when captured) output."""

    argv: list[str]
    exit_code: int
    output: str
    """stdout and stderr together; empty when they were not captured."""


def tileproof(args: list[str], cwd: Path, *, python: str | None = None, pythonpath: Path | None = None,
              capture: bool = False, env: dict[str, str] | None = None) -> Finished:
    """``python -m tileproof ARGS`` in ``cwd``; ``pythonpath`` puts that checkout's tileproof first."""
    argv = [python or sys.executable, "-m", "tileproof", *args]
    child_env = dict(os.environ if env is None else env)
    if pythonpath is not None:
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), child_env.get("PYTHONPATH")]))
    proc = subprocess.run(argv, cwd=cwd, env=child_env, stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.STDOUT if capture else None, text=True)
    return Finished(argv=argv, exit_code=proc.returncode, output=proc.stdout or "")


def in_parallel(jobs: list[tuple[list[str], Path]]) -> list[Finished]:
    """Each ``(tileproof args, cwd)`` as its own process, all at once; results in the same order."""
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(tileproof, args, cwd, capture=True) for args, cwd in jobs]
        return [f.result() for f in futures]

