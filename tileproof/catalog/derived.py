"""What a pure function derives from each evidence file's bytes, kept in the verified-file index by the bytes' sha256.

The bytes are the key: a file is found by its ``lstat`` (``index.content``, below a real evidence/ only), its
derived value looked up by the digest of what it holds and the function's ``kind`` (under the index's code key, so
a change to any tileproof source starts afresh), and computed from the bytes read where the index does not know it.
A fast path, never a source of truth: with the index deleted or off (``TILEPROOF_INDEX=off``) every value is the one
the function gives the file read now.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tileproof.catalog import index as catalog_index
from tileproof.records import store
from tileproof.records.errors import InputRefused
from tileproof.records.safe_read import read_evidence
from tileproof.records.walk import real_folders, walk

Derive = Callable[[bytes], dict[str, Any]]
"""A pure function of a file's bytes (nothing of the process or the machine), its value a JSON object."""


def _ignore(_rel: str, _error: InputRefused) -> None:
    """A refused entry (a link, a FIFO, ...) is left out here: it is the audit's ``input-*`` finding."""


def each_evidence_file(root: Path, kind: str, derive: Derive, kept: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """(path, ``derive`` of its bytes) of every file under evidence/ that ``safe_read`` reads, in the walk's order;
    a refused file is left out. A value the index holds for the file's content under ``kind`` is taken from it; any
    other is computed from the bytes just read and kept under their own digest (a file rewritten meanwhile is kept
    as what was read). Not ``kept``: every value is computed, and none is looked up or kept (a ``derive`` that
    depends on this process for now)."""
    top = str(root)
    index = catalog_index.opened(root)
    now = catalog_index.now_ns()
    stats: dict[str, os.stat_result] = {}
    vouched = real_folders(top, store.EVIDENCE)
    indexed = kept and index.db is not None  # else each file is read once, and nothing hashed for the index
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        for rel in walk(top, store.EVIDENCE, _ignore, stats):
            st = stats.pop(rel, None)
            value, read, digest = None, list[bytes](), None
            if indexed:
                try:  # a file the index does not know by its lstat is read here, once: ``read`` keeps its bytes
                    known = catalog_index.content(top, rel, "evidence", index, st if vouched else None, now, read)
                except InputRefused:
                    continue
                value = index.fact(known.sha256, kind)
                digest = known.sha256 if read else None  # the digest of exactly the bytes ``read`` holds
            if value is None:
                try:
                    data = b"".join(read) if read else read_evidence(top, rel)
                except InputRefused:
                    continue
                value = derive(data)
                if indexed:
                    index.remember(digest or hashlib.sha256(data).hexdigest(), kind, value)
            out.append((rel, value))
    finally:
        index.save()
    return out
