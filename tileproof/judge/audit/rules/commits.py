"""Commits: a record's ``git.commit`` is a claim, checked against this repository's history.

A record names the commit its machine had checked out and whether the tree was
dirty (``runner.capture.git_state``). The audit checks the claim where history
exists: the commit must be in this repository's history, and a record that says
it was clean must attest exactly that commit's files (every source it attests,
by sha256, is that commit's blob). A record with no commit (``commit: null``, a
node whose copy had no ``.git``) claims nothing and is not checked here; a dirty
one only claims its commit. Without history nothing is checked (the audit says so).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.records.history_check import AtCommits
from tileproof.records.models import (
    BenchRecord,
    ClaimsRecord,
    CompileRecord,
    FileDigest,
    RunRecord,
    share,
)

UNKNOWN = rule("record-commit-unknown", "a record names a git commit that is not in this repository's history")
MISMATCH = rule("record-commit-mismatch", "a record says its tree was clean at a commit, but a source it attests "
                                          "is not that commit's file")


def attested(record) -> list[FileDigest]:
    """The repository files a record attests (the ones a commit holds; not transcripts or builds)."""
    if isinstance(record, (RunRecord, CompileRecord, BenchRecord)):
        return list(record.sources)
    if isinstance(record, ClaimsRecord):
        return list(record.claims_files)
    return []


class Claim(NamedTuple):
    """What these rules read of one record (kept for every record of the tree: plain values, not its models): the
    commit it names, whether its tree was dirty, and (path, sha256) of each file it attests."""

    commit: str | None
    dirty: bool
    files: tuple[tuple[str, str], ...]


def claim_of(record) -> Claim:
    return Claim(share(record.git.commit), record.git.dirty, share(tuple((f.path, f.sha256) for f in attested(record))))


def wanted(claims: Iterable[Claim]) -> tuple[set[str], set[tuple[str, str]]]:
    """The commits records name, and (commit, path) for every source those records attest."""
    named = [(c.commit, c) for c in claims if c.commit]
    return ({commit for commit, _c in named},
            {(commit, path) for commit, c in named if not c.dirty for path, _sha in c.files})


def commit_issues(claim: Claim, found: AtCommits) -> list[Issue]:
    """Whether the record's commit exists, and (when it says clean) whether its sources are that commit's."""
    commit = claim.commit
    if not commit:
        return []
    if not found.known.get(commit, False):
        return [(UNKNOWN, (f"git.commit {commit[:12]} is not in this repository's history (fix: fetch the branch "
                           f"that holds it, or restore the node's .git from a bundle before running)"))]
    if claim.dirty:
        return []
    out = []
    for path, sha256 in claim.files:
        at = found.sha256.get((commit, path))
        if at != sha256:
            what = "has no such file" if at is None else f"holds sha256 {at[:12]}…"
            out.append((MISMATCH, (f"{path}: the record attests sha256 {sha256[:12]}… and says the tree was "
                                   f"clean at {commit[:12]}, which {what} (fix: commit the sources before running)")))
    return out
