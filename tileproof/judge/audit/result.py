"""What the audit found: findings (``records.findings.Finding``), each lesson's publish decision, and the counts the
reports show."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from tileproof.judge import gate
from tileproof.judge.claim_verdicts import ClaimsToday
from tileproof.judge.release_matrix import LessonReleases
from tileproof.judge.releases import ReleaseKey
from tileproof.judge.trust.trust_root import TrustReport
from tileproof.records.errors import one_line
from tileproof.records.findings import Finding
from tileproof.records.history_check import HistoryReport
from tileproof.records.models import PlausibilityNote, RunRecord

Issue = tuple[str, str]
"""(rule id, reason): what a pure rule returns; the orchestrator adds the file."""


@dataclass(frozen=True)
class LessonAudit:
    """A lesson as the audit sees it: its front matter's facts and the one publish decision."""

    id: str
    file: str
    title: str
    status: str
    programs: list[str]
    decision: gate.Decision
    releases: LessonReleases | None = None
    """Its Python programs x the cuda-tile releases their records were made with (``judge.release_matrix``)."""
    notes: tuple[PlausibilityNote, ...] = ()
    """The plausibility signals its front matter explains (``LessonFront.plausibility``)."""

    @property
    def publishable(self) -> bool:
        return self.decision.publishable

    @property
    def missing(self) -> list[gate.RowDecision]:
        """Required rows the decision does not accept today."""
        return self.decision.missing

    def summary(self) -> str:
        """``lessons/x.md: draft, 1/2 required rows have evidence; missing: ...`` (every blocker)."""
        required = [r for r in self.decision.rows if not r.row.optional]
        ready = sum(1 for r in required if r.outcome == "passed")
        head = f"{self.file}: {self.status}, {ready}/{len(required)} required rows have evidence"
        blockers = self.decision.blockers
        if not blockers:
            return one_line(head)
        return one_line(head + "; missing: " + "; ".join(
            f"{b}" + (f" (fix: {b.command})" if b.command else "") for b in blockers))


@dataclass(frozen=True)
class ClaimsFileToday:
    """A document's claims file as the audit read it today: what the decision reads, and each claim's words."""

    today: ClaimsToday
    statements: dict[str, str]
    """Claim id → the claim in the project's words (the file's order)."""
    sources: dict[str, str]
    """Claim id → where the document makes it: path, section and quote."""


NO_GPU = ("no GPU", "")


def gpu_column(rec: RunRecord) -> tuple[str, str]:
    """The report's GPU column of a run record: (GPU name, compute capability), or ``NO_GPU``."""
    gpu = rec.environment.gpu
    return (gpu.name, gpu.compute_capability) if gpu else NO_GPU


class TableRow(NamedTuple):
    """What the report's run table reads of one run record (:func:`table_row`): its place, and the name of its file
    under runs/ (the newest of each place is read again in full: :meth:`RunTable.resolve`)."""

    name: str
    program: str
    column: tuple[str, str]
    """:func:`gpu_column`."""
    created: datetime
    run_id: str
    verdict: str
    session_id: str


def table_row(name: str, rec: RunRecord) -> TableRow:
    return TableRow(name, rec.program, gpu_column(rec), rec.created, rec.run_id, rec.verdict,
                    rec.environment.session_id)


@dataclass
class RunTable:
    """What the report shows of the run records, gathered one record at a time (:meth:`add`): an audit keeps
    this, not the records, so its memory grows with the programs and GPUs, not with the records. Per (program,
    GPU column): its newest record and how many ran."""

    newest: dict[tuple[str, tuple[str, str]], RunRecord] = field(default_factory=dict)
    """Filled by :meth:`resolve`, once every record was added."""
    runs: Counter = field(default_factory=Counter)
    """(program, GPU column) → its run records."""
    verdicts: Counter = field(default_factory=Counter)
    """Verdict → run records."""
    sessions: set[str] = field(default_factory=set)
    """Every run record's session id."""
    rows: dict[tuple[str, tuple[str, str]], TableRow] = field(default_factory=dict)
    """(program, GPU column) → its newest record's row."""

    def add(self, row: TableRow) -> None:
        key = (row.program, row.column)
        old = self.rows.get(key)
        if old is None or (old.created, old.run_id) < (row.created, row.run_id):
            self.rows[key] = row
        self.runs[key] += 1
        self.verdicts[row.verdict] += 1
        self.sessions.add(row.session_id)

    def resolve(self, record_of: Callable[[str], RunRecord]) -> None:
        """:attr:`newest` from the newest rows: ``record_of`` reads the record of a file name under runs/."""
        self.newest = {key: record_of(row.name) for key, row in self.rows.items()}


@dataclass
class AuditResult:
    root: Path
    findings: list[Finding]
    records: list
    """Every record that validated, oldest first, but run records: those are in :attr:`runs`."""
    lessons: list[LessonAudit]
    evidence_files: int
    evidence_bytes: int
    record_files: int
    bad_records: set[str] = field(default_factory=set)
    """Record names (``runs/<name>.json``) with a finding against them or their evidence."""
    claims_files: dict[str, ClaimsFileToday | str] = field(default_factory=dict)
    """Document id → its claims file today (which claims it still asserts), or why it cannot be read."""
    history: HistoryReport | None = None
    """The git-history check (``runner.git_history``); None only for a result built without one."""
    cuda_tile_lock: ReleaseKey | None = None
    """The lock's cuda-tile release (``constraints.txt``): the only one whose exports the report's compile column
    shows (``releases.exports_rest_on``); None when the tree pins none."""
    trust: TrustReport | None = None
    """The trust root, the range checked and every registry change in it (``judge.trust.trust_root``)."""
    index_notes: tuple[str, ...] = ()
    """What the verified-file index had to say (``catalog.index.Index.notes``: entries ignored, an index
    not usable); printed, never a finding: the index changes no verdict."""
    scope: str | None = None
    """``audit --since REV``: what was audited (one line); None for a full audit."""
    runs: RunTable = field(default_factory=RunTable)
    """The run records that validated, as the report shows them."""
    validated: int = 0
    """How many records validated (run records included)."""
    notices: list[Finding] = field(default_factory=list)
    """What rests on a committer's word (``judge.audit.rules.reviewer``: a plausibility signal a lesson's front
    matter alone settles, a move of the tree's pin in the trust range): a line of the printed audit and a section
    of both reports, no finding; under ``strict`` each is among ``findings`` too."""
    strict: bool = False
    """``audit --strict``, the reviewer's mode: the notices are findings."""
    unisolated: tuple[str, ...] = ()
    """Run ids of the records a step of which ran without a wall (``Step.isolation`` ``none``)."""

    def unisolated_line(self) -> str | None:
        """One line listing the records whose programs ran without a wall; None when none did."""
        if not self.unisolated:
            return None
        n = len(self.unisolated)
        return one_line(f"unisolated: {n} record{'s' * (n != 1)} ran programs without a wall (isolation none; each "
                        f"counts only when signed by a key allowed unisolated runs): {', '.join(self.unisolated)}")

    @property
    def ok(self) -> bool:
        """No finding. Says nothing about history: see :attr:`history_checked`."""
        return not self.findings

    @property
    def history_checked(self) -> bool:
        """Whether the history check ran (its findings, if any, are among ``findings``)."""
        return self.history is not None and self.history.status == "checked"

    def history_line(self) -> str:
        """``history: checked (...)`` or, loudly, ``history: NOT CHECKED (...)``: never a pass when not checked."""
        if self.history is None:
            return "history: NOT CHECKED (not asked)"
        if self.history.status != "checked":
            return f"history: NOT CHECKED ({self.history.reason})"
        return f"history: checked ({self.history.reason})"

    def summary_line(self, written: list[Path] | None = None) -> str:
        """The audit's last line: what was read, what was found, what was written."""
        n = len(self.findings)
        wrote = f"; wrote {' and '.join(map(str, written))}" if written else "; wrote no report"
        k = len(self.notices)
        noted = "" if self.strict or not k else f", {k} notice{'s' * (k != 1)} (findings under --strict)"
        return one_line(f"audit: {self.validated} records, {self.evidence_files} evidence files, "
                        f"{len(self.lessons)} lessons: {n} finding{'s' * (n != 1)}{noted}{wrote}; "
                        f"{self.history_line()}"
                        + (f"; trust range {self.trust.range}" if self.trust is not None and self.trust.checked
                           else ""))
