"""Lessons: readable front matter, and a published lesson that the one publish decision still accepts."""

from __future__ import annotations

from tileproof.judge.audit.registry import rule
from tileproof.judge.audit.result import Issue
from tileproof.judge.gate import Decision

FRONT = rule("lesson-front", "a lesson's front matter cannot be read")
UNSUPPORTED = rule("lesson-published-without-evidence",
                   "a published lesson lacks, today, the evidence the publish decision requires")
SHOWN = 2
"""Blockers named in the finding (the rest counted)."""


def published_issues(status: str, decision: Decision) -> list[Issue]:
    """A published lesson must still be publishable: each blocker (row, performance claim or refuted
    claim) is named with its reason, which is never empty."""
    if status != "published" or decision.publishable:
        return []
    blockers = decision.blockers
    more = f" (+{len(blockers) - SHOWN} more)" if len(blockers) > SHOWN else ""
    return [(UNSUPPORTED, "published, but the publish decision lacks "
             + "; ".join(str(b) for b in blockers[:SHOWN]) + more)]
