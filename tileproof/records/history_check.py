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
from typing import Literal, NamedTuple

from tileproof.records.findings import Finding

WATCHED = ("runs", "evidence")
"""Top-level folders whose committed files never change."""

REGENERATED = frozenset({"evidence/AUDIT.md", "evidence/audit.html"})
"""Watched files rewritten on purpose: the audit's own reports (``gather.audit`` takes
``REPORT_MD``/``REPORT_HTML`` and its orphan exemptions from here)."""

HistoryStatus = Literal["checked", "no-history"]
HistoryProblem = Literal["missing", "changed", "refused"]
"""``refused``: the path is now a link, FIFO, device or folder, or cannot be read; the reader never
follows or opens such a thing (``records.safe_read``), so it is not the file first committed."""
HISTORY: dict[HistoryProblem, str] = {"missing": "history-missing", "changed": "history-changed",
                                      "refused": "history-refused"}
"""Rule id of each history problem (``judge.audit.rules.history`` registers them)."""
VERB: dict[HistoryProblem, str] = {"missing": "deleted", "changed": "edited", "refused": "replaced"}
"""What was done to the once-committed file, as each history finding words it."""


@dataclass(frozen=True)
class Unhashed:
    """A working-tree file the reader did not hash, and why (``runner.git_history.read``)."""

    problem: Literal["changed", "refused"]
    """``changed``: larger than any file of its folder tileproof writes or reads (not read at all)."""
    why: str
    """One line, in ``records.safe_read``'s words."""


class FirstVersion(NamedTuple):
    """A watched path's first committed version (a named tuple: the git reader makes one per file ever
    committed, and a frozen dataclass costs four times as much to make)."""

    path: str
    commit: str
    blob: str
    """Its git object id (sha1 or sha256, as the repository's object format)."""


@dataclass(frozen=True)
class GitHistory:
    """What the git reader gathered: first versions and the working tree's object ids."""

    first: tuple[FirstVersion, ...]
    """The first versions to compare with the working tree: every watched file's, or, when git's index vouches
    that a file is its first version (``runner.git_history``'s cached comparison), every other one's."""
    current: Mapping[str, str | Unhashed | None]
    """Path → object id of the working-tree file now; None when it is missing; ``Unhashed`` when it
    was not read (a link, a special file, over its size cap)."""
    vouched: int = 0
    """Committed files left out of ``first`` because git's index vouches each is its first version: counted,
    never a finding (none of them is a path of ``REGENERATED``)."""
    records: Mapping[str, str] | None = None
    """Path under runs/ → the commit that first added it, for every committed record; None: as ``first`` says."""

    def record_commits(self) -> Mapping[str, str]:
        """Path under runs/ → the commit that first added it, for every committed record."""
        if self.records is not None:
            return self.records
        return {f.path: f.commit for f in self.first if f.path.startswith(f"{WATCHED[0]}/")}


@dataclass(frozen=True)
class NoHistory:
    """No usable history here, and why (one line)."""

    reason: str


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
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    """One per once-committed file now missing, changed or not a regular file (:func:`finding`)."""


ObjectFormat = Literal["sha1", "sha256"]
"""The object formats git has (``git rev-parse --show-object-format``)."""


def blob_hasher(size: int, object_format: ObjectFormat = "sha1"):
    """A hash that, fed a file's ``size`` bytes, gives git's object id of it (``git hash-object``)."""
    return hashlib.new(object_format, b"blob %d\0" % size)


def finding(path: str, problem: HistoryProblem, commit: str, why: str = "") -> Finding:
    """The finding for a once-committed file now missing, changed or not a regular file: ``commit`` first
    added it (restore it from there); ``why``: for a file that was not read, what the reader found instead."""
    why = f" ({why})" if why else ""
    return Finding(path, HISTORY[problem], f"{VERB[problem]} after commit {commit[:12]}, which first added it{why}; "
                   f"records and transcripts are never deleted or edited (fix: git checkout {commit[:12]} -- {path})")


def check(history: GitHistory | NoHistory, regenerated: frozenset[str] = REGENERATED) -> HistoryReport:
    """Every watched file ever committed, against the working tree. ``regenerated``:
    paths a command rewrites on purpose (the audit's own reports under evidence/)."""
    if isinstance(history, NoHistory):
        return HistoryReport("no-history", f"could not check that committed records and transcripts are "
                                           f"unchanged: {history.reason}")
    findings = []
    files = history.vouched
    for first in history.first:
        if first.path in regenerated:
            continue
        files += 1
        now = history.current.get(first.path)
        if now is None:
            findings.append(finding(first.path, "missing", first.commit))
        elif isinstance(now, Unhashed):
            findings.append(finding(first.path, now.problem, first.commit, now.why))
        elif now != first.blob:
            findings.append(finding(first.path, "changed", first.commit))
    return HistoryReport("checked", f"{files} committed files under {', '.join(WATCHED)}: "
                                    f"{len(findings) or 'none'} missing or changed", files, tuple(findings))
