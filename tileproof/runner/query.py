"""Asking a tool a short question (git, sbatch, scontrol, sacct): the one helper for it.

A query is a process tileproof waits on for its answer, not work it keeps as
evidence: it gets this process's own environment, its whole output and a
deadline. A tool that is missing, cannot start or does not answer in time is a
``QueryError``: one line with the fix. Work that runs long or is attested (a
lesson program, a compiler, a tileproof child) starts contained instead
(``runner.process.start_and_wait``).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tileproof.records.errors import TileproofError

DEFAULT_TIMEOUT_S = 60.0
"""How long a query may take unless its caller says otherwise."""


class QueryError(TileproofError):
    """A tool that is missing, cannot start, or did not answer before its deadline."""


@dataclass(frozen=True)
class Answer:
    """What the tool said: its exit status and both streams, whole."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: bytes
    stderr: bytes

    def text(self) -> str:
        """stdout as text."""
        return self.stdout.decode(errors="replace")

    def last_error(self) -> str:
        """The last line the tool wrote to stderr, or ``exit N`` when it wrote none."""
        lines = [ln.strip() for ln in self.stderr.decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit {self.exit_code}"


def ask(argv: Sequence[str | Path], *, cwd: Path | None = None, stdin: bytes | None = None,
        timeout: float = DEFAULT_TIMEOUT_S, fix: str = "install it, or put it on PATH",
        env: Mapping[str, str] | None = None) -> Answer:
    """Run ``argv`` (never through a shell) with ``stdin`` (or none) and wait at most ``timeout`` seconds.

    ``fix`` is what the error says to do when the tool is not there; ``env``, when given, is its whole
    environment (else this process's)."""
    args = [str(a) for a in argv]
    shown = shlex.join(args)
    if cwd is not None and not Path(cwd).is_dir():
        raise QueryError(f"{shown}: cannot run in {cwd}: no such folder")
    try:
        done = subprocess.run(args, cwd=cwd, input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                              capture_output=True, timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired:
        raise QueryError(f"{shown}: no answer in {timeout:g} s, so it was stopped "
                         f"(fix: run it by hand to see why it hangs)") from None
    except OSError as e:
        raise QueryError(f"{args[0]}: cannot start: {e.strerror} (fix: {fix})") from None
    return Answer(tuple(args), done.returncode, done.stdout, done.stderr)
