"""What the claims records say about a document's claims today, as pure functions.

``latest`` picks, per (document, claim id), the newest decisive result
(confirmed/refuted) among the claims records that count (``trust.admits``), or
the newest result of any verdict for a claim never decided: a GPU node decides
GPU claims and a machine with nvcc compile claims, so a newer
``unverifiable-here`` never hides an older decision. ``refuted`` lists the
claims of a lesson that the newest decision refutes and that today's claims file
does not mark ``asserted: false``; a refuted claim deleted from the file still
counts (mark it ``asserted: false`` after fixing the document instead), and a
refutation whose snippet changed since still counts, and says so.

Nothing here reads a file: today's claims file comes in as ``ClaimsToday`` and
the digests of its snippets in ``today`` (path → sha256, None when gone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from tileproof.judge import trust
from tileproof.records.models import ClaimResult, ClaimsRecord, Transcript

DECISIVE = ("confirmed", "refuted")


@dataclass(frozen=True)
class ClaimsToday:
    """A document's claims file as it is today (gathered by ``gather.tree``)."""

    file: str | None = None
    """Its repo-relative path; None when the document has no claims file."""
    asserted: Mapping[str, bool] = field(default_factory=dict)
    """Claim id → whether the document still asserts it."""
    snippets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Claim id → the repo-relative snippets and programs its probes name."""


NO_CLAIMS = ClaimsToday()


class Decided(NamedTuple):
    result: ClaimResult
    run_id: str
    attested: dict[str, str]
    """The record's claims files, snippets and documents: path → sha256 as checked."""


@dataclass(frozen=True)
class RefutedClaim:
    """A claim the evidence refutes that the document still asserts: publishing is refused."""

    claim_id: str
    why: str
    """What the evidence showed, with its toolchain, transcript and staleness; never empty."""
    run_id: str
    """The claims record that refuted it."""
    command: str
    """What to do about it."""
    stale: tuple[str, ...] = ()
    """Snippets changed since the refutation (rerun ``nox -s claims``)."""

    @property
    def reason(self) -> str:
        return f"{self.why} (claims record {self.run_id})"


def latest(records: Iterable, document: str | None = None) -> dict[tuple[str, str], Decided]:
    """Per (document, claim id): the deciding result and its record (see the module docstring);
    ``records``: any records (``store.Examined`` or plain); only claims records that count are read."""
    counted, _ = trust.split(r for r in trust.examined(records) if isinstance(r.record, ClaimsRecord))
    out: dict[tuple[str, str], Decided] = {}
    for record in sorted(counted, key=lambda r: (r.created, r.run_id)):  # oldest first: later ones win
        attested = {d.path: d.sha256 for d in record.claims_files}
        for r in record.results:
            if document is not None and r.document != document:
                continue
            key = (r.document, r.id)
            earlier = out.get(key)
            if earlier is None or r.verdict in DECISIVE or earlier.result.verdict not in DECISIVE:
                out[key] = Decided(r, record.run_id, attested)
    return out


def changed_since(snippets: Iterable[str], decided: Decided, today: Mapping[str, str | None]) -> list[str]:
    """The snippets whose bytes differ today (``today``: path → sha256) from what the record checked."""
    return [p for p in dict.fromkeys(snippets) if decided.attested.get(p) != today.get(p)]


def evidence_of(result: ClaimResult) -> Transcript | None:
    """The transcript a reader should open first: the one the result names (``evidence``); for a
    result written before that field, its first step's (stderr when it failed with output, else stdout)."""
    if result.evidence is not None:
        return result.evidence
    step = next(iter(result.steps), None)
    if step is None:
        return None
    return step.stderr if step.exit_code and step.stderr.bytes else step.stdout


def refuted(lesson_id: str, records: Iterable, claims: ClaimsToday,
            today: Mapping[str, str | None]) -> list[RefutedClaim]:
    """The lesson's claims that block publishing, sorted by claim id (see the module docstring)."""
    out = []
    for (_doc, claim_id), decided in sorted(latest(records, lesson_id).items()):
        result = decided.result
        if result.verdict != "refuted" or claims.asserted.get(claim_id) is False:
            continue
        evidence = evidence_of(result)
        why = (result.why or f"refuted by claims record {decided.run_id}") + (
            f" [{result.toolchain}]" if result.toolchain else "")
        why += f" (evidence: {evidence.path})" if evidence else ""
        changed = changed_since(claims.snippets.get(claim_id, ()), decided, today)
        if changed:
            why += f" (stale: {', '.join(changed)} changed since; rerun nox -s claims)"
        where = claims.file or f"lessons/claims/{lesson_id}.claims.yaml"
        out.append(RefutedClaim(claim_id, why, decided.run_id,
                                f"correct the document, then set 'asserted: false' on {claim_id} in {where}",
                                tuple(changed)))
    return out
