"""Reading claims records back: the newest decisive verdict of each claim, for publish and status.

The claims-file format is ``claims.spec``; running probes is ``claims.checks``; combining
their outcomes is ``claims.outcomes``; the command is ``commands/claims.py``. Refuted
claims are findings about documents; ``refuted_claims`` is what publish asks before it
flips a lesson.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from tileproof.claims.spec import CLAIMS_DIR, SUFFIX, Claim, Loaded, load_all, load_file
from tileproof.records.models import ClaimResult, ClaimsRecord
from tileproof.records.store import RUNS, load_record, rel, seal_of, sha256_file

DECISIVE = ("confirmed", "refuted")


def claims_records(root: Path) -> list[ClaimsRecord]:
    """Every claims record under runs/ with an intact seal, oldest first."""
    folder = Path(root) / RUNS
    out = []
    for path in sorted(folder.glob("*-claims-*.json")) if folder.is_dir() else []:
        record = load_record(path)
        if isinstance(record, ClaimsRecord) and record.seal == seal_of(record):
            out.append(record)
    return out


class Decided(NamedTuple):
    result: ClaimResult
    run_id: str
    attested: dict[str, str]
    """The record's claims files, snippets and documents: path → sha256 as checked."""


def latest(root: Path, document: str | None = None) -> dict[tuple[str, str], Decided]:
    """Per (document, claim id): the newest decisive result (confirmed/refuted) and its record;
    a claim never decided anywhere gets its newest result of any verdict.

    A GPU node's run decides GPU claims and a machine with nvcc decides compile claims, so a
    newer unverifiable-here never hides an older decision.
    """
    out: dict[tuple[str, str], Decided] = {}
    for record in claims_records(root):  # oldest first: later ones win
        attested = {d.path: d.sha256 for d in record.claims_files}
        for r in record.results:
            if document is not None and r.document != document:
                continue
            key = (r.document, r.id)
            earlier = out.get(key)
            if earlier is None or r.verdict in DECISIVE or earlier.result.verdict not in DECISIVE:
                out[key] = Decided(r, record.run_id, attested)
    return out


def changed_since(root: Path, loaded: Loaded | None, claim: Claim | None, decided: Decided) -> list[str]:
    """The claim's snippets whose bytes differ today from what its record checked."""
    if loaded is None or claim is None:
        return []
    out = []
    for _role, probe in claim.probes():
        name = getattr(probe.check, "snippet", None) or getattr(probe.check, "program", None)
        if name:
            path = loaded.folder / name
            shown = rel(root, path)
            if decided.attested.get(shown) != (sha256_file(path) if path.is_file() else None):
                out.append(shown)
    return list(dict.fromkeys(out))


def evidence_of(result: ClaimResult) -> str | None:
    """The transcript a reader should open first: the contradicting probe's (its role leads the why)."""
    role = result.why.split(":", 1)[0].split("+")[0] if ":" in result.why else ""
    steps = [s for s in result.steps if f".{role}." in s.name] if role in ("check", "wrong", "right") else []
    step = next(iter(steps or result.steps), None)
    if step is None:
        return None
    return step.stderr.path if step.exit_code and step.stderr.bytes else step.stdout.path


def refuted_claims(root: Path, lesson_id: str) -> list[tuple[str, str, str]]:
    """``(claim id, why with evidence, run id)`` for each claim of this document that the newest
    decisive claims result refutes and that today's claims file does not mark ``asserted: false``.

    Empty when the document has no claims or none is refuted. A refuted claim that was deleted
    from the claims file still blocks: mark it ``asserted: false`` (after fixing the document)
    instead of deleting it. A refutation whose snippet changed since still blocks, and says so
    (rerun ``nox -s claims``). Raises ``RecordError`` (one line) for an unreadable claims file
    or record.
    """
    root = Path(root)
    path = root / CLAIMS_DIR / f"{lesson_id}{SUFFIX}"
    loaded = load_file(path, rel(root, path)) if path.is_file() else None
    today = {c.id: c for c in loaded.spec.claims} if loaded else {}
    out = []
    for (_doc, claim_id), decided in sorted(latest(root, lesson_id).items()):
        result = decided.result
        if result.verdict != "refuted":
            continue
        claim = today.get(claim_id)
        if claim is not None and not claim.asserted:
            continue
        evidence = evidence_of(result)
        why = result.why + (f" [{result.toolchain}]" if result.toolchain else "")
        why += f" (evidence: {evidence})" if evidence else ""
        changed = changed_since(root, loaded, claim, decided)
        if changed:
            why += f" (stale: {', '.join(changed)} changed since; rerun nox -s claims)"
        out.append((claim_id, why, decided.run_id))
    return out


def status_lines(root: Path, documents: list[str] | None = None) -> list[str]:
    """One line per claim with its newest decisive verdict, for ``tileproof status``."""
    root = Path(root)
    files = load_all(root, documents or None)
    decided = latest(root)
    rows = [["DOCUMENT", "CLAIM", "VERDICT", "ASSERTED", "TOOLCHAIN", "RUN"]]
    for loaded in files:
        for c in loaded.spec.claims:
            found = decided.get((loaded.spec.document, c.id))
            verdict = found.result.verdict if found else "unchecked"
            if found and changed_since(root, loaded, c, found):
                verdict += " (stale)"
            rows.append([loaded.spec.document, c.id, verdict, "yes" if c.asserted else "no",
                         (found.result.toolchain or "-") if found else "-", found.run_id if found else "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


__all__ = ["Decided", "changed_since", "claims_records", "evidence_of", "latest", "refuted_claims", "status_lines"]
