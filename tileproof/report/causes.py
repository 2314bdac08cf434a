"""Findings grouped under their root cause: a wrong trust root is one finding, not a hundred.

Pure. Some findings make others inevitable: with a trust root that is not in the history
(``trust-root-not-in-history``) no key is trusted, so every signed record is
``record-unendorsed-key``; with the registry gone or emptied (``registry-missing``,
``registry-emptied``) every signed record is ``record-unknown-key``. ``CASCADES`` declares each
such cause and the record rule it forces. A record's finding under that rule follows from the cause;
a published lesson's ``lesson-published-without-evidence`` follows from it when every blocker of its
decision is a row, performance claim or compile table that ignored at least one record whose findings
all follow from the cause (with the root right, that record would have been there to count), and the
decision has no other blocker. Everything else stands on its own. ``grouped`` keeps every finding:
each is either a cause, under exactly one cause, or standalone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from tileproof.judge.audit.result import LessonAudit
from tileproof.judge.verdict import WITHOUT_EVIDENCE
from tileproof.records.findings import Finding
from tileproof.records.store import RUNS
from tileproof.report.shorten import plural

CASCADES: dict[str, str] = {
    "trust-root-not-in-history": "record-unendorsed-key",
    "registry-missing": "record-unknown-key",
    "registry-emptied": "record-unknown-key",
}
"""Cause rule → the record rule it forces on every signed record (``judge.trust.trust_root``, ``judge.trust``)."""


@dataclass(frozen=True)
class CauseGroup:
    cause: Finding
    consequences: tuple[Finding, ...]

    def counts(self) -> str:
        """``126 record-unendorsed-key, 3 lesson-published-without-evidence``."""
        return ", ".join(f"{n} {rule}" for rule, n in Counter(f.rule for f in self.consequences).most_common())


@dataclass(frozen=True)
class FindingsView:
    groups: tuple[CauseGroup, ...]
    """Each root cause with what follows from it, causes in the findings' order."""
    standalone: tuple[Finding, ...]
    """Findings no declared cause explains."""

    @property
    def total(self) -> int:
        return len(self.standalone) + sum(1 + len(g.consequences) for g in self.groups)

    def lead(self) -> str | None:
        """``1 root cause (trust-root-not-in-history) and 129 findings that follow from it``; None without one."""
        if not self.groups:
            return None
        follow = sum(len(g.consequences) for g in self.groups)
        rules = ", ".join(dict.fromkeys(g.cause.rule for g in self.groups))
        return (f"{plural(len(self.groups), 'root cause')} ({rules}) and {plural(follow, 'finding')} that follow "
                f"from {'it' if len(self.groups) == 1 else 'them'}")


def _run_id(file: str) -> str | None:
    path = PurePosixPath(file)
    return path.stem if path.parent.as_posix() == RUNS and path.suffix == ".json" else None


def _explained(lesson: LessonAudit, follows: set[str]) -> bool:
    """Whether every blocker of the lesson's decision ignored a record that counts only for the cause."""
    d = lesson.decision
    ignored: list[tuple[str, ...]] = [r.ignored for r in d.missing] + [c.ignored for c in d.unsupported]
    if d.res_usage is not None and not d.res_usage.holds:
        ignored.append(d.res_usage.ignored)
    blockers = d.blockers
    return bool(blockers) and len(blockers) == len(ignored) and all(follows & set(ids) for ids in ignored)


def _group(cause: Finding, findings: Sequence[Finding], lessons: Iterable[LessonAudit]) -> CauseGroup:
    forced = CASCADES[cause.rule]
    records = [f for f in findings if f.rule == forced and _run_id(f.file) is not None]
    by_record: dict[str, list[Finding]] = {}
    for f in findings:
        if (run_id := _run_id(f.file)) is not None:
            by_record.setdefault(run_id, []).append(f)
    follows = {run_id for run_id, fs in by_record.items() if all(f.rule == forced for f in fs)}
    explained = {lesson.file for lesson in lessons if _explained(lesson, follows)}
    lessons_found = [f for f in findings if f.rule == WITHOUT_EVIDENCE and f.file in explained]
    return CauseGroup(cause, tuple(records + lessons_found))


def grouped(findings: Sequence[Finding], lessons: Iterable[LessonAudit]) -> FindingsView:
    """The findings under their causes (see the module docstring)."""
    lessons = list(lessons)
    groups: list[CauseGroup] = []
    taken: set[int] = set()
    for cause in (f for f in findings if f.rule in CASCADES):
        if id(cause) in taken:
            continue
        group = _group(cause, [f for f in findings if id(f) not in taken and f is not cause], lessons)
        taken |= {id(cause)} | {id(f) for f in group.consequences}
        groups.append(group)
    return FindingsView(tuple(groups), tuple(f for f in findings if id(f) not in taken))


def in_order(view: FindingsView) -> list[Finding]:
    """Every finding once, each cause first with what follows from it, then the rest."""
    return [f for g in view.groups for f in (g.cause, *g.consequences)] + list(view.standalone)
