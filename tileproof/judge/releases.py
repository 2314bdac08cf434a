"""The cuda-tile release a run record was made with, and the one rule of which records decide a lesson's rows.

A course's Python programs can be run with any cuda-tile release (``tileproof run`` with another
release installed, ``--tileiras-outside-range`` when its tileiras is not one that release declares):
those records are the release axis (``judge.release_matrix``: program x release, the releases a
lesson states it was verified on). A lesson's rows, and so publishing, rest on the lock's release
only: ``decides_rows`` is that rule, and the gate's record selection asks it. Without it the newest
record would decide a row, and a newer run with cuda-tile 1.4 would decide a lesson pinned to 1.7.

Pure: reads only the records and the release it is given (``gather`` reads the lock).
"""

from __future__ import annotations

from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from tileproof.records.models import CompileRecord, RunRecord

CUDA_TILE_SUFFIX = ".py"
"""The programs that import cuda-tile (``kernels/*.py``); C++ and cuTile.jl programs never do, so the cuda-tile
release installed beside them says nothing about them."""


class ReleaseKey(NamedTuple):
    """One column of the release axis: a cuda-tile release, with a tileiras it declares or not."""

    cuda_tile: str
    """The cuda-tile version."""
    in_range: bool
    """The tileiras beside it is one the release declares (False: run outside its range, on request)."""

    def __str__(self) -> str:
        return self.cuda_tile if self.in_range else f"{self.cuda_tile}*"

    def order(self) -> tuple:
        """Oldest release first; within one, in range before outside; an unreadable version last, by text."""
        try:
            return (0, Version(self.cuda_tile), not self.in_range, "")
        except InvalidVersion:
            return (1, Version("0"), not self.in_range, self.cuda_tile)


OUTSIDE_MARK = "*"
"""How a column made with a tileiras outside its release's range is marked (``1.4.0*``)."""


def uses_cuda_tile(rec: RunRecord) -> bool:
    """Whether the record's program imports cuda-tile (a ``kernels/*.py`` program)."""
    return rec.program.endswith(CUDA_TILE_SUFFIX)


def release_of(rec: RunRecord) -> ReleaseKey | None:
    """The release a record of a Python program was made with; None when it had none (or is not such a record).

    From run_version 4 the record says (``RunRecord.cuda_tile``). Older records name only the installed
    version (``environment.versions``); every one of them was made from the lock, whose cuda-tile comes with
    its ``tileiras`` extra, so they are read as inside the range.
    """
    if not uses_cuda_tile(rec):
        return None
    if rec.cuda_tile is not None:
        return ReleaseKey(rec.cuda_tile.version, not rec.cuda_tile.outside)
    if rec.names_release:
        return None
    version = rec.environment.versions.get("cuda-tile")
    return ReleaseKey(version, True) if version else None


def lock_key(version: str | None) -> ReleaseKey | None:
    """The release axis's column of the lock's cuda-tile pin (always inside its range: the lock installs the
    release with its ``tileiras`` extra); None when the tree pins none."""
    return ReleaseKey(version, True) if version else None


def decides_rows(rec: RunRecord, lock: ReleaseKey | None) -> bool:
    """The rule: a run record may decide a lesson's row only when its program does not import cuda-tile, or it
    was made with the lock's cuda-tile release (``lock``) and a tileiras inside that release's range. Every
    other record is the release axis, never a row's evidence: it neither passes nor blocks a row. ``lock``
    None (a tree that pins no cuda-tile) lets every record decide, as before the axis existed."""
    return lock is None or not uses_cuda_tile(rec) or release_of(rec) == lock


def exports_rest_on(rec: CompileRecord, lock: ReleaseKey | None) -> bool:
    """The same rule for a compile record's cuTile Python exports: only those of the lock's release (older
    records, naming none, were made from the lock) stand for the course's build; ``compile-release`` records
    are the axis. C++ builds use no cuda-tile: the caller keeps them whatever this says."""
    named = rec.cuda_tile
    return lock is None or named is None or ReleaseKey(named.version, not named.outside) == lock
