"""Signed records: an in-toto Statement v1 in a DSSE envelope, ed25519.

Builds and opens the envelope of a signed record file (``runs/<run id>.json``): the statement's subjects are every
``FileDigest`` and ``Transcript`` the record holds, its predicate the record itself. ed25519 comes from
``cryptography``; this module only builds the DSSE pre-authentication encoding (PAE). A private key inside the
repository is refused here, at signing time, as ``keygen`` refuses to write one. The envelope's shape and what a
signature proves: docs/signing-and-threat-model.md.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import stat
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from pydantic import BaseModel, ConfigDict, Field

from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.models import FileDigest, Transcript

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
PREDICATE_TYPE: Final = "urn:tileproof:record:v1"
"""The predicate is one tileproof record, of whichever kind and ``schema_version`` it says
(v1 of this statement format; the record's own version is read by ``store.validate``)."""
KEY_ENV = "TILEPROOF_SIGNING_KEY"
"""The private key that signs records; unset: records are written unsigned."""
DEFAULT_KEY = Path("~/.config/tileproof/signing-key.pem")
"""Where ``keygen`` writes a key when neither ``--key`` nor the variable names one."""


class Envelope(BaseModel):
    """A DSSE envelope as stored in ``runs/<run id>.json`` (field names are DSSE's)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    payloadType: Literal["application/vnd.in-toto+json"]
    payload: str
    """base64 (standard alphabet) of the in-toto statement's JSON."""
    signatures: list[Signature]

    @functools.cached_property
    def body(self) -> bytes:
        """The decoded payload (ValueError when it is not base64), decoded once."""
        try:
            return base64.b64decode(self.payload, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("payload is not base64") from None


class Signature(BaseModel):
    """One DSSE signature: ed25519 over the PAE of the payload type and payload."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    keyid: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the raw 32-byte public key, hex (``registry.keyid_of``)."""
    sig: str
    """base64 of the 64-byte ed25519 signature."""


class SubjectDigest(BaseModel):
    """in-toto DigestSet; tileproof attests by sha256 only."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Subject(BaseModel):
    """A file the record attests: repository-relative path and digest."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    name: str
    digest: SubjectDigest


class Statement(BaseModel):
    """in-toto Statement v1 whose predicate is one tileproof record."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True)
    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[Subject]
    predicateType: Literal["urn:tileproof:record:v1"]
    predicate: dict
    """The record's JSON (validated as a ``Record`` by the store)."""


Envelope.model_rebuild()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is signed."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def keyid_of(public: Ed25519PublicKey) -> str:
    """sha256 of the raw 32-byte public key, hex."""
    return hashlib.sha256(raw_public(public)).hexdigest()


def raw_public(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _holds_digests(annotation) -> bool:
    """Whether a field of this type can hold a FileDigest or Transcript (at any depth)."""
    if annotation in (FileDigest, Transcript):
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return bool(_digest_fields(annotation))
    return any(_holds_digests(a) for a in typing.get_args(annotation))


@functools.cache
def _digest_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of a model class that can hold file digests; computed once per class."""
    return tuple(name for name, f in cls.model_fields.items() if _holds_digests(f.annotation))


def _walk(value) -> Iterator[FileDigest | Transcript]:
    if isinstance(value, (FileDigest, Transcript)):
        yield value
    elif isinstance(value, BaseModel):
        for name in _digest_fields(type(value)):
            yield from _walk(getattr(value, name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)


def digest_pairs(record) -> set[tuple[str, str]]:
    """(path, sha256) of every file digest the record holds."""
    return {(f.path, f.sha256) for f in _walk(record)}


def subjects_of(record) -> list[Subject]:
    """Every file digest the record holds, one subject per (path, sha256), sorted."""
    return [Subject(name=p, digest=SubjectDigest(sha256=s)) for p, s in sorted(digest_pairs(record))]


def subjects_match(statement: Statement, record) -> bool:
    """The statement's subjects are exactly the record's own file digests."""
    pairs = {(s.name, s.digest.sha256) for s in statement.subject}
    return len(pairs) == len(statement.subject) and pairs == digest_pairs(record)


def inside(path: Path, root: Path) -> bool:
    """True when ``path`` resolves to somewhere under ``root`` (both resolved)."""
    return Path(path).expanduser().resolve().is_relative_to(Path(root).resolve())


def refuse_inside(path: Path, root: Path) -> None:
    """One line and no key when a private key path lies inside the repository."""
    if inside(path, root):
        raise TileproofError(
            f"{path}: a private signing key inside the repository ({Path(root).resolve()}) is refused "
            f"(fix: keep it outside, e.g. {DEFAULT_KEY}, and set {KEY_ENV} to it)")


class Signer:
    """An ed25519 private key loaded once, with its keyid."""

    def __init__(self, private: Ed25519PrivateKey, path: Path | None = None):
        self._private = private
        self.path = path
        """The key file it was read from (checked again against the root it signs for)."""
        self.public = private.public_key()
        self.keyid = keyid_of(self.public)

    def sign(self, data: bytes) -> str:
        return base64.b64encode(self._private.sign(data)).decode()


def load_signer(path: Path, root: Path) -> Signer:
    """The key at ``path``; refused inside ``root``, readable by others, or not ed25519."""
    path = Path(path).expanduser()
    refuse_inside(path, root)
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except OSError as e:
        raise RecordError(path, "", f"cannot read the signing key ({e.strerror})",
                          f"run tileproof keygen --key {path}, or unset {KEY_ENV}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RecordError(path, "", f"private key is accessible to others (mode {stat.S_IMODE(mode):o})",
                          f"chmod 600 {path}")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise RecordError(path, "", "not an unencrypted PEM ed25519 private key",
                          f"make one with tileproof keygen --key {path}")
    return Signer(key, path)


def signer_from_env(root: Path) -> Signer | None:
    """The signer ``$TILEPROOF_SIGNING_KEY`` names, or None when it is unset or empty."""
    path = os.environ.get(KEY_ENV, "")
    return load_signer(Path(path), root) if path else None


def envelope_of(record_json: dict, subjects: list[Subject], signer: Signer | None) -> Envelope:
    """The record as a statement in an envelope, signed when a signer is given."""
    statement = Statement(type_=STATEMENT_TYPE, subject=subjects, predicateType=PREDICATE_TYPE,
                          predicate=record_json)
    payload = statement.model_dump_json(by_alias=True).encode()
    sigs = [] if signer is None else [Signature(keyid=signer.keyid, sig=signer.sign(pae(PAYLOAD_TYPE, payload)))]
    return Envelope(payloadType=PAYLOAD_TYPE, payload=base64.b64encode(payload).decode(), signatures=sigs)


def is_envelope(raw: dict) -> bool:
    """A record file's JSON object is an envelope (else it is a plain, unsigned record)."""
    return "payloadType" in raw and "schema_version" not in raw


def payload_bytes(envelope: Envelope) -> bytes:
    """The statement bytes the signatures cover (decoded once per envelope)."""
    return envelope.body


def statement_of(envelope: Envelope, path: Path | str) -> Statement:
    """The envelope's statement; a RecordError naming the field when it is not one."""
    try:
        return Statement.model_validate_json(payload_bytes(envelope))
    except ValueError as e:
        msg = e.errors()[0]["msg"] if hasattr(e, "errors") else str(e)
        raise RecordError(path, "payload", f"not an in-toto {STATEMENT_TYPE} with {PREDICATE_TYPE} ({msg})",
                          "restore the record from git; records are never edited") from None


def verify_one(public: Ed25519PublicKey, signature: Signature, message: bytes) -> bool:
    """ed25519 verification of one DSSE signature over ``message`` (the PAE)."""
    try:
        public.verify(base64.b64decode(signature.sig, validate=True), message)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True

