"""The claims section's view model: document x claim x verdict per toolchain release.

Pure: ``claims_view(records, claims_files, bad)`` reads only what it is given.
The columns are ``claims.matrix``'s (one per CUDA release its claims records
share, the newest decisive result winning within a release); whether a claim
blocks is ``judge.claim_verdicts.latest``'s rule (the newest decisive result over
every release, as the publish decision sees it) together with today's claims
file (``asserted``). A refuted claim that its document still asserts is marked
``stands_out``. Claims records with an audit finding are left out and named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tileproof.claims.matrix import claim_matrix
from tileproof.claims.matrix import notes as matrix_notes
from tileproof.judge.audit.result import ClaimsFileToday
from tileproof.judge.claim_verdicts import evidence_of, latest
from tileproof.records.models import ClaimsRecord


@dataclass(frozen=True)
class ClaimCell:
    release: str
    verdict: str
    why: str
    run_id: str
    evidence: str | None
    """Repo-relative path of the transcript a reader should open first."""


@dataclass(frozen=True)
class ClaimRow:
    document: str
    claim_id: str
    statement: str
    source: str
    cells: tuple[ClaimCell | None, ...]
    """One per release of ``ClaimsView.releases``; None where no record of that release checked the claim."""
    holds: str
    asserted: bool | None
    """Whether today's claims file still asserts it; None when the file no longer lists it."""
    deciding: str
    """The verdict the publish decision reads (newest decisive over every release)."""

    @property
    def stands_out(self) -> bool:
        """Refuted, and the document still asserts it (or no longer lists it, which still counts)."""
        return self.deciding == "refuted" and self.asserted is not False


@dataclass(frozen=True)
class ClaimsView:
    releases: tuple[str, ...]
    rows: tuple[ClaimRow, ...]
    notes: tuple[str, ...]
    """Records in no column, cuda-tile versions sharing a column, unreadable claims files, records left out."""

    @property
    def standing_out(self) -> list[ClaimRow]:
        return [r for r in self.rows if r.stands_out]


def claims_view(records: Iterable, claims_files: Mapping[str, ClaimsFileToday | str],
                bad: set[str] = frozenset()) -> ClaimsView:  # type: ignore[assignment]
    all_claims = [r for r in records if isinstance(r, ClaimsRecord)]
    claims = [r for r in all_claims if r.run_id not in bad]
    matrix = claim_matrix(sorted(claims, key=lambda r: (r.created, r.run_id)))
    deciding = latest(claims)
    order: list[tuple[str, str]] = []
    for document, file in claims_files.items():
        if isinstance(file, ClaimsFileToday):
            order += [(document, cid) for cid in file.today.asserted]
    order += [k for k in matrix.cells if k not in order]
    rows = []
    for document, cid in order:
        row = matrix.cells.get((document, cid), {})
        cells = tuple(ClaimCell(str(rel), c.verdict, c.result.why, c.run_id,
                                (ev.path if (ev := evidence_of(c.result)) else None))
                      if (c := row.get(rel)) else None for rel in matrix.releases)
        first = next((c.result for c in row.values()), None)
        today = claims_files.get(document)
        known = today if isinstance(today, ClaimsFileToday) else None
        asserted = known.today.asserted.get(cid) if known else None
        decided = deciding.get((document, cid))
        statement = (known.statements.get(cid) if known else None) or (first.statement if first else "")
        source = (known.sources.get(cid) if known else None) or (first.source if first else "")
        rows.append(ClaimRow(document, cid, statement, source,
                             cells, matrix.holds(document, cid), asserted,
                             decided.result.verdict if decided else "unchecked"))
    notes = matrix_notes(matrix)
    left_out = sorted(r.run_id for r in all_claims if r.run_id in bad)
    if left_out:
        notes.append(f"left out (the audit found something against them): {', '.join(left_out)}")
    notes += [f"lessons/claims/{d}.claims.yaml: {t}" for d, t in claims_files.items() if isinstance(t, str)]
    return ClaimsView(tuple(map(str, matrix.releases)), tuple(rows), tuple(notes))
