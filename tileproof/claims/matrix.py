"""The claims matrix: each claim's verdict per toolchain release (a column per CUDA release).

``claim_matrix`` and ``holds_text`` are pure (they read only the records given to them); ``status_lines`` reads the
claims files and records of a tree for ``tileproof status``. Nothing here runs a tool. The grouping rules (by
release, mixed installs, cuda-tile versions per column): docs/claims.md, "The claims matrix".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tileproof.claims.spec import load_all
from tileproof.claims.status import claims_records
from tileproof.judge.claim_verdicts import (
    DECISIVE,
    Release,
    by_release,
    fold,
    release_of,
)
from tileproof.records.models import (
    ClaimResult,
    ClaimResultV1,
    ClaimsRecord,
    ClaimVerdictName,
)

__all__ = ["Cell", "Matrix", "Release", "by_release", "claim_matrix", "holds_text", "lines", "release_of",
           "status_lines"]


@dataclass(frozen=True)
class Cell:
    """One claim on one release: the result that decides it there and the record it is in."""

    result: ClaimResult | ClaimResultV1
    run_id: str

    @property
    def verdict(self) -> ClaimVerdictName:
        return self.result.verdict


Key = tuple[str, str]
"""(document id, claim id)."""


@dataclass(frozen=True)
class Matrix:
    """Claim x release: the cell of each claim on each release that checked it."""

    releases: list[Release]
    cells: dict[Key, dict[Release, Cell]]
    unattributed: list[str]
    """Run ids of claims records whose toolchain shares no release (not in any column)."""
    cuda_tile: dict[Release, list[str]]
    """The cuda-tile versions each release's records were made with (Python-side verdicts can
    differ between cuda-tile versions of one CUDA release: a column is one CUDA release)."""

    def cell(self, document: str, claim_id: str, release: Release) -> Cell | None:
        """The verdict of one claim for one release; None when no record of that release checked it.

        This is what the publish decision asks: the verdict for the release the lesson's
        evidence was made with (``release_of(run_record.environment.toolchain)``).
        """
        return self.cells.get((document, claim_id), {}).get(release)

    def holds(self, document: str, claim_id: str) -> str:
        """For which releases the claim holds, in words: ``confirmed on 13.3-13.4; refuted since 13.5``."""
        return holds_text(self.cells.get((document, claim_id), {}), self.releases)


def claim_matrix(records: Iterable[ClaimsRecord]) -> Matrix:
    """The matrix of these records, oldest first (a later decisive result wins within its release)."""
    groups, mixed = by_release(records)
    cells: dict[Key, dict[Release, Cell]] = {}
    for release, group in groups.items():
        for key, decided in fold(group).items():
            cells.setdefault(key, {})[release] = Cell(decided.result, decided.run_id)
    cuda_tile = {release: sorted({v for r in group if (v := r.toolchain.packages.get("cuda-tile"))})
                 for release, group in groups.items()}
    return Matrix(releases=list(groups), cells=cells, unattributed=[r.run_id for r in mixed], cuda_tile=cuda_tile)


def _span(releases: list[Release]) -> str:
    return str(releases[0]) if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"


def holds_text(row: dict[Release, Cell], releases: list[Release]) -> str:
    """For which releases a claim holds, in words.

    Runs of one verdict over adjacent releases: ``confirmed on 13.3-13.5``; ``confirmed on
    13.3-13.4; refuted since 13.5`` (a decisive change that lasts to the newest release
    reads "since"). Releases where the claim was not decided follow the decided ones
    (``confirmed on 13.4; unverifiable-here on 13.3, 13.5``); a release that did not check the
    claim at all breaks a run and is not named; ``unchecked`` when no release checked it.
    """
    runs: list[tuple[ClaimVerdictName, list[Release]]] = []
    for i, release in enumerate(releases):
        cell = row.get(release)
        if cell is None:
            continue
        adjacent = bool(runs) and i > 0 and runs[-1][1][-1] == releases[i - 1]
        if adjacent and runs[-1][0] == cell.verdict:
            runs[-1][1].append(release)
        else:
            runs.append((cell.verdict, [release]))
    if not runs:
        return "unchecked"
    decided = [(v, span) for v, span in runs if v in DECISIVE]
    words = [f"{v} since {span[0]}" if i > 0 and span[-1] == releases[-1] else f"{v} on {_span(span)}"
             for i, (v, span) in enumerate(decided)]
    rest: dict[ClaimVerdictName, list[str]] = {}
    for v, span in runs:
        if v not in DECISIVE:
            rest.setdefault(v, []).append(_span(span))
    words += [f"{v} on {', '.join(spans)}" for v, spans in rest.items()]
    return "; ".join(words)


SHORT: dict[ClaimVerdictName, str] = {
    "confirmed": "confirmed", "refuted": "REFUTED", "unverifiable-here": "unverif.", "error": "error",
}
"""Each verdict as a matrix cell shows it (a refutation stands out)."""


def lines(matrix: Matrix, claims: list[Key], documents: list[str] | None = None) -> list[str]:
    """The matrix as a table: one row per claim, one column per release.

    ``claims`` are the claims of today's claims files, in their order; a claim a record holds
    that no claims file lists any more is shown after them (nothing recorded is dropped),
    only for ``documents`` when given.
    """
    if not matrix.releases:
        return []
    gone = [k for k in matrix.cells if k not in claims and (documents is None or k[0] in documents)]
    rows = [["DOCUMENT", "CLAIM", *map(str, matrix.releases), "HOLDS"]]
    for key in [*claims, *gone]:
        row = matrix.cells.get(key, {})
        rows.append([*key, *(SHORT[row[r].verdict] if r in row else "-" for r in matrix.releases),
                     matrix.holds(*key) + ("  (no longer in its claims file)" if key in gone else "")])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    every = {v for versions in matrix.cuda_tile.values() for v in versions}
    if len(every) > 1:  # records differ in cuda-tile: say which column was made with which
        out.append("cuda-tile: " + "; ".join(f"{release} {', '.join(versions) or 'not recorded'}"
                                              for release, versions in matrix.cuda_tile.items()))
    return out + notes(matrix)


def notes(matrix: Matrix) -> list[str]:
    """What a reader of the matrix must know besides its cells: shared columns, records left out."""
    out = [f"{release}: records of cuda-tile {', '.join(versions)} share this column "
           "(the newest decisive one wins; Python-side verdicts may differ between them)"
           for release, versions in matrix.cuda_tile.items() if len(versions) > 1]
    if matrix.unattributed:
        out.append(f"not in the matrix (toolchain of mixed releases): {', '.join(matrix.unattributed)}")
    return out


def status_lines(root: Path, documents: list[str] | None = None, examined: Iterable | None = None) -> list[str]:
    """The claims matrix of the tree at ``root`` (all documents, or only ``documents``; ``examined``: the
    records as the caller judged them, see ``claims.status.claims_records``)."""
    files = load_all(Path(root), documents or None)
    claims = [(f.spec.document, c.id) for f in files for c in f.spec.claims]
    return lines(claim_matrix(claims_records(Path(root), examined)), claims, documents or None)
