"""Today's tree as the decision sees it: file digests, the claims file, what the programs use, and the
committed versions of the tolerance table that older records attest.

``gather.tree`` fills a ``Today`` from the repository; the judges only read it (a plain mapping of
digests stands in where a test has nothing more to say).
"""

from __future__ import annotations

from collections.abc import Mapping

from tileproof.judge.claim_verdicts import NO_CLAIMS, ClaimsToday
from tileproof.judge.releases import ReleaseKey
from tileproof.records.depends import Bounds, ProgramUses


class Today(dict):
    """Today's files: path → sha256 (None when gone), the lesson's claims file as it is today,
    ``tables_at``: sha256 of a committed version of a tolerance file (the table, or the header
    rendered from it) → the table it holds, read back from git history for records that attest the
    table as a whole file (``run_version`` < 3, ``compile_version`` < 4), ``uses``: program → what it
    uses today (``records.depends.ProgramUses``), and ``cuda_tile``: the lock's cuda-tile release, the only one
    whose records decide rows (``releases.decides_rows``; None: the tree pins none)."""

    def __init__(self, digests: Mapping[str, str | None], claims: ClaimsToday = NO_CLAIMS,
                 tables_at: Mapping[str, Bounds] | None = None, uses: Mapping[str, ProgramUses] | None = None,
                 cuda_tile: ReleaseKey | None = None):
        super().__init__(digests)
        self.claims = claims
        self.tables_at = dict(tables_at or {})
        self.uses = dict(uses or {})
        self.cuda_tile = cuda_tile


def tables_at(today: Mapping[str, str | None]) -> Mapping[str, Bounds]:
    """``today.tables_at`` (empty for a plain mapping)."""
    return today.tables_at if isinstance(today, Today) else {}


def uses(today: Mapping[str, str | None], program: str) -> ProgramUses | None:
    """What ``program`` uses today, when gathered (None for a plain mapping)."""
    return today.uses.get(program) if isinstance(today, Today) else None


def lock_release(today: Mapping[str, str | None]) -> ReleaseKey | None:
    """``today.cuda_tile`` (None for a plain mapping: every record decides, as before the release axis)."""
    return today.cuda_tile if isinstance(today, Today) else None
