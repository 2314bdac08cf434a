"""Each transcript under evidence/ with what a pure function of its bytes gives, read through the catalog (the
verified-file index keeps each value by the bytes' digest, so an unchanged file is not read again)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tileproof.catalog import Catalog
from tileproof.catalog.derived import Derive
from tileproof.records.trust.runner_keys import EMPTY


def each_evidence_file(root: Path, kind: str, derive: Derive, kept: bool = True,
                       notes: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(path, ``derive`` of its bytes) of every file under evidence/ that ``safe_read`` reads; a refused one is the
    audit's finding and left out (``catalog.derived``). ``kind`` names ``derive`` in the index; not ``kept``: none
    is looked up or kept. ``notes``: where given, what the index had to say (an index not used, entries ignored) is
    added to it, for the command to say aside."""
    with Catalog.open(root, EMPTY) as cat:  # no trust outcome is asked: the registry does not matter
        values = cat.each_evidence_file(kind, derive, kept)
        if notes is not None:
            notes.extend(cat.notes())
        return values
