"""Running one program: timeout, streams, its check report, and the verdict.

The verdict comes from the exit code and the program's structured report, never from its printed
text. Every file a program leaves (its report, the exception its launcher wrote, a bench results
file) is hostile input: ``read_left`` reads it through the one safe reader (no link, no special
file, no second name of another file, a size cap) or not at all. A cuTile Python program is started
through ``toolchain.launch``, which writes down the exception that ended it, if one did
(``Outcome.failure``, typed; the reason names it). Streams are kept (capped and redacted, see
``runner.step``); a gated or no-GPU run's stdout is named ``<program>-gate-stdout.txt`` so a
reviewer finds the refusal transcript by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from tileproof.records.errors import InputProblem, InputRefused
from tileproof.records.models import CheckReport, OutsideVerdict, ProgramFailure, RunVerdict, Step, Transcript, Verdict
from tileproof.records.redact import RedactionRule, merge, redact
from tileproof.records.safe_read import read_bytes
from tileproof.records.store import write_evidence
from tileproof.runner import outside_check
from tileproof.runner.process import scratch_dir, start_and_wait
from tileproof.runner.step import to_step
from tileproof.runner.wall import Wall
from tileproof.toolchain import launch
from tileproof.toolchain.diagnose import diagnose

REPORT, FAILURE = "check-report.json", "failure.json"
"""What a program's ``--report`` and its launcher write in the step's scratch folder (and the report's name
under ``evidence/<run id>/``)."""
LAUNCHER = Path(launch.__file__)
"""The script a Python program is started through (run by path, so it imports nothing of tileproof)."""


@dataclass(frozen=True)
class Outcome:
    step: Step
    report: CheckReport | None
    report_file: Transcript | None
    verdict: RunVerdict
    reason: str
    failure: ProgramFailure | None = None
    """The exception that ended a Python program (``toolchain.launch``), None when none did."""
    report_refused: InputProblem | None = None
    """Why a report the program left was not read (``read_left``): it counts as no report; None when it was
    read, or there was none."""
    outside: OutsideVerdict | None = None
    """tileproof's own check of the outputs the program handed over (``outside_check``), None when it ran no check."""


def verdict_of(exit_code: int | None, timed_out: bool, report: CheckReport | None,
               report_problem: str | None, failure: ProgramFailure | None = None) -> tuple[Verdict, str]:
    """The closed-set verdict from exit code and report; never from prose. ``failure`` only words the reason:
    an exception before the report was written is still an ``error`` (a crash), after it still ``failed``."""
    if timed_out:
        return "timeout", "killed at the timeout"
    if report is None:
        why = report_problem or (f"raised {failure} before writing a check report" if failure
                                 else "wrote no check report")
        return "error", f"exit code {exit_code}; {why}"
    if report.gate == "no-gpu":
        return ("no-gpu", report.gate_message) if exit_code != 0 else ("error", "gate said no-gpu but exit code was 0")
    if report.gate == "below-sm80":
        if exit_code == 0:
            return "error", "gate said below sm_80 but exit code was 0"
        return "gated", report.gate_message
    if exit_code == 0 and report.passed:
        n = len(report.checks)
        return "passed", f"{n} check{'' if n == 1 else 's'} passed"
    if exit_code != 0 and not report.passed:
        bad = [c.name for c in report.checks if not c.passed]
        if bad:
            return "failed", f"check {bad[0]} failed"
        raised = f"; raised {failure}" if failure else ""
        return "failed", f"exit code {exit_code} before any check passed{raised}"
    return "error", f"exit code {exit_code} disagrees with report passed={report.passed}"


@dataclass(frozen=True)
class Left:
    """A file a program left in its scratch folder, read as hostile input (``safe_read``, kind ``left``: a
    regular file of its own, never a link, at most ``LIMITS["left"]`` bytes) and redacted like the streams."""

    data: bytes | None
    """The bytes as kept (redacted); None when the file is missing or refused."""
    redactions: dict[RedactionRule, int]
    refused: InputRefused | None = None
    """Why a file that is there was not read (a link, a FIFO, a hard link, over the cap): one line."""

    @property
    def why_not(self) -> str:
        """How a reason names a file that was not read: "" when it was, or is simply missing."""
        return f" ({self.refused.problem})" if self.refused else ""


def read_left(folder: Path, name: str) -> Left:
    """``folder/name`` as :class:`Left` says: never followed, never read past its cap, whole or not at all."""
    try:
        raw = read_bytes(folder, name, "left", name)
    except InputRefused as e:
        return Left(None, {}, None if e.kind == "missing" else e)
    data, redactions = redact(raw)
    return Left(data, redactions)


def _read_report(folder: Path) -> tuple[CheckReport | None, Left, str | None]:
    """The report as kept (redacted, like the streams), parsed from those same bytes; a report that is not
    a regular file of its own under the cap is "wrote no check report", with why."""
    left = read_left(folder, REPORT)
    if left.refused is not None:
        return None, left, f"wrote no check report it may read{left.why_not}"
    if left.data is None:
        return None, left, None
    try:
        return CheckReport.model_validate_json(left.data), left, None
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        return None, left, f"check report invalid at {field or '(root)'}: {err['msg']}"


def _read_failure(folder: Path) -> tuple[ProgramFailure | None, dict[RedactionRule, int]]:
    """What the launcher wrote, redacted like the streams (an exception's message can quote a credential);
    None when the program raised nothing, or it is not what the launcher writes (a link, a FIFO, another
    shape): the exit code and the report are the verdict either way."""
    left = read_left(folder, FAILURE)
    if left.data is None:
        return None, {}
    try:
        return ProgramFailure.model_validate_json(left.data), left.redactions
    except ValidationError:
        return None, {}


@dataclass(frozen=True)
class RunOptions:
    """What a program's run may be given beyond its argv, environment and deadline (``run_program``)."""

    cap: int | None = None
    """Bytes kept of each stream (None: ``process.output_cap``'s default)."""
    python: bool = False
    """argv is ``[interpreter, program]``, started through ``toolchain.launch`` to keep the exception that ends it."""
    writable: tuple[Path, ...] = ()
    """Folders besides its report folder it writes (a bench's results folder)."""
    checker: outside_check.Checker | None = None
    """The session's own checker of handed-over outputs (``outside_check.session``); None: one for this program
    alone."""


def run_program(root: Path, run_id: str, stem: str, argv: list[str], env: dict[str, str], timeout: float,
                options: RunOptions = RunOptions()) -> Outcome:
    """Run argv with ``--report`` appended (a path in the step's ``scratch_dir``) behind the wall
    (``runner.wall``); its whole process tree dies at ``timeout``; ``options``: ``RunOptions``."""
    with contextlib.ExitStack() as stack:
        mine = options.checker or stack.enter_context(outside_check.session(root))
        return _run(root, run_id, stem, argv, env, timeout, dataclasses.replace(options, checker=mine))


def _run(root: Path, run_id: str, stem: str, argv: list[str], env: dict[str, str], timeout: float,
         options: RunOptions) -> Outcome:
    checker = options.checker
    assert checker is not None  # run_program gives one
    with scratch_dir(checker.handovers) as tmp:
        report_path, failure_path = tmp / REPORT, tmp / FAILURE
        launched = [argv[0], str(LAUNCHER), str(failure_path), *argv[1:]] if options.python else argv
        full = [*launched, "--report", str(report_path)]
        started = datetime.now(timezone.utc)
        done = start_and_wait(full, env=env, cwd=root, timeout=timeout, cap=options.cap, scratch=tmp,
                              wall=Wall(root, (tmp, *options.writable)))
        report, left, problem = _read_report(tmp)
        failure, failure_redactions = _read_failure(tmp)
        outside = outside_check.check(checker, run_id, tmp, report, timeout) \
            if report is not None and report.gate == "ok" and not done.timed_out else None
    program_verdict, reason = verdict_of(done.exit_code, done.timed_out, report, problem, failure)
    verdict, reason = outside_check.combine(program_verdict, reason, report, outside)
    found = diagnose((done.stdout + done.stderr).decode(errors="replace"), done.exit_code)
    if found and verdict not in ("passed",):
        reason += "; " + "; ".join(f"{d.title} (fix: {d.fix})" for d in found)
    if done.strays_killed:
        reason += f"; {done.strays_killed} process(es) it left running were killed"
    tag = "-gate" if verdict in ("gated", "no-gpu") else ""
    step = to_step(root, run_id, stem, started, done, f"{stem}{tag}-stdout.txt", f"{stem}{tag}-stderr.txt")
    if left.redactions or failure_redactions:
        step = step.model_copy(update={"redactions": merge(step.redactions, left.redactions, failure_redactions)})
    report_file = write_evidence(root, run_id, REPORT, left.data) if left.data is not None else None
    return Outcome(step=step, report=report, report_file=report_file, verdict=verdict, reason=reason,
                   failure=failure, report_refused=left.refused.kind if left.refused else None, outside=outside)
