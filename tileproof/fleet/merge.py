"""Merging the records of many hosts into one tree: safe by construction.

Every record is its own file named by its unique run id (UTC second + 32 random
bits), and its transcripts live under ``evidence/<run id>/``: two hosts never
write the same name, so a merge is a union of files. It still checks: a name
already present with identical bytes is a no-op; the same name with different
bytes is a :class:`MergeConflict` and nothing at all is written. Files are
written with ``records.batch_write.copy_once`` (staged, one ``os.sync``, then a
hard link that fails if the name exists, then one more ``os.sync``), so a
concurrent writer cannot be overwritten either, and a killed merge leaves only
complete files: running it again completes it.

Only what records own is merged: ``runs/<id>.json`` and files under
``evidence/<id>/``. The audit's own reports (``evidence/AUDIT.md``...) are
derived, rebuilt by the audit after a merge, and listed as not merged; a temp
file a killed writer left (``.<name>.*.tmp``) is listed as incomplete.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tileproof.records import batch_write, store
from tileproof.records.errors import TileproofError

_TEMP = re.compile(r"^\..+\.tmp$")


class MergeConflict(TileproofError):
    """Two files under the same record name hold different bytes; nothing was written."""


@dataclass
class MergePlan:
    """What a merge would do: files to write, files already there, files it leaves."""

    writes: dict[str, str] = field(default_factory=dict)
    """Destination path (relative to the root) → the source file to copy (its path as a string)."""
    same: int = 0
    """Files already present with identical bytes (no-ops)."""
    skipped: list[str] = field(default_factory=list)
    """Source files that are not a record's (derived reports, a killed writer's temp files), with why."""


def record_files(source: Path) -> tuple[list[str], list[str]]:
    """A source tree's record-owned files (relative paths) and the files it holds that are not."""
    owned: list[str] = []
    other: list[str] = []
    runs = source / store.RUNS
    if runs.is_dir():
        with os.scandir(runs) as entries:
            for e in sorted(entries, key=lambda e: e.name):
                json_name = os.path.splitext(e.name)[1] == ".json"  # as Path.suffix: ".json" alone is not
                (owned if e.is_file() and json_name and not _TEMP.match(e.name) else other).append(
                    f"{store.RUNS}/{e.name}")
    evidence = source / store.EVIDENCE
    if evidence.is_dir():
        found: list[tuple[str, bool]] = []  # (path relative to the source, whether inside a run's folder)
        stack = [(os.fspath(evidence), store.EVIDENCE, 0)]
        while stack:
            folder, rel, depth = stack.pop()
            with os.scandir(folder) as entries:
                for e in entries:
                    if e.is_dir():
                        if not e.is_symlink():  # as rglob: a link to a folder is not walked into
                            stack.append((e.path, f"{rel}/{e.name}", depth + 1))
                    elif e.is_file():
                        found.append((f"{rel}/{e.name}", depth >= 1))
        for rel, inside_run in sorted(found, key=lambda f: f[0].split("/")):  # as sorted Paths
            (owned if inside_run and not _TEMP.match(rel.rsplit("/", 1)[1]) else other).append(rel)
    return owned, other


def _same_bytes(a: Path | str, b: Path | str) -> bool:
    a, b = Path(a), Path(b)
    return a.stat().st_size == b.stat().st_size and store.sha256_file(a) == store.sha256_file(b)


@dataclass(frozen=True)
class Source:
    """A tree to merge from: a host's checkout, a CI artifact, a task's worktree."""

    base: Path
    only: tuple[str, ...] | None = None
    """Relative paths to consider (what a task wrote); None: every file under runs/ and evidence/."""


def plan_merge(root: Path, sources: list[Source]) -> MergePlan:
    """Decide every file of every source against the root and each other; raise on the first conflict."""
    plan = MergePlan()
    conflicts: list[str] = []
    in_root = _Existing(root)
    for one in sources:
        source = one.base
        owned, other = record_files(source)
        if one.only is not None:
            wanted = set(one.only)
            owned, other = [o for o in owned if o in wanted], [o for o in other if o in wanted]
        plan.skipped += [
            f"{source / o}: {'incomplete write (temp file)' if _TEMP.match(Path(o).name) else 'not a record file'}"
            for o in other]
        base = os.fspath(source)
        for rel in owned:
            src = os.path.join(base, rel)  # strings, not Paths: a fleet merge decides 400,000 of them
            earlier = plan.writes.get(rel)
            if earlier is not None:
                if _same_bytes(earlier, src):
                    plan.same += 1
                else:
                    conflicts.append(f"{rel}: {earlier} and {src} differ")
            elif in_root.is_file(rel):
                if _same_bytes(root / rel, src):
                    plan.same += 1
                else:
                    conflicts.append(f"{rel}: {src} differs from the one already in {root}")
            else:
                plan.writes[rel] = src
    if conflicts:
        more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        raise MergeConflict(f"{conflicts[0]}{more}; nothing was merged (fix: records are never edited: "
                            "find which host changed a record after writing it, and restore it)")
    return plan


class _Existing:
    """Which relative paths are files under a root, asking the file system once per folder that is missing:
    a merge into a tree without ``evidence/<id>/`` learns that each of its files is absent from one stat of
    the folder (or of a missing folder above it), not one per file."""

    def __init__(self, root: Path) -> None:
        self._root = os.fspath(root)
        self._folders: dict[str, bool] = {"": True}

    def _folder(self, rel: str) -> bool:
        known = self._folders.get(rel)
        if known is None:
            known = self._folder(rel.rpartition("/")[0]) and os.path.isdir(f"{self._root}/{rel}")
            self._folders[rel] = known
        return known

    def is_file(self, rel: str) -> bool:
        return self._folder(rel.rpartition("/")[0]) and os.path.isfile(f"{self._root}/{rel}")


def merge(root: Path, sources: list[Source]) -> MergePlan:
    """Plan, then write every new file once, in one batch with one durable barrier
    (``records.batch_write.copy_once``; its time at fleet scale: docs/benchmarks.md,
    "A merge's writes (fleet_scale)").
    Returns the plan that was carried out; a merge stopped midway is completed by running it again."""
    plan = plan_merge(root, sources)
    batch_write.copy_once(root, plan.writes.items(), _same_bytes)
    return plan
