"""Running a step: one process (``process.start_and_wait``) kept as evidence.

Both streams are redacted (``records.redact``) before they are written under
``evidence/<run id>/``; a stream cut at the cap ends with one marker line
naming where, and the Step says so in ``stdout_cut``/``stderr_cut``. Every
process tileproof keeps as evidence is a step or a capture (``runner.capture``),
and both go through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tileproof.records.models import STEP_VERSION, Step, StreamCut
from tileproof.records.redact import merge, redact
from tileproof.records.store import write_evidence
from tileproof.runner.process import Finished, start_and_wait
from tileproof.runner.wall import Wall


def cut_marker(kept: int, total: int) -> bytes:
    """The line ending a cut transcript."""
    return f"\n[tileproof: output cut at byte {kept} of {total}; raise --output-cap to keep more]\n".encode()


def clean(data: bytes, total: int) -> tuple[bytes, StreamCut | None, dict]:
    """A captured stream as written: redacted, and marked when it was cut."""
    text, counts = redact(data)
    if total > len(data):
        return text + cut_marker(len(data), total), StreamCut(kept_bytes=len(data), total_bytes=total), counts
    return text, None, counts


def to_step(root: Path, run_id: str, name: str, started: datetime, done: Finished,
            stdout_name: str, stderr_name: str) -> Step:
    """The Step of a finished process, its streams written as evidence."""
    out, out_cut, out_n = clean(done.stdout, done.stdout_total)
    err, err_cut, err_n = clean(done.stderr, done.stderr_total)
    return Step(
        step_version=STEP_VERSION,
        name=name,
        argv=list(done.argv),
        started=started,
        ended=datetime.now(timezone.utc),
        duration_s=round(done.duration_s, 3),
        exit_code=done.exit_code,
        timed_out=done.timed_out,
        stdout=write_evidence(root, run_id, stdout_name, out),
        stderr=write_evidence(root, run_id, stderr_name, err),
        stdout_cut=out_cut,
        stderr_cut=err_cut,
        redactions=merge(out_n, err_n),
        strays_killed=done.strays_killed,
        containment=done.containment,
        isolation=done.isolation,
    )


@dataclass(frozen=True)
class Limits:
    """What a step may take: ``timeout`` seconds (None: no limit) and ``cap`` bytes kept of each stream (None:
    ``process.output_cap``'s default)."""

    timeout: float | None = None
    cap: int | None = None


def run_step(root: Path, run_id: str, name: str, argv: list[str], env: dict[str, str],
             limits: Limits = Limits(), wall: Wall | None = None) -> Step:
    """Run argv in ``root`` and keep ``<name>.stdout.txt``/``<name>.stderr.txt`` as evidence; behind ``wall``
    when given (untrusted work: ``process.start_and_wait``)."""
    started = datetime.now(timezone.utc)
    done = start_and_wait(argv, env=env, cwd=root, timeout=limits.timeout, cap=limits.cap, wall=wall)
    return to_step(root, run_id, name, started, done, f"{name}.stdout.txt", f"{name}.stderr.txt")
