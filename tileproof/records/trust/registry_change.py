"""A change of the runner registry, signed by a key the registry held before it (TUF's root rotation).

Every version of ``lessons/runners.yaml`` after the trust root must be endorsed by a key
that the version before it trusted with ``registry`` among its ``may_sign``: the previous
registry signs the next one. The endorsement is a DSSE envelope (ed25519, as records are
signed, ``records.trust.signing``) of an in-toto Statement v1 whose one subject is the new
registry's bytes and whose predicate names the previous registry's bytes::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "lessons/runners.yaml", "digest": {"sha256": <new>}}],
     "predicateType": "urn:tileproof:registry-change:v1",
     "predicate": {"previous": {"name": "lessons/runners.yaml", "digest": {"sha256": <previous>}}}}

committed beside the change as ``lessons/registry-signatures/<new[:16]>-<previous[:16]>.json``
(``tileproof sign-registry`` writes it). Binding both digests makes each endorsement
one step of the chain: it cannot be replayed onto another version. That the same two versions
coming round again grant nothing a later change took away, and that a revoked key's endorsement
counts only where history added it before the revocation, are ``judge.trust.trust_root``'s rules (by
the commits that added the file's bytes, ``SignedChange.sha256``), as are which change needs an
endorsement and whose key counts; this module only builds, reads and checks the envelopes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tileproof.records.errors import RecordError
from tileproof.records.safe_read import decode, parse_json, read_bytes
from tileproof.records.schemas import schema
from tileproof.records.trust import signing
from tileproof.records.trust.runner_keys import REGISTRY

SIGNATURES = Path("lessons") / "registry-signatures"
"""Where each registry change's endorsement is committed (one file per change, never edited)."""
PREDICATE_TYPE: Final = "urn:tileproof:registry-change:v1"


class ChangePredicate(BaseModel):
    """What the endorsed registry replaces."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    previous: signing.Subject
    """The registry version this one follows (name ``lessons/runners.yaml``, its sha256)."""


@schema("registry-change-statement", 1)
class ChangeStatement(BaseModel):
    """in-toto Statement v1: "the registry with these bytes follows the one with those"."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True)
    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[signing.Subject] = Field(min_length=1, max_length=1)
    """The new registry (name ``lessons/runners.yaml``, its sha256)."""
    predicateType: Literal["urn:tileproof:registry-change:v1"]
    predicate: ChangePredicate

    @property
    def new(self) -> str:
        return self.subject[0].digest.sha256

    @property
    def previous(self) -> str:
        return self.predicate.previous.digest.sha256


@dataclass(frozen=True)
class SignedChange:
    """One endorsement file as read: its statement and envelope."""

    path: str
    statement: ChangeStatement
    envelope: signing.Envelope
    sha256: str
    """The sha256 of the file's bytes: how git history names the commits that added it
    (``records.trust.trust_history.TrustHistory.endorsements``)."""

    def signed_by(self, keyid: str, public: Ed25519PublicKey) -> bool:
        """Whether a signature of ``keyid`` in the envelope verifies with ``public`` over the statement."""
        message = signing.pae(self.envelope.payloadType, signing.payload_bytes(self.envelope))
        return any(s.keyid == keyid and signing.verify_one(public, s, message) for s in self.envelope.signatures)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def statement_for(previous: bytes, new: bytes) -> ChangeStatement:
    """The statement that endorses ``new`` as the registry following ``previous``."""
    def named(data: bytes) -> signing.Subject:
        return signing.Subject(name=REGISTRY.as_posix(), digest=signing.SubjectDigest(sha256=digest(data)))
    return ChangeStatement(type_=signing.STATEMENT_TYPE, subject=[named(new)], predicateType=PREDICATE_TYPE,
                           predicate=ChangePredicate(previous=named(previous)))


def file_for(statement: ChangeStatement) -> Path:
    """Where the endorsement of this change is committed."""
    return SIGNATURES / f"{statement.new[:16]}-{statement.previous[:16]}.json"


def load_changes(root: Path) -> tuple[list[SignedChange], list[tuple[str, str]]]:
    """Every endorsement file under ``lessons/registry-signatures/`` (read through ``safe_read``), and
    (file, why) for each that is not one. A missing folder is none."""
    folder = Path(root) / SIGNATURES
    if not folder.is_dir():
        return [], []
    found: list[SignedChange] = []
    bad: list[tuple[str, str]] = []
    for path in sorted(folder.iterdir()):
        rel = f"{SIGNATURES.as_posix()}/{path.name}"
        try:
            change = read_change(root, rel)
        except RecordError as e:
            bad.append((rel, f"{e.field + ': ' if e.field else ''}{e.problem}"))
            continue
        found.append(change)
    return found, bad


def read_change(root: Path, rel: str) -> SignedChange:
    """One endorsement file; a ``RecordError`` (or ``InputRefused``) naming the problem otherwise."""
    if not rel.endswith(".json"):
        raise RecordError(rel, "", "is not an endorsement (lessons/registry-signatures/ holds only .json files "
                                   "tileproof sign-registry writes)", "move it out of lessons/registry-signatures/")
    data = read_bytes(root, rel, "lesson")
    raw = parse_json(decode(data, rel), rel)
    fix = "write it again with tileproof sign-registry; endorsements are never edited"
    try:
        envelope = signing.Envelope.model_validate(raw)
        statement = ChangeStatement.model_validate_json(signing.payload_bytes(envelope))
    except (ValidationError, ValueError) as e:
        msg = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
        raise RecordError(rel, "payload", f"not a DSSE envelope of a {PREDICATE_TYPE} statement ({msg})", fix) from None
    return SignedChange(rel, statement, envelope, digest(data))
