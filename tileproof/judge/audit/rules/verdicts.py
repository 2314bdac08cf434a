"""A run's verdict against its exit code and its check report, and the report against its transcript."""

from __future__ import annotations

import json

from tileproof.judge.audit.audit_rules import Context, check, rule
from tileproof.judge.audit.result import Issue
from tileproof.records.models import CheckReport, RunRecord, Transcript, TranscriptRef

EXIT_CODE = rule("verdict-exit-code", "a run's verdict disagrees with its exit code or timeout")
REPORT = rule("verdict-report", "a run's verdict disagrees with its check report (gate, checks, passed)")
TRANSCRIPT = rule("report-transcript",
                  "the check report inside a run record differs from its check-report.json transcript")


def expected_report_passed(report: CheckReport) -> bool:
    """What kernels/harness.py computes: gate ok, at least one check, all passed."""
    return report.gate == "ok" and bool(report.checks) and all(c.passed for c in report.checks)


def verdict_issues(rec: RunRecord) -> list[Issue]:
    """passed ⇔ exit 0, report passed, gate ok; gated ⇔ gate below-sm80, exit ≠ 0;
    no-gpu ⇔ gate no-gpu (or no report and no GPU), exit ≠ 0; failed ⇔ exit ≠ 0,
    gate ok, a check failed; timeout ⇔ the step timed out; error: anything else
    that is not a pass in disguise."""
    step, report, verdict = rec.step, rec.report, rec.verdict
    code = step.exit_code
    out: list[Issue] = []
    if step.timed_out and verdict != "timeout":
        out.append((EXIT_CODE, f"verdict {verdict} but the step timed out"))
    elif verdict == "timeout" and not step.timed_out:
        out.append((EXIT_CODE, f"verdict timeout but the step did not time out (exit {code})"))
    elif verdict == "passed" and code != 0:
        out.append((EXIT_CODE, f"verdict passed but exit code {code}"))
    elif verdict in ("failed", "gated", "no-gpu") and code in (0, None):
        out.append((EXIT_CODE, f"verdict {verdict} but exit code {code}"))

    if report is not None and report.passed != expected_report_passed(report):
        failed = sum(not c.passed for c in report.checks)
        out.append((REPORT, f"report.passed is {report.passed} but gate {report.gate}, "
                                      f"{len(report.checks)} checks, {failed} failed"))
    gate = report.gate if report is not None else None
    failing = [c.name for c in report.checks if not c.passed] if report is not None else []
    if verdict == "passed":
        if report is None:
            out.append((REPORT, "verdict passed without a check report"))
        elif gate != "ok" or not report.passed or failing or not report.checks:
            not_passed = f"checks failed: {', '.join(failing)}" if failing else "report not passed"
            why = f"gate {gate}" if gate != "ok" else not_passed
            out.append((REPORT, f"verdict passed but the check report says {why}"))
    elif verdict == "gated" and gate != "below-sm80":
        out.append((REPORT, f"verdict gated but the check report's gate is {gate or 'absent'}"))
    elif verdict == "no-gpu" and gate != "no-gpu" and not (report is None and rec.environment.gpu is None):
        out.append((REPORT, f"verdict no-gpu but the check report's gate is {gate or 'absent'} "
                                      f"and the environment has a GPU"))
    elif verdict == "failed":
        if report is None:
            out.append((REPORT, "verdict failed without a check report (a crash is 'error')"))
        elif gate != "ok":
            out.append((REPORT, f"verdict failed but the check report's gate is {gate}"))
        elif report.passed and not failing:
            out.append((REPORT, "verdict failed but every check in the report passed"))
    elif verdict == "error" and code == 0 and report is not None and expected_report_passed(report):
        out.append((REPORT, "verdict error but exit code 0 and every check passed"))
    return out


def report_diff(embedded: dict | None, text: bytes) -> list[str] | str:
    """Top-level keys in which a record's check report (as JSON) and its
    check-report.json transcript differ, or a problem with the transcript.
    Compared as JSON values, so the harness's key order and float spelling
    do not matter."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the JSON reader
        return "is not valid JSON"
    if not isinstance(raw, dict):
        return "is not a JSON object"
    if embedded is None:
        return "holds a check report the record lacks"
    missing = object()
    return [k for k in sorted(set(embedded) | set(raw)) if embedded.get(k, missing) != raw.get(k, missing)]


def report_transcript_issues(report_file: Transcript | TranscriptRef | None, has_report: bool,
                             diff: list[str] | str | None) -> list[Issue]:
    """A run record's ``report_file`` and whether it carries a ``report``, against ``diff``: ``report_diff`` of
    the record and its transcript; None when there is no trustworthy transcript (the evidence rules report that)."""
    if report_file is None:
        if has_report:
            return [(TRANSCRIPT, "record carries a check report but no check-report.json transcript")]
        return []
    if diff is None or diff == []:
        return []
    if isinstance(diff, str):
        return [(TRANSCRIPT, f"{report_file.path} {diff}")]
    return [(TRANSCRIPT, f"check report differs from {report_file.path} in {', '.join(diff)}")]



@check(RunRecord)


def _verdict(rec: RunRecord, ctx: Context) -> list[Issue]:
    return verdict_issues(rec)
