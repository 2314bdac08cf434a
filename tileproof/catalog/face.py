"""The catalog's one face: what is on disk, read once and remembered, opened for a tree and closed with it.

``with Catalog.open(root, registry) as cat:`` gives the records' facts and the records chosen (``catalog.records``),
the git history and the changes since a commit (``catalog.history``), the evidence digests and check-report diffs
of the byte pass (``catalog.byte_pass``, in the runner's forked helper: ``catalog.fork``), what the audit keeps of a
record (:class:`Audited`) and the index's notes. Leaving the block closes the index (a nested ``open`` of the same
process shares the outer one's, closed when the outermost block ends): no caller closes it by hand.

A fast path, never a source of truth: every answer is the one a full read gives, and with the index deleted (or
``TILEPROOF_INDEX=off``) every output is the same, only slower."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tileproof.catalog import byte_pass, derived, history, index, records
from tileproof.catalog.fork import Background
from tileproof.judge.preselect import Facts
from tileproof.records import store
from tileproof.records.errors import TileproofError
from tileproof.records.history_check import GitHistory, NoHistory
from tileproof.records.store import Examined
from tileproof.records.trust.runner_keys import RunnerRegistry
from tileproof.runner import git_history
from tileproof.runner.query import Answer

WORKERS_NOTE = byte_pass.WORKERS_NOTE
ByteFacts = tuple[dict[str, "str | None"], byte_pass.Hashed, dict, dict, tuple[str, ...]]
"""What the byte pass gives (``catalog.byte_pass.byte_pass``): seals, evidence digests, report diffs, refused
evidence, the index's notes."""

_DEPTH: dict[int, int] = {}
"""How many ``Catalog.open`` blocks are open in this process (by pid: a forked child starts at none)."""


@dataclass
class Catalog:
    """The catalog of the tree at ``root``, its trust outcomes kept under ``registry``."""

    root: Path
    registry: RunnerRegistry
    _notes: list[str] = field(default_factory=list)

    @classmethod
    @contextmanager
    def open(cls, root: Path | str, registry: RunnerRegistry) -> Iterator[Catalog]:
        """The catalog, for the block; its index closed when the outermost block of this process ends. Inside it, what
        git says of the checkout (``runner.git_history.remembered``) is asked once."""
        pid = os.getpid()
        _DEPTH[pid] = _DEPTH.get(pid, 0) + 1
        try:
            with git_history.remembered():  # what git says of the checkout, asked once for the block
                yield cls(Path(root), registry)
        finally:
            _DEPTH[pid] -= 1
            if not _DEPTH[pid]:
                index.release()

    def facts(self, listing: store.RunsListing | None = None) -> list[tuple[str, Examined[Facts]]]:
        """Every record file under runs/ with its facts examined (``catalog.records.read_facts``)."""
        return records.read_facts(self.root, self.registry, listing)

    def records(self, names: Iterable[str] | None = None) -> list[Examined]:
        """The records named ``names`` read in full, or every record (``catalog.records.read_chosen``,
        ``read_records``)."""
        if names is None:
            return records.read_records(self.root, self.registry)
        return records.read_chosen(self.root, self.registry, names)

    def history(self, checked: Callable[[], Answer] | None = None) -> Callable[[], GitHistory | NoHistory]:
        """The history read begun (``catalog.history.start``); ``checked``: the stat check begun already."""
        return history.start(index.opened(self.root), self.root, checked)

    def stat_check(self) -> Callable[[], Answer]:
        """The working tree's stat check begun (``catalog.history.stat_check``), for :meth:`history` and
        :meth:`changes_since` both."""
        return history.stat_check(self.root)

    def changes_since(self, commit: str, checked: Callable[[], Answer] | None = None
                      ) -> Callable[[], tuple[str, frozenset[str]] | NoHistory]:
        """Every path changed since ``commit`` (``catalog.history.changes_since``), begun. The index is opened first:
        on a tree's first command its folder is made then, and git's listing of untracked files, begun at once, would
        otherwise find it half made (before its ``.gitignore`` says ``*``) and count it as a change."""
        index.opened(self.root)
        return history.changes_since(self.root, commit, (), checked)

    @staticmethod
    def parallel_min() -> int:
        """From this many records the byte pass pays for a second process (``byte_pass.PARALLEL_MIN_RECORDS``)."""
        return byte_pass.PARALLEL_MIN_RECORDS

    def background(self, jobs: int | None = None) -> Background:
        """The runner's forked helper, when ``jobs`` records (default: as many as runs/ lists) pay for a second
        process (``catalog.byte_pass.helper``)."""
        return byte_pass.helper(jobs if jobs is not None else self._records_at_least(byte_pass.PARALLEL_MIN_RECORDS))

    def _records_at_least(self, count: int) -> int:
        """How many entries runs/ lists, counted up to ``count`` (enough to tell a tree worth a second process)."""
        try:
            with os.scandir(self.root / store.RUNS) as entries:
                return sum(1 for _entry in itertools.islice(entries, count))
        except OSError:
            return 0

    def evidence(self, helper: Background, names: list[str], folders: tuple[str, ...] | None = None
                 ) -> Callable[[], ByteFacts]:
        """The byte pass over the record files ``names`` and evidence/ (``folders``: only those), begun in
        ``helper``."""
        return helper.submit(byte_pass.byte_pass, str(self.root), names, folders)

    def each_evidence_file(self, kind: str, derive: derived.Derive, kept: bool = True
                           ) -> list[tuple[str, dict[str, Any]]]:
        """Every file under evidence/ with ``derive`` of its bytes, kept by their digest (``catalog.derived``)."""
        return derived.each_evidence_file(self.root, kind, derive, kept)

    def audited(self, few: bool) -> Audited:
        """What the audit keeps of each plain run record it checked (:class:`Audited`)."""
        return Audited(index.opened(self.root), few)

    def keep(self, entries: Iterable[tuple[str, Examined[Facts], bool]]) -> None:
        """Each (sha256, record examined as its facts, plain) kept for the next reader of its facts
        (``catalog.records.keep_missing``)."""
        kept = index.opened(self.root)
        records.keep_missing(kept, records.registry_scope(self.registry), entries)
        kept.save()

    def summarise(self) -> None:
        """The summary of runs/ made where it is missing (``catalog.records.read_facts``), so the next reader takes
        every record from it. A tree that refuses it (a stray, a record that does not validate) is left without."""
        if not index.opened(self.root).has_summary(records.FOLDER, records.KIND, records.registry_scope(self.registry)):
            with contextlib.suppress(TileproofError):  # the summary only saves time: the audit reports what failed
                self.facts()

    def notes(self) -> tuple[str, ...]:
        """What the index had to say (entries ignored, an index not used), once each."""
        return tuple(dict.fromkeys(index.open_notes()))

    def unindexed_digest(self, rel: str) -> tuple[int, str]:
        """(size, sha256) of the evidence file ``rel``, read and hashed (no stat vouches for it); raises
        ``InputRefused`` as ``safe_read`` does."""
        known = index.content(self.root, rel, "evidence", index.Index(None, None))
        return known.size, known.sha256


class Audited:
    """The audit's entries of plain run records (kind ``audited``, by the sha256 of their bytes), asked for in the
    order of the record files, and the stat of each record read learned."""

    KIND, SCOPE = "audited", "audit"
    SAVE_EVERY = 10_000
    """Entries made are written to the index this many at a time."""

    def __init__(self, opened: index.Index, few: bool) -> None:
        self._index, self._now, self._made, self._loaded = opened, index.now_ns(), 0, few
        self.few = few
        """``audit --since``: a few of the tree's records, each read and kept in full."""
        if few:
            opened.few = True  # audit --since: a few records' rows, asked for one by one
        self._entries = opened.entries(self.KIND, self.SCOPE, f"{store.RUNS}/")

    def take(self, file: str, st: os.stat_result) -> tuple[str, dict[str, Any]] | None:
        """The sha256 and entry of the record file ``file`` while its ``lstat`` is ``st``, or None."""
        return self._entries.take(file, st)

    def content(self, root: str, name: str, st: os.stat_result | None, data: bytes) -> str:
        """The sha256 of ``data``, just read from ``runs/<name>`` (``catalog.records.known_read``), learned."""
        if not self._loaded:  # a record read in full: the records' rows, once
            self._index.load_files(f"{store.RUNS}/")
            self._loaded = True
        return records.known_read(self._index, root, name, st, data, self._now).sha256

    def add(self, sha: str, entry: dict) -> None:
        """The entry of a plain run record read in full."""
        self._index.add(sha, self.KIND, entry, self.SCOPE)
        self._made += 1
        if self._made % self.SAVE_EVERY == 0:
            self._index.save()  # each entry stands alone: none is held to the end

    def ignored(self) -> None:
        """An entry that did not decode (the index's notes count it)."""
        self._index.ignored += 1
