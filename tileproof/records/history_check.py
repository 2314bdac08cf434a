"""Nothing committed under runs/ or evidence/ is deleted or rewritten unseen.

Git history is the append-only log every clone carries: each record and
transcript keeps, forever, the bytes of its first commit (one file per record
and unique run ids keep merges from many GPU hosts free of conflicts). This
module is the pure half: :func:`check` compares each file's first committed
version with the working tree as gathered by ``runner.git_history.read`` (the only
code that starts git). A checkout without history (no git, no repository, a
shallow clone) is ``no-history``: it could not be checked, which is never a pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tileproof.records.errors import one_line

WATCHED = ("runs", "evidence")
"""Top-level folders whose committed files never change."""

REGENERATED = frozenset({"evidence/AUDIT.md", "evidence/audit.html"})
"""Watched files rewritten on purpose: the audit's own reports (``gather.audit`` takes
``REPORT_MD``/``REPORT_HTML`` and its orphan exemptions from here)."""

HistoryStatus = Literal["checked", "no-history"]
HistoryProblem = Literal["missing", "changed", "refused"]
"""``refused``: the path is now a link, FIFO, device or folder, or cannot be read; the reader never
follows or opens such a thing (``records.safe_read``), so it is not the file first committed."""


@dataclass(frozen=True)
class Unhashed:
    """A working-tree file the reader did not hash, and why (``runner.git_history.read``)."""

    problem: Literal["changed", "refused"]
    """``changed``: larger than any file of its folder tileproof writes or reads (not read at all)."""
    why: str
    """One line, in ``records.safe_read``'s words."""


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
    current: Mapping[str, str | Unhashed | None]
    """Path → object id of the working-tree file now; None when it is missing; ``Unhashed`` when it
    was not read (a link, a special file, over its size cap)."""


@dataclass(frozen=True)
class NoHistory:
    """No usable history here, and why (one line)."""

    reason: str


@dataclass(frozen=True)
class HistoryFinding:
    """A once-committed file that is now missing, changed or not a regular file."""

    path: str
    problem: HistoryProblem
    commit: str
    """The commit that first added it (restore from there)."""
    why: str = ""
    """For a file that was not read: what the reader found instead (``Unhashed.why``)."""

    def what(self) -> str:
        """``is missing``, ``differs from its first committed version`` or ``is not ...``, with the reader's why."""
        if self.problem == "missing":
            return "is missing"
        if self.problem == "refused":
            return f"is not the regular file first committed ({self.why})"
        return "differs from its first committed version" + (f" ({self.why})" if self.why else "")

    def __str__(self) -> str:
        return one_line(f"{self.path}: {self.what()} (committed in {self.commit[:12]}; records and transcripts "
                        f"are never deleted or edited; fix: git checkout {self.commit[:12]} -- {self.path})")


@dataclass(frozen=True)
class AtCommits:
    """What the git reader found at the commits records name (``runner.git_history.at_commits``)."""

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


def blob_hasher(size: int, object_format: ObjectFormat = "sha1"):
    """A hash that, fed a file's ``size`` bytes, gives git's object id of it (``git hash-object``)."""
    return hashlib.new(object_format, b"blob %d\0" % size)


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
        elif isinstance(now, Unhashed):
            findings.append(HistoryFinding(first.path, now.problem, first.commit, now.why))
        elif now != first.blob:
            findings.append(HistoryFinding(first.path, "changed", first.commit))
    return HistoryReport("checked", f"{files} committed files under {', '.join(WATCHED)}: "
                                    f"{len(findings) or 'none'} missing or changed", files, tuple(findings))
