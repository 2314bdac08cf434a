"""``audit --since REV``: the part of the tree a merge (or a push) changed, for CI on every push.

What it audits, exactly (docs/records-and-staleness.md, "The verified-file index, and audit --since",
says the same):

- every record file under runs/ added or changed since REV (``git diff REV`` of the working tree,
  untracked files included), every record whose ``evidence/<run id>/`` folder holds a file added or
  changed since then, and, closing over sessions, each such run record's session record and each such
  session record's runs: each gets every per-record check a full audit makes (schema, seal, signature,
  name, report, its transcripts' digests, session consistency, plausibility, the commit it names);
- the transcripts those records reference and every file of their evidence folders (orphans included);
- the lessons they touch: each lesson whose results name an in-scope run record's program, or that the
  record names; every lesson when an in-scope record is not a run or session record (a bench, claims or
  compile record), or when anything outside runs/ and evidence/ changed (a lesson, a program, the
  tolerance table, the lock); each is re-judged as a full audit judges it (from the in-scope records and
  the records of the rest of the tree their facts choose: ``gather.tree.Tree.chosen``);
- the whole tree's history (every committed record and transcript, from git's and the index's object
  ids), trust root, registry changes, lesson inputs and claims files, as a full audit checks them.

When a file directly under evidence/ (in no run's folder) was added, changed or deleted since REV, it audits the
whole tree, and its scope line says why: any record may reference such a file, so its being an orphan, or a link
in a record's place, is a question only a full audit answers.

REV is a full commit id (``gather.given_commit``): HEAD or an ancestor of it. One that is not is a finding
(``since-not-ancestor``) and the whole tree is audited; an audit that judged no record and no lesson is a finding
too (``since-judged-nothing``): its scope line counts both.

What it does not: re-check the records outside that scope (their files are unchanged since REV, which
the history check confirms for every committed one). A full ``audit`` checks everything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tileproof.catalog import Catalog
from tileproof.gather import given_commit
from tileproof.judge.audit.result import Issue
from tileproof.judge.audit.rules import reviewer
from tileproof.records import store
from tileproof.records.errors import InputRefused, TileproofError, encodable
from tileproof.records.findings import Finding
from tileproof.records.history_check import GitHistory, NoHistory
from tileproof.records.models import LessonFront, RunRecord, SessionRecord
from tileproof.records.safe_read import read_bytes
from tileproof.runner import git_history
from tileproof.runner.query import Answer


@dataclass(frozen=True)
class Scope:
    """What ``audit --since`` audits (the module docstring)."""

    rev: str
    commit: str
    changed: frozenset[str]
    """Every path added, changed or deleted since ``commit``."""
    names: tuple[str, ...]
    """The record files (names in runs/) in scope, sorted."""
    head: str | None = None
    """HEAD's full id (None: no commit)."""
    ancestor: bool = True
    """Whether ``commit`` is HEAD or an ancestor of it (when it is not, the whole tree is audited, and it is a
    finding: ``judge.audit.rules.reviewer``)."""

    @property
    def at_head(self) -> bool:
        """Whether ``commit`` is HEAD: only what the working tree changed is in scope."""
        return self.commit == self.head

    @property
    def folders(self) -> tuple[str, ...]:
        """The evidence folders whose every file is checked: the in-scope records', and each changed one's."""
        mine = {f"{store.EVIDENCE}/{n[:-5]}" for n in self.names}
        mine |= {"/".join(p.split("/")[:2]) for p in self.changed if p.startswith(f"{store.EVIDENCE}/")
                 and p.count("/") >= 2}
        return tuple(sorted(mine))

    @property
    def beyond_records(self) -> bool:
        """Whether anything outside runs/ and evidence/ changed (then every lesson is re-judged)."""
        return any(not p.startswith((f"{store.RUNS}/", f"{store.EVIDENCE}/")) for p in self.changed)

    @property
    def loose_evidence(self) -> tuple[str, ...]:
        """The changed paths directly under evidence/ (in no run's folder): any record may reference such a file,
        so whether it is an orphan is a question about every record; ``audit --since`` audits the whole tree."""
        return tuple(sorted(p for p in self.changed if p.startswith(f"{store.EVIDENCE}/") and p.count("/") == 1))

    def touches(self, front: LessonFront, records: Iterable) -> bool:
        """Whether the lesson is re-judged: see the module docstring."""
        if self.beyond_records:
            return True
        programs = {r.program for r in front.results}
        for rec in records:
            if isinstance(rec, SessionRecord):
                continue
            if not isinstance(rec, RunRecord) or rec.program in programs or front.id in rec.lessons:
                return True
        return False

    def line(self, lessons: int) -> str:
        """What was judged: every record and lesson counted, so that an audit of nothing reads as one."""
        head = "; it is HEAD: only the working tree's uncommitted changes are in scope" if self.at_head else ""
        return (f"since {self.rev} ({self.commit[:12]}): {len(self.names)} records and their evidence, {lessons} "
                f"lesson{'s' * (lessons != 1)} judged ({len(self.changed)} paths changed){head}")


def since_commit(root: Path, given: str) -> str:
    """The commit ``--since`` names (``gather.given_commit``'s rule: a full id, or ``file:PATH`` holding one);
    one line when it names none here."""
    named = given_commit.commit_of(root, given, "--since")
    if named.commit is None:
        fmt = git_history.object_format(root)
        why = fmt.reason if isinstance(fmt, NoHistory) else "names no commit of this repository"
        raise TileproofError(f"--since {given}: {why} (fix: pass the full id of the head you audited last, or audit "
                             f"the whole tree without --since)")
    return named.commit


@dataclass
class Reach:
    """What one audit covers, the scope object its phases accept: the whole tree (no ``asked``), or what
    ``audit --since`` found (``asked``) and, when that cannot be trusted to cover the change (not an ancestor of
    HEAD; a file directly under evidence/), the whole tree again with the reason (``widened``)."""

    asked: Scope | None = None
    facts: list | None = None
    """``--since``: every record's facts, read from the catalog while git found the scope."""
    history: Callable[[], GitHistory | NoHistory] | None = None
    """``--since``: the history read, begun with the scope's stat check."""

    @property
    def scope(self) -> Scope | None:
        """The scope in effect: None when the whole tree is audited."""
        return self.asked if self.asked is not None and self.widened is None else None

    @property
    def widened(self) -> str | None:
        """Why ``--since`` audited the whole tree (fail closed), or None."""
        asked = self.asked
        if asked is None:
            return None
        if not asked.ancestor:
            return f"since {asked.rev} ({asked.commit[:12]}): not an ancestor of HEAD: the whole tree audited"
        if asked.loose_evidence:
            loose = encodable(asked.loose_evidence[0])
            return (f"since {asked.rev} ({asked.commit[:12]}): {loose} changed, directly under {store.EVIDENCE}/ "
                    "(any record may reference it): the whole tree audited")
        return None

    def names(self, every: list[str]) -> list[str]:
        """The record files audited, of ``every`` record file."""
        scope = self.scope
        return every if scope is None else list(scope.names)

    def folders(self) -> tuple[str, ...] | None:
        """The evidence folders the byte pass reads (None: all of evidence/)."""
        scope = self.scope
        return None if scope is None else scope.folders

    def touches(self, records: list) -> Callable[[LessonFront], bool] | None:
        """Which lessons are judged, given the records audited (None: every one)."""
        scope = self.scope
        return None if scope is None else (lambda front: scope.touches(front, records))

    def findings(self, judged_lessons: int) -> list[Finding]:
        """``--since REV``: not an ancestor of HEAD (the whole tree was audited), or nothing judged: each a
        finding."""
        asked, scope = self.asked, self.scope
        found: list[Issue] = []
        if asked is not None and not asked.ancestor:
            found.append(reviewer.since_not_ancestor(asked.rev, asked.commit, asked.head))
        elif asked is not None and scope is not None and not scope.names and not judged_lessons:
            found.append(reviewer.since_nothing(asked.rev, asked.commit, asked.at_head))
        return [Finding("HEAD", rule_id, reason) for rule_id, reason in found]


def reach(cat: Catalog, since: str | None, listing: store.RunsListing) -> Reach:
    """What an audit covers (:class:`Reach`): for ``--since``, git finds what changed since the commit, and reads
    the history, while every record's facts are read from the catalog."""
    if since is None:
        return Reach()
    since_id = since_commit(cat.root, since)
    checked = cat.stat_check()  # one stat check for both
    scoped = begin(cat, since_id, listing.files, checked, shown=since)
    history = cat.history(checked)
    facts = cat.facts(listing)
    return Reach(scoped(), facts, history)


def scope(cat: Catalog, rev: str, names: Iterable[str]) -> Scope:
    """The scope of ``audit --since rev`` over the record files ``names`` of runs/; one line when ``rev``
    is not a commit's full id here (:func:`since_commit`)."""
    return begin(cat, since_commit(cat.root, rev), names, shown=rev)()


def begin(cat: Catalog, commit: str, names: Iterable[str], checked: Callable[[], Answer] | None = None,
          shown: str | None = None) -> Callable[[], Scope]:
    """:func:`scope` begun for the full id ``commit`` (:func:`since_commit`; ``shown``: as the reviewer gave it),
    git's diff and listing of untracked files started (``checked``: the working tree's stat check, when the
    caller started it: ``Catalog.stat_check``); the callable returned waits for them (once) and closes the
    scope."""
    names = list(names)
    pending = cat.changes_since(commit, checked)
    return lambda: _closed(cat.root, shown or commit, names, pending())


def _closed(root: Path, rev: str, names: list[str], found: tuple[str, frozenset[str]] | NoHistory) -> Scope:
    if isinstance(found, NoHistory):
        raise TileproofError(f"--since {rev}: {found.reason} (fix: audit the whole tree without --since)")
    commit, changed = found
    head = git_history.resolve_commit(root, "HEAD")
    ancestor = head is not None and git_history.is_ancestor(root, commit, head)
    present = set(names)
    chosen: set[str] = set()
    for path in changed:
        parts = path.split("/")
        if parts[0] == store.RUNS and len(parts) == 2 and parts[1] in present:
            chosen.add(parts[1])
        elif parts[0] == store.EVIDENCE and len(parts) > 2 and f"{parts[1]}.json" in present:
            chosen.add(f"{parts[1]}.json")
    todo = list(chosen)
    while todo:  # close over sessions: a run's session record, a session record's runs
        for linked in _linked(root, todo.pop()):
            if linked in present and linked not in chosen:
                chosen.add(linked)
                todo.append(linked)
    return Scope(rev, commit, changed, tuple(sorted(chosen)), head, ancestor)


def _linked(root: Path, name: str) -> list[str]:
    """The record files a record's raw JSON links to: a run's session, a session's runs (nothing for a file
    that does not read as a record: the audit's schema rule reports it)."""
    try:
        raw = store.unwrap(json.loads(read_bytes(root, f"{store.RUNS}/{name}", "record")))
    except (InputRefused, ValueError, RecursionError, AttributeError, TypeError):
        return []
    if not isinstance(raw, dict):
        return []
    out: list[str] = []
    env = raw.get("environment")
    if raw.get("kind") == "run" and isinstance(env, dict) and isinstance(env.get("session_id"), str):
        out.append(f"{env['session_id']}.json")
    if raw.get("kind") == "session" and isinstance(raw.get("runs"), list):
        out += [f"{r}.json" for r in raw["runs"] if isinstance(r, str)]
    return out
