"""What the claims records say about a document's claims today, as pure functions.

``fold`` is the one implementation of "which verdict stands" (the newest decisive result per claim);
``by_release`` groups claims records by the CUDA release their toolchain shares, and the claims matrix and the
publish decision fold each group; ``refuted`` and ``unchecked_releases`` are what the publish decision asks for a
lesson's release. Nothing here reads a file: today's claims file comes in as ``ClaimsToday`` and the digests of its
snippets in ``today`` (path → sha256, None when gone). The rules: docs/claims.md, "Which verdict stands".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from tileproof.judge import trust
from tileproof.records.models import (
    ClaimResult,
    ClaimResultV1,
    ClaimsRecord,
    Toolchain,
    Transcript,
)

DECISIVE = ("confirmed", "refuted")


@dataclass(frozen=True, order=True)
class Release:
    """A toolchain release: the CUDA major.minor every piece of a record's toolchain shares."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> Release:
        """``13.4`` (or ``13.4.92``) as a release; anything else is a ``ValueError``."""
        m = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)*", text.strip())
        if not m:
            raise ValueError(f"{text!r} is not a release (expected MAJOR.MINOR such as 13.4)")
        return cls(int(m.group(1)), int(m.group(2)))


def release_of(toolchain: Toolchain) -> Release | None:
    """The release a record's toolchain shares (a claims record's verdicts hold for it, a run
    record's evidence was made with it); None when its pieces disagree."""
    shared = toolchain.major_minor
    return Release.parse(shared) if shared else None


def by_release(records: Iterable[ClaimsRecord]) -> tuple[dict[Release, list[ClaimsRecord]], list[ClaimsRecord]]:
    """The records grouped by release (releases ascending, each group in the given order), and
    the records that share no release."""
    groups: dict[Release, list[ClaimsRecord]] = {}
    mixed: list[ClaimsRecord] = []
    for record in records:
        release = release_of(record.toolchain)
        if release is None:
            mixed.append(record)
        else:
            groups.setdefault(release, []).append(record)
    return dict(sorted(groups.items())), mixed


def matrix_command(release: Release) -> str:
    """The command that writes a claims record for ``release`` (the noxfile's parametrised session)."""
    return f"nox -s \"claims-matrix(release='{release}')\""


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
    """One claim's deciding result and the record it is in."""

    result: ClaimResult | ClaimResultV1
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


def fold(records: Iterable[ClaimsRecord], document: str | None = None) -> dict[tuple[str, str], Decided]:
    """Per (document, claim id): the deciding result among ``records``, oldest first as ``trust.split`` gives
    them (``standing.age``: by first commit, then ``created``; see the module docstring). Pure: every record
    given is read (``latest`` and ``by_release`` decide which count)."""
    out: dict[tuple[str, str], Decided] = {}
    for record in records:  # oldest first: later ones win
        attested = {d.path: d.sha256 for d in record.claims_files}
        for r in record.results:
            if document is not None and r.document != document:
                continue
            key = (r.document, r.id)
            earlier = out.get(key)
            if earlier is None or r.verdict in DECISIVE or earlier.result.verdict not in DECISIVE:
                out[key] = Decided(r, record.run_id, attested)
    return out


def counted(records: Iterable) -> list[ClaimsRecord]:
    """The claims records among ``records`` (``store.Examined`` or plain) that count (``trust.split``)."""
    return trust.split(r for r in trust.examined(records) if isinstance(r.record, ClaimsRecord))[0]


def latest(records: Iterable, document: str | None = None) -> dict[tuple[str, str], Decided]:
    """Per (document, claim id): the deciding result and its record over every release;
    ``records``: any records (``store.Examined`` or plain); only claims records that count are read."""
    return fold(counted(records), document)


def changed_since(snippets: Iterable[str], decided: Decided, today: Mapping[str, str | None]) -> list[str]:
    """The snippets whose bytes differ today (``today``: path → sha256) from what the record checked."""
    return [p for p in dict.fromkeys(snippets) if decided.attested.get(p) != today.get(p)]


def evidence_of(result: ClaimResult | ClaimResultV1) -> Transcript | None:
    """The transcript a reader should open first: the one the result names (``evidence``); for a
    result written before that field, its first step's (stderr when it failed with output, else stdout)."""
    if result.evidence is not None:
        return result.evidence
    step = next(iter(result.steps), None)
    if step is None:
        return None
    return step.stderr if step.exit_code and step.stderr.bytes else step.stdout


def refuted(lesson_id: str, records: Iterable, claims: ClaimsToday,
            today: Mapping[str, str | None], releases: Iterable[Release] | None = None) -> list[RefutedClaim]:
    """The lesson's claims that block publishing, sorted by claim id then release (see the module
    docstring); ``releases``: those of the lesson's accepted evidence, None for every release at once."""
    if releases is None:
        scopes: list[tuple[Release | None, dict[tuple[str, str], Decided]]] = [(None, latest(records, lesson_id))]
    else:
        groups = by_release(counted(records))[0]
        scopes = [(rel, fold(groups.get(rel, []), lesson_id)) for rel in sorted(set(releases))]
    found = [(claim_id, rel, decided) for rel, decided_by in scopes for (_doc, claim_id), decided in decided_by.items()]
    out = []
    for claim_id, rel, decided in sorted(found, key=lambda f: (f[0], f[1] or Release(0, 0))):
        result = decided.result
        if result.verdict != "refuted" or claims.asserted.get(claim_id) is False:
            continue
        evidence = evidence_of(result)
        why = (result.why or f"refuted by claims record {decided.run_id}") + (
            f" [{result.toolchain}]" if result.toolchain else "")
        if rel is not None:
            why += f" (refuted on {rel}, the release of the lesson's evidence)"
        why += f" (evidence: {evidence.path})" if evidence else ""
        changed = changed_since(claims.snippets.get(claim_id, ()), decided, today)
        if changed:
            why += f" (stale: {', '.join(changed)} changed since; rerun nox -s claims)"
        where = claims.file or f"lessons/claims/{lesson_id}.claims.yaml"
        out.append(RefutedClaim(claim_id, why, decided.run_id,
                                f"correct the document, then set 'asserted: false' on {claim_id} in {where}",
                                tuple(changed)))
    return out


@dataclass(frozen=True)
class UncheckedRelease:
    """A release the lesson's evidence was made with that no claims record of its document covers:
    publishing is refused until the claims are checked on it (another release's verdict never stands in)."""

    release: Release
    document: str
    evidence: tuple[str, ...]
    """Run ids of the accepted run records made with this release."""

    @property
    def reason(self) -> str:
        return (f"no claims record of release {self.release} checked {self.document}'s claims, and the "
                f"lesson's evidence ({', '.join(self.evidence)}) was made with {self.release}")

    @property
    def command(self) -> str:
        return matrix_command(self.release)


def unchecked_releases(lesson_id: str, records: Iterable, claims: ClaimsToday,
                       evidence: Mapping[Release, Iterable[str]]) -> list[UncheckedRelease]:
    """The releases of ``evidence`` (release → accepted run ids) on which no counted claims record
    checked the lesson's document; none when the document has no claims (no claims file, no results)."""
    groups = by_release(counted(records))[0]
    if claims.file is None and not any(fold(g, lesson_id) for g in groups.values()):
        return []
    return [UncheckedRelease(rel, lesson_id, tuple(sorted(set(ids)))) for rel, ids in sorted(evidence.items())
            if not fold(groups.get(rel, []), lesson_id)]
