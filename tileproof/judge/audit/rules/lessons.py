"""Lessons: readable front matter, and a published lesson that the one publish decision still accepts."""

from __future__ import annotations

from tileproof.judge.audit.registry import rule
from tileproof.judge.audit.result import Issue
from tileproof.judge.gate import Decision

FRONT = rule("lesson-front", "a lesson's front matter cannot be read")
UNSUPPORTED = rule("lesson-published-without-evidence",
                   "a published lesson lacks, today, the evidence the publish decision requires")
TABLE = rule("lesson-table-not-derived",
             "a published lesson's compile-derived table (res-usage) is not what the compile records give today")
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


def table_issues(status: str, decision: Decision, body_tables: dict[str, str | None]) -> list[Issue]:
    """A published lesson's compile-derived tables must read what the decision derives from the
    records today (``Decision.published_blocks``); ``body_tables``: marker name → the body's text
    between its markers (None when the markers are missing)."""
    if status != "published":
        return []
    out = []
    for name, want in decision.published_blocks().items():
        found = body_tables.get(name)
        if found is None:
            out.append((TABLE, f"the body has no '<!-- {name}:begin -->' ... '<!-- {name}:end -->' table"))
        elif found != "\n" + want:
            out.append((TABLE, f"the {name} table differs from what the compile records give today "
                               f"(fix: nox -s publish -- {decision.lesson}, from a draft)"))
    return out
