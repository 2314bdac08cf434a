"""Nothing committed under runs/ or evidence/ is deleted or rewritten unseen.

Git history is the append-only log every clone carries: each record and
transcript keeps, forever, the bytes of its first commit (one file per record
and unique run ids keep merges from many GPU hosts free of conflicts). This
module is the pure half: :func:`check` compares each file's first committed
version with the working tree as gathered by ``runner.history.read`` (the only
code that starts git). A checkout without history (no git, no repository, a
shallow clone) is ``no-history``: it could not be checked, which is never a pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

WATCHED = ("runs", "evidence")
"""Top-level folders whose committed files never change."""

REGENERATED = frozenset({"evidence/AUDIT.md", "evidence/audit.html"})
"""Watched files rewritten on purpose: the audit's own reports (``gather.audit`` takes
``REPORT_MD``/``REPORT_HTML`` and its orphan exemptions from here)."""

HistoryStatus = Literal["checked", "no-history"]
Problem = Literal["missing", "changed"]


@dataclass(frozen=True)
class FirstVersion:
    """A watched path's first committed version."""

    path: str
    commit: str
    blob: str
    """Its git object id (sha1 or sha256, as the repository's object format)."""


@dataclass(frozen=True)
class GitHistory:
    """What the git reader gathered: first versions and the working tree's object ids."""

    first: tuple[FirstVersion, ...]
    current: Mapping[str, str | None]
    """Path → object id of the working-tree file now; None when it is missing."""


@dataclass(frozen=True)
class NoHistory:
    """No usable history here, and why (one line)."""

    reason: str


@dataclass(frozen=True)
class HistoryFinding:
    """A once-committed file that is now missing or changed."""

    path: str
    problem: Problem
    commit: str
    """The commit that first added it (restore from there)."""

    def __str__(self) -> str:
        what = "is missing" if self.problem == "missing" else "differs from its first committed version"
        return (f"{self.path}: {what} (committed in {self.commit[:12]}; records and transcripts are never "
                f"deleted or edited; fix: git checkout {self.commit[:12]} -- {self.path})")


@dataclass(frozen=True)
class AtCommits:
    """What the git reader found at the commits records name (``runner.history.at_commits``)."""

    known: Mapping[str, bool]
    """Commit → whether it is in this repository's history."""
    sha256: Mapping[tuple[str, str], str | None]
    """(commit, path) → sha256 of the path's content at that commit; None when it has no such file."""


@dataclass(frozen=True)
class HistoryReport:
    status: HistoryStatus
    reason: str
    """One line: what was checked, or why it could not be."""
    files: int = 0
    """Watched files ever committed."""
    findings: tuple[HistoryFinding, ...] = field(default_factory=tuple)


ObjectFormat = Literal["sha1", "sha256"]
"""The object formats git has (``git rev-parse --show-object-format``)."""


def blob_id(data: bytes, object_format: ObjectFormat = "sha1") -> str:
    """Git's object id of a file with these bytes (``git hash-object``), computed in process."""
    return hashlib.new(object_format, b"blob %d\0" % len(data) + data).hexdigest()


def check(history: GitHistory | NoHistory, regenerated: frozenset[str] = REGENERATED) -> HistoryReport:
    """Every watched file ever committed, against the working tree. ``regenerated``:
    paths a command rewrites on purpose (the audit's own reports under evidence/)."""
    if isinstance(history, NoHistory):
        return HistoryReport("no-history", f"could not check that committed records and transcripts are "
                                           f"unchanged: {history.reason}")
    findings = []
    files = 0
    for first in history.first:
        if first.path in regenerated:
            continue
        files += 1
        now = history.current.get(first.path)
        if now is None:
            findings.append(HistoryFinding(first.path, "missing", first.commit))
        elif now != first.blob:
            findings.append(HistoryFinding(first.path, "changed", first.commit))
    return HistoryReport("checked", f"{files} committed files under {', '.join(WATCHED)}: "
                                    f"{len(findings) or 'none'} missing or changed", files, tuple(findings))
