"""The lock: ``constraints.txt`` (the pinned set every nox session installs) and one pinned set per other
cuda-tile release of the release axis (``locks/cuda-tile-<version>.txt``, written by ``nox -s lock``).

The publish decision rests on the release ``constraints.txt`` pins (``cuda_tile_pin``); the other sets
are the environments ``nox -s "run-gpu-release(cuda_tile='1.5.0')"`` and ``compile-release`` install.
Read through ``safe_read`` (a regular file inside the repository, at most 1 MiB, UTF-8).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tileproof.records.errors import InputRefused, RecordError
from tileproof.records.safe_read import read_text

LOCK_FILE = "constraints.txt"
AXIS = "locks"
CUDA_TILE = "cuda-tile"
FIX = "run nox -s lock and commit constraints.txt and locks/"


HASH = "--hash=sha256:"
"""How a lock written with hashes (``nox -s lock`` writes one) gives each wheel's digest, after its pin."""


def _entries(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, requirement text, sha256 digests) of each requirement of a lock, its ``\\``-continued lines
    joined and its ``--hash=sha256:`` options taken apart (comments and blank lines left out)."""
    start, joined = 0, ""
    for n, line in enumerate(text.splitlines(), start=1):
        body = line.split("#", 1)[0]
        start = start or n
        if body.rstrip().endswith("\\"):
            joined += body.rstrip()[:-1] + " "
            continue
        words = (joined + body).split()
        joined = ""
        at, start = start, 0
        if words:
            yield at, " ".join(w for w in words if not w.startswith("--hash=")), [
                w.removeprefix(HASH).lower() for w in words if w.startswith(HASH)]


def pins(text: str, shown: str) -> dict[str, list[Requirement]]:
    """Canonical name → the requirements of a lock's lines (one per environment marker); a line that is not a
    requirement is one ``RecordError`` naming it."""
    out: dict[str, list[Requirement]] = {}
    for n, body, _hashes in _entries(text):
        try:
            req = Requirement(body)
        except InvalidRequirement as e:
            raise RecordError(shown, f"line {n}", f"not a requirement ({e})", FIX) from None
        out.setdefault(canonicalize_name(req.name), []).append(req)
    return out


def wheel_hashes(root: Path) -> frozenset[tuple[str, str]]:
    """(version, sha256) of every cuda-tile wheel the lock and the release axis's sets pin with a hash
    (``constraints.txt``, ``locks/cuda-tile-*.txt``): the releases tileproof's own release axis may unpack into a
    folder named by that digest (``judge.plausibility`` knows such a folder for what it is). Empty for locks
    written without hashes; a lock that is missing or refused adds nothing (its own check says why)."""
    root = Path(root)
    files = [LOCK_FILE] + sorted(f"{AXIS}/{p.name}" for p in (root / AXIS).glob("cuda-tile-*.txt"))
    out: set[tuple[str, str]] = set()
    for rel in files:
        try:
            text = read_text(root, root / rel, "lock", rel)
        except InputRefused:
            continue
        for _n, body, hashes in _entries(text):
            try:
                req = Requirement(body)
            except InvalidRequirement:
                continue
            exact = [s.version for s in req.specifier if s.operator == "=="]
            if canonicalize_name(req.name) == CUDA_TILE and len(exact) == 1:
                out.update((exact[0], h) for h in hashes if len(h) == 64)
    return frozenset(out)


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
