"""The lock: ``constraints.txt`` (the pinned set every nox session installs) and one pinned set per other
cuda-tile release of the release axis (``locks/cuda-tile-<version>.txt``, written by ``nox -s lock``).

The publish decision rests on the release ``constraints.txt`` pins (``cuda_tile_pin``); the other sets
are the environments ``nox -s "run-gpu-release(cuda_tile='1.5.0')"`` and ``compile-release`` install.
Read through ``safe_read`` (a regular file inside the repository, at most 1 MiB, UTF-8).
"""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tileproof.records.errors import InputRefused, RecordError
from tileproof.records.safe_read import read_text

LOCK_FILE = "constraints.txt"
CUDA_TILE = "cuda-tile"
FIX = "run nox -s lock and commit constraints.txt and locks/"


def pins(text: str, shown: str) -> dict[str, list[Requirement]]:
    """Canonical name → the requirements of a lock's lines (one per environment marker); a line that is not a
    requirement is one ``RecordError`` naming it."""
    out: dict[str, list[Requirement]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        try:
            req = Requirement(body)
        except InvalidRequirement as e:
            raise RecordError(shown, f"line {n}", f"not a requirement ({e})", FIX) from None
        out.setdefault(canonicalize_name(req.name), []).append(req)
    return out


def pinned_version(reqs: list[Requirement], name: str, shown: str) -> str:
    """The one exact version the lock pins ``name`` to."""
    versions = {s.version for r in reqs for s in r.specifier if s.operator == "=="}
    if len(versions) != 1 or any(len(r.specifier) != 1 for r in reqs):
        raise RecordError(shown, name, f"expected one exact pin (name==version), found {', '.join(map(str, reqs))}",
                          FIX)
    return versions.pop()


def cuda_tile_pin(root: Path) -> str | None:
    """The cuda-tile version ``constraints.txt`` pins: the release lesson rows rest on. None when the tree has
    no lock, or a lock without cuda-tile (a test tree, a C++-only course)."""
    try:
        text = read_text(root, Path(root) / LOCK_FILE, "lock", LOCK_FILE)
    except InputRefused as e:
        if e.kind == "missing":
            return None
        raise
    reqs = pins(text, LOCK_FILE).get(CUDA_TILE)
    return pinned_version(reqs, CUDA_TILE, LOCK_FILE) if reqs else None
