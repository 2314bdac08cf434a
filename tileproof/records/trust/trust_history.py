"""What git history says about time and trust, as plain data (gathered by ``runner.git_history.trust_history``).

A record's signing time is a claim of its signer; the commit that first added the
record's file is a fact every clone carries. ``TrustHistory`` holds the commit graph
reachable from HEAD, oldest first in topological order (a parent always before its
children, so an index in it orders "earlier" without trusting any date), each commit's
committer time, and the content digest of the runner registry and of the CI's pin
(``records.trust.trust_pin``) at every commit, with each version's bytes, and the commits that added each
endorsement of a registry change (``records.trust.registry_change``). ``judge.trust.trust_root`` walks it;
``judge.trust.standing`` judges a record by its ``FirstCommit``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property


@dataclass(frozen=True)
class FirstCommit:
    """The commit that first added a record's file."""

    commit: str
    position: int
    """Its index in ``TrustHistory.commits`` (0: the oldest): "newest" is the largest."""
    time: datetime
    """Its committer time (set by whoever committed: a bound on the record's date, never more)."""


@dataclass(frozen=True)
class TrustHistory:
    """The commit graph reachable from HEAD and the registry and pin versions along it."""

    commits: tuple[str, ...]
    """Every commit reachable from HEAD, parents before children (``git log --topo-order --reverse``);
    HEAD is the last. Empty in a repository without a commit yet."""
    parents: Mapping[str, tuple[str, ...]]
    times: Mapping[str, datetime]
    registry: Mapping[str, str | None]
    """Commit → sha256 of ``lessons/runners.yaml`` there; None where it has none."""
    pin: Mapping[str, str | None]
    """Commit → sha256 of the CI's pin file (``records.trust.trust_pin.PIN``) there; None where it has none."""
    texts: Mapping[str, bytes] = field(default_factory=dict)
    """sha256 → the bytes of every registry and pin version named above."""
    endorsements: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """sha256 of an endorsement file's bytes → every commit that adds or changes a file under
    ``lessons/registry-signatures/`` to those bytes, against any one of its parents (a merge against each, a
    root commit against nothing): where that endorsement entered history. Bytes no commit added are absent."""

    @property
    def head(self) -> str | None:
        return self.commits[-1] if self.commits else None

    @cached_property
    def position(self) -> dict[str, int]:
        """Commit → its index in ``commits``."""
        return {c: i for i, c in enumerate(self.commits)}

    @cached_property
    def children(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {c: [] for c in self.commits}
        for c in self.commits:
            for p in self.parents.get(c, ()):
                if p in out:
                    out[p].append(c)
        return {c: tuple(v) for c, v in out.items()}

    def first_commit(self, commit: str) -> FirstCommit | None:
        """``commit`` as a record's first commit; None when it is not in this history."""
        i = self.position.get(commit)
        return None if i is None else FirstCommit(commit, i, self.times[commit])

    def descendants(self, commit: str) -> frozenset[str]:
        """``commit`` and every commit that descends from it (all reachable from HEAD)."""
        return self._closure(commit, self.children)

    def ancestors(self, commit: str) -> frozenset[str]:
        """``commit`` and every commit it descends from."""
        return self._closure(commit, self.parents)

    def _closure(self, start: str, edges: Mapping[str, Iterable[str]]) -> frozenset[str]:
        if start not in self.position:
            return frozenset()
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen and nxt in self.position:
                    seen.add(nxt)
                    todo.append(nxt)
        return frozenset(seen)
