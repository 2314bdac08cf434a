"""Reading claims records back for ``tileproof status``: one line per claim with its newest decisive verdict.

The claims-file format is ``claims.spec``; running probes is ``claims.checks``; combining
their outcomes is ``claims.outcomes``; the command is ``commands/claims.py``. The verdict
logic (newest decisive result, refuted-and-asserted, staleness, evidence) is the judge's,
``judge.claim_verdicts``; publish, status and the audit ask it through ``gather.tree``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tileproof.claims.spec import Claim, Loaded, load_all
from tileproof.judge import claim_verdicts, trust
from tileproof.records.models import ClaimsRecord
from tileproof.records.store import Examined, of_kind, read_records, rel, sha256_file
from tileproof.records.trust.runner_keys import load_registry


def claims_records(root: Path, examined: Iterable[Examined] | None = None) -> list[ClaimsRecord]:
    """Every claims record under runs/ that counts (``trust.split``), oldest first; selected by type.
    ``examined``: the records as the caller's ``gather.tree.Tree`` judged them (their standing in history
    included); None reads runs/ here, signatures verified against the registry only."""
    return trust.split(_claims_examined(Path(root), examined))[0]


def _claims_examined(root: Path, examined: Iterable[Examined] | None = None) -> list:
    """The claims records, each with its seal checked and its signature verified."""
    return of_kind(read_records(root, load_registry(root)) if examined is None else list(examined), ClaimsRecord)


def status_lines(root: Path, documents: list[str] | None = None, examined: Iterable[Examined] | None = None
                 ) -> list[str]:
    """One line per claim with its newest decisive verdict, for ``tileproof status`` (``examined``: as for
    :func:`claims_records`)."""
    root = Path(root)
    files = load_all(root, documents or None)
    decided = claim_verdicts.latest(_claims_examined(root, examined))
    rows = [["DOCUMENT", "CLAIM", "VERDICT", "ASSERTED", "TOOLCHAIN", "RUN"]]
    for loaded in files:
        for c in loaded.spec.claims:
            found = decided.get((loaded.spec.document, c.id))
            verdict: str = found.result.verdict if found else "unchecked"
            snippets = [rel(root, p) for p in snippet_paths(loaded, c)]
            if found and claim_verdicts.changed_since(snippets, found, _digests(root, snippets)):
                verdict += " (stale)"
            rows.append([loaded.spec.document, c.id, verdict, "yes" if c.asserted else "no",
                         (found.result.toolchain or "-") if found else "-", found.run_id if found else "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def snippet_paths(loaded: Loaded, claim: Claim) -> list[Path]:
    """The snippets and programs the claim's probes name, as paths."""
    names = [getattr(p.check, "snippet", None) or getattr(p.check, "program", None) for _r, p in claim.probes()]
    return [loaded.folder / n for n in names if n]


def _digests(root: Path, shown: list[str]) -> dict[str, str | None]:
    return {p: sha256_file(root / p) if (root / p).is_file() else None for p in shown}


__all__ = ["claims_records", "snippet_paths", "status_lines"]
