"""What every step of the node shares: the one-line failure (``NodeError``), the line printed per step, and
the one way a step starts a process (``run``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

CLIENTS = ("sbatch", "scontrol", "sinfo", "squeue", "sacct", "scancel", "srun")
"""The Slurm commands ``up`` writes into STATE/bin (tileproof uses sbatch, scontrol and sacct)."""


DAEMONS = ("munged", "slurmctld", "slurmd")


class NodeError(Exception):
    """A step that failed: ``str()`` is the one line printed (what, and the fix)."""


def say(line: str) -> None:
    print(f"slurm-node: {line}", flush=True)


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """One command to its end (text out); a missing program is a NodeError naming it."""
    try:
        return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise NodeError(f"{argv[0]}: not found (fix: install it, or put it on PATH)") from None
    except subprocess.TimeoutExpired:
        raise NodeError(f"{' '.join(argv[:3])}: no answer after {timeout:.0f} s") from None


def last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"
