"""Test helpers for signed records: in-memory runner keys and their registry entries.

Imported by the signing, registry, tamper and history tests (``tests/`` is on
sys.path when pytest runs them); not a test module itself.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tileproof.records import store
from tileproof.records.trust import runner_keys, signing

REPO = Path(__file__).resolve().parents[1]
H200_RUN = REPO / "runs" / "20261129T122955Z-run-78254821.json"
"""A committed (unsigned, legacy) H200 run record: real digests and transcripts."""


def new_signer() -> signing.Signer:
    return signing.Signer(Ed25519PrivateKey.generate())


def v1_subjects(record) -> list[signing.Subject]:
    """A v1 statement's subjects: every file digest the record holds, one per (path, sha256), sorted (as the
    statements written before v2 hold them; ``signing.subjects_match`` reads them back)."""
    pairs = sorted(signing.digest_pairs(record))
    return [signing.Subject(name=p, digest=signing.SubjectDigest(sha256=s)) for p, s in pairs]


def entry(signer: signing.Signer, *, owner: str = "test runner", may_sign=runner_keys.RUNNER_KINDS,
          added: date = date(2025, 1, 1), revoked_since: datetime | None = None) -> runner_keys.RunnerKey:
    """The registry entry of ``signer``; ``added`` before every fixture record it signs (a record dated
    before its key was added counts for nothing: ``judge.trust.standing``)."""
    return runner_keys.RunnerKey(owner=owner, keyid=signer.keyid, public_key=signing.raw_public(signer.public).hex(),
                              may_sign=list(may_sign), added=added, revoked_since=revoked_since)


def registry_of(*entries: runner_keys.RunnerKey) -> runner_keys.RunnerRegistry:
    return runner_keys.RunnerRegistry(registry_version=1, runners=list(entries))


def write_registry(root: Path, reg: runner_keys.RunnerRegistry) -> Path:
    path = root / runner_keys.REGISTRY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(reg.model_dump(mode="json", exclude_none=True), sort_keys=False))
    return path


def real_run(**update):
    """The committed H200 run record, optionally with fields changed (e.g. ``created``)."""
    rec = store.load_record(H200_RUN)
    return rec.model_copy(update=update) if update else rec
