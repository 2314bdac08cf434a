"""The audit's machine-readable summary as it is written (``audit --json PATH``): the on-disk shape.

``report.summary`` fills it from the same view models the reports render; ``schema/audit-summary.v1.schema.json``
is generated from ``AuditSummary`` (``nox -s schema``). Paths are repo-relative.
"""

from __future__ import annotations

from typing import Literal

from tileproof.records.models import BlockerKind, Model
from tileproof.records.schemas import schema

SUMMARY_VERSION: Literal[1] = 1


class FindingOut(Model):
    file: str
    rule: str
    reason: str


class RowOut(Model):
    program: str
    check: str
    state: str
    """The decision's outcome for the row (``passed``, ``stale``, ``supported``, ``refuted``...)."""
    run_id: str | None
    why: str
    fix: str | None
    blocks: bool


class BlockerOut(Model):
    kind: BlockerKind
    subject: str
    outcome: str
    reason: str
    fix: str | None


class LessonOut(Model):
    id: str
    file: str
    title: str
    status: str
    publishable: bool
    decision: str
    """``publishable``, or what it lacks."""
    rows: list[RowOut]
    blockers: list[BlockerOut]


class ClaimOut(Model):
    document: str
    claim: str
    asserted: bool | None
    """Whether today's claims file still asserts it; None when it no longer lists it."""
    deciding: str
    """The newest decisive verdict over every release (what the publish decision reads), or ``unchecked``."""
    refuted_and_asserted: bool
    verdicts: dict[str, str]
    """Toolchain release → verdict, for each release whose records checked the claim."""
    evidence: dict[str, str]
    """Toolchain release → the transcript to open first."""
    holds: str


class PairOut(Model):
    case: str
    reference: str
    pct_of_reference: float
    q1: float
    q3: float
    cycles: int
    control: bool


class BenchOut(Model):
    run_id: str
    program: str
    gpu: str | None
    compute_capability: str | None
    verdict: str
    counted: bool
    ceilings: dict[str, float]
    head_to_head: list[PairOut]


class HistoryOut(Model):
    program: str
    case: str
    metric: str
    run_ids: list[str]
    values: list[float]
    regressed: bool


@schema("audit-summary", SUMMARY_VERSION)
class AuditSummary(Model):
    """What ``tileproof audit --json`` writes."""

    summary_version: Literal[1]
    passed: bool
    """True when the audit has no finding (with ``history_checked``, its exit status is 0)."""
    history_checked: bool
    """Whether the git-history check ran (a tree without history cannot be checked)."""
    history_line: str
    """``history: checked (...)`` or ``history: NOT CHECKED (why)``."""
    records: int
    evidence_files: int
    findings: list[FindingOut]
    lessons: list[LessonOut]
    claims: list[ClaimOut]
    bench: list[BenchOut]
    history: list[HistoryOut]
    """Every case measured in two or more bench records."""
