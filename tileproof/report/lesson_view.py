"""The lessons section's view model: each row's state and why, from the publish decision only.

Pure. ``lesson_rows(lesson)`` gives one row per results row, performance claim and
refuted claim of the lesson's ``gate.Decision``; ``blocker_lines(lesson)`` says
what keeps the lesson from publishing, one line per ``Decision.blockers`` entry:
what the state means (``MEANING``), the decision's own reason (which input changed,
which check failed, which record was not counted and why) and the fix. Nothing
here re-derives a verdict: every word about a row comes from its decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from tileproof.judge.audit.result import LessonAudit

MEANING: dict[str, str] = {
    "no-record": "no run record backs it yet",
    "failed": "the deciding run did not pass this check",
    "gated": "it ran only on a GPU below compute capability 8.0",
    "stale": "an input changed after the deciding run, so the run no longer attests today's files",
    "forged-cc": "the GPU's compute capability could not be confirmed from the run's own transcripts",
    "incoherent-toolchain": "the run's toolchain mixes CUDA releases",
    "out-of-bounds": "the check ran at a looser tolerance than the table allows",
    "missing-file": "the program named by the lesson does not exist",
    "no-bench-record": "no bench record backs the performance claim",
    "wrong-hardware": "bench records exist, but from another GPU than the claim names",
    "below-claim": "the measured value is below the claimed bound",
    "spread-exceeds-margin": "the margin over the claim is smaller than the measurement's spread",
    "noisy": "the deciding case is noisy (spread above 10%)",
    "refuted": "the claims records refute a claim the document still asserts",
}
"""Each non-passing outcome of the decision, in words a reviewer can act on."""


@dataclass(frozen=True)
class LessonRow:
    """One line of a lesson's table: a results row, a performance claim or a refuted claim."""

    program: str
    check: str
    outcome: str
    run_id: str | None
    why: str
    """Passed: what the record showed (never just its run id); otherwise the decision's reason."""
    command: str | None
    counted: bool
    """True when the row passed (or is supported), or does not block (an optional row)."""


def lesson_rows(lesson: LessonAudit) -> list[LessonRow]:
    """Every results row, performance claim and refuted claim of the lesson's publish decision."""
    d = lesson.decision
    out = []
    for r in d.rows:
        # A passed row says what the record showed; its reason adds only which records were not counted, and why.
        why = r.reason if r.outcome != "passed" else f"check {r.result}" + (f"; {r.ignored_note}" if r.ignored else "")
        out.append(LessonRow(r.row.program, r.row.check + (" (optional)" if r.row.optional else ""), r.outcome,
                             r.record.run_id if r.record else None, why, r.command, not r.blocks))
    out += [LessonRow(c.claim.program, f"perf:{c.claim.id}", c.outcome, c.record.run_id if c.record else None,
                      c.reason, c.command, c.supported) for c in d.perf]
    out += [LessonRow("-", f"claim:{c.claim_id}", "refuted", c.run_id, c.reason, c.command, False) for c in d.refuted]
    return out


def blocker_lines(lesson: LessonAudit) -> list[tuple[str, str, str | None]]:
    """(what, why in words, fix) for each blocker of the decision, in its order."""
    out = []
    for b in lesson.decision.blockers:
        meaning = MEANING.get(b.outcome, b.outcome)
        out.append((f"{b.subject}: {b.outcome}", f"{meaning}: {b.reason}", b.command))
    return out


def verdict_text(lesson: LessonAudit) -> str:
    """``publishable``, or what it lacks (the decision's own words)."""
    return "publishable" if lesson.publishable else lesson.decision.lacking()
