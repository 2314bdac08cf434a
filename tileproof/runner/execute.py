"""Running one program: timeout, streams, its check report, and the verdict.

The verdict comes from the exit code and the program's structured report,
never from its printed text. Streams are kept verbatim; a gated or no-GPU
run's stdout is named ``<program>-gate-stdout.txt`` so a reviewer finds the
refusal transcript by name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from tileproof.records.models import CheckReport, Step, Transcript, Verdict
from tileproof.records.store import write_evidence
from tileproof.toolchain.diagnose import diagnose


@dataclass(frozen=True)
class Outcome:
    step: Step
    report: CheckReport | None
    report_file: Transcript | None
    verdict: Verdict
    reason: str


def verdict_of(exit_code: int | None, timed_out: bool, report: CheckReport | None, report_problem: str | None) -> tuple[Verdict, str]:
    """The closed-set verdict from exit code and report; never from prose."""
    if timed_out:
        return "timeout", "killed at the timeout"
    if report is None:
        why = report_problem or "wrote no check report"
        return "error", f"exit code {exit_code}; {why}"
    if report.gate == "no-gpu":
        return ("no-gpu", report.gate_message) if exit_code != 0 else ("error", "gate said no-gpu but exit code was 0")
    if report.gate == "below-sm80":
        return ("gated", report.gate_message) if exit_code != 0 else ("error", "gate said below sm_80 but exit code was 0")
    if exit_code == 0 and report.passed:
        return "passed", f"{len(report.checks)} checks passed"
    if exit_code != 0 and not report.passed:
        bad = [c.name for c in report.checks if not c.passed]
        return "failed", (f"check {bad[0]} failed" if bad else f"exit code {exit_code} before any check passed")
    return "error", f"exit code {exit_code} disagrees with report passed={report.passed}"


def _read_report(path: Path) -> tuple[CheckReport | None, bytes | None, str | None]:
    if not path.is_file():
        return None, None, None
    data = path.read_bytes()
    try:
        return CheckReport.model_validate_json(data), data, None
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        return None, data, f"check report invalid at {field or '(root)'}: {err['msg']}"


def run_program(root: Path, run_id: str, stem: str, argv: list[str], env: dict[str, str], timeout: float) -> Outcome:
    """Run argv with ``--report`` appended, kill its process group at ``timeout``."""
    with tempfile.TemporaryDirectory(prefix="tileproof-") as tmp:
        report_path = Path(tmp) / "check-report.json"
        full = [*argv, "--report", str(report_path)]
        started = datetime.now(timezone.utc)
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        duration = time.perf_counter() - t0
        code = None if timed_out else proc.returncode
        report, raw, problem = _read_report(report_path)
    verdict, reason = verdict_of(code, timed_out, report, problem)
    found = diagnose((out + err).decode(errors="replace"), code)
    if found and verdict not in ("passed",):
        reason += "; " + "; ".join(f"{d.title} (fix: {d.fix})" for d in found)
    tag = "-gate" if verdict in ("gated", "no-gpu") else ""
    step = Step(
        name=stem,
        argv=full,
        started=started,
        ended=datetime.now(timezone.utc),
        duration_s=round(duration, 3),
        exit_code=code,
        timed_out=timed_out,
        stdout=write_evidence(root, run_id, f"{stem}{tag}-stdout.txt", out),
        stderr=write_evidence(root, run_id, f"{stem}{tag}-stderr.txt", err),
    )
    report_file = write_evidence(root, run_id, "check-report.json", raw) if raw is not None else None
    return Outcome(step=step, report=report, report_file=report_file, verdict=verdict, reason=reason)
