"""Signed records: an in-toto Statement v1 in a DSSE envelope, ed25519.

Builds and opens the envelope of a signed record file (``runs/<run id>.json``): a statement of predicate type
``urn:tileproof:record:v2`` whose subjects are the record's products (its transcripts, a compile's artifacts) and whose
predicate holds the record and its materials (``products_and_materials``); ``urn:tileproof:record:v1`` statements,
written before, are read as written. ed25519 comes from ``cryptography``; this module only builds the DSSE
pre-authentication encoding (PAE). A private key inside the repository is refused here, at signing time, as
``keygen`` refuses to write one. The envelope's shape and what a signature proves:
docs/threat-model.md, "Records and signatures".
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import stat
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tileproof.records.base import found_in
from tileproof.records.errors import KeyExposed, RecordError, TileproofError
from tileproof.records.models import BuildResult, FileDigest, Transcript
from tileproof.records.redact import KeyWatch, watch_key
from tileproof.records.schemas import schema

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
PREDICATE_TYPE_V1: Final = "urn:tileproof:record:v1"
"""v1 (records signed before 2026-12-02): the predicate is the record; every file digest is a subject."""
PREDICATE_TYPE: Final = "urn:tileproof:record:v2"
"""Written now: the predicate is ``{record, materials}``; the subjects are the record's products only
(the record's own ``schema_version`` is read by ``store.validate``)."""
PRODUCED: frozenset[tuple[type, str]] = frozenset({(BuildResult, "artifact")})
"""(model, field) of the file digests that are a step's products; every ``Transcript`` is one too.
Every other ``FileDigest`` is a material (what the step read)."""
KEY_ENV = "TILEPROOF_SIGNING_KEY"
"""The private key that signs records; unset: records are written unsigned."""
DEFAULT_KEY = Path("~/.config/tileproof/signing-key.pem")
"""Where ``keygen`` writes a key when neither ``--key`` nor the variable names one."""


@schema("signed-record", 1)
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


@schema("record-statement", 1)
class Statement(BaseModel):
    """in-toto Statement v1 whose predicate is one tileproof record."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True)
    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[Subject]
    predicateType: Literal["urn:tileproof:record:v1"]
    predicate: dict
    """The record's JSON (validated as a ``Record`` by the store)."""


class RecordPredicate(BaseModel):
    """The predicate of a ``urn:tileproof:record:v2`` statement: the record and what its step consumed."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    record: dict
    """The record's JSON, exactly as an unsigned record file holds it (validated as a ``Record`` by the store)."""
    materials: list[Subject]
    """in-toto resource descriptors (name, digest) of the files the step read: sources, helpers, lessons,
    claims files, the binary a run ran; sorted by name."""


@schema("record-statement", 2)
class StatementV2(BaseModel):
    """in-toto Statement v1 of predicate type ``urn:tileproof:record:v2``: subjects are the record's products
    (``Statement``, predicate type v1, is what records signed before it hold; read, no longer written)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True)
    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[Subject]
    """What the step produced: transcripts under evidence/ and artifacts under build/, sorted by name."""
    predicateType: Literal["urn:tileproof:record:v2"]
    predicate: RecordPredicate


AnyStatement = Statement | StatementV2
"""A record's statement as read: either predicate type."""


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


def _walk(record) -> Iterator[tuple[FileDigest | Transcript, bool]]:
    """Every file digest ``record`` holds, with whether it is a product (a transcript, or reached through a field
    of ``PRODUCED``)."""
    for found, produced in found_in(record, (FileDigest, Transcript), PRODUCED):
        yield typing.cast(FileDigest | Transcript, found), produced or isinstance(found, Transcript)


def digest_pairs(record) -> set[tuple[str, str]]:
    """(path, sha256) of every file digest the record holds (a v1 statement's subjects)."""
    return {(f.path, f.sha256) for f, _ in _walk(record)}


def products_and_materials(record) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(path, sha256) of what the record's step produced (transcripts, built artifacts), and of what it read
    (every other file digest), in one walk."""
    products: set[tuple[str, str]] = set()
    materials: set[tuple[str, str]] = set()
    for f, produced in _walk(record):
        (products if produced else materials).add((f.path, f.sha256))
    return products, materials


def _descriptors(pairs: set[tuple[str, str]]) -> list[Subject]:
    return [Subject(name=p, digest=SubjectDigest(sha256=s)) for p, s in sorted(pairs)]


def record_statement(record_json: dict, record) -> StatementV2:
    """The statement written now for ``record`` (``record_json``: its JSON as a plain record file holds it)."""
    products, materials = products_and_materials(record)
    return StatementV2(type_=STATEMENT_TYPE, subject=_descriptors(products), predicateType=PREDICATE_TYPE,
                       predicate=RecordPredicate(record=record_json, materials=_descriptors(materials)))


def _same(descriptors: list[Subject], pairs: set[tuple[str, str]]) -> bool:
    got = {(s.name, s.digest.sha256) for s in descriptors}
    return len(got) == len(descriptors) and got == pairs


def subjects_match(statement: AnyStatement, record) -> bool:
    """The statement names exactly the record's own file digests: v1, every one as a subject; v2, its
    products as subjects and the rest as materials."""
    if isinstance(statement, Statement):
        return _same(statement.subject, digest_pairs(record))
    products, materials = products_and_materials(record)
    return _same(statement.subject, products) and _same(statement.predicate.materials, materials)


def record_json(statement: AnyStatement) -> dict:
    """The record's JSON object a statement carries (the predicate itself in v1)."""
    return statement.predicate if isinstance(statement, Statement) else statement.predicate.record


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

    def __init__(self, private: Ed25519PrivateKey, path: Path | None = None,
                 before: Callable[[], None] | None = None):
        self._private = private
        self.path = path
        """The key file it was read from (checked again against the root it signs for)."""
        self.public = private.public_key()
        self.keyid = keyid_of(self.public)
        self._before = before

    def sign(self, data: bytes) -> str:
        if self._before is not None:
            self._before()  # raises (one line) when this signature must not be made
        return base64.b64encode(self._private.sign(data)).decode()

    @functools.cached_property
    def watch(self) -> KeyWatch:
        """The key's private material as redaction finds it (``redact.KeyWatch``)."""
        return KeyWatch(self._private.private_bytes_raw())

    def guarded(self, before: Callable[[], None]) -> Signer:
        """The same key, calling ``before`` ahead of every signature (``runner.integrity.guard``)."""
        return Signer(self._private, self.path, before)


def refuse_exposed(signer: Signer, path: Path | str, data: bytes) -> None:
    """One :class:`KeyExposed` line instead of a signature, when the key's material was in anything this
    process redacted (a program printed or left it) or is in ``data``, the record about to be signed: a
    key a program could read signs nothing more."""
    seen = signer.watch.seen + (1 if signer.watch.found_in(data) else 0)
    if seen:
        raise KeyExposed(
            f"{path}: not signed: the signing key {signer.keyid[:16]} was in what a program printed or left "
            f"({seen} time(s); redacted, never stored); a key a program could read is exposed (fix: revoke it in "
            f"lessons/runners.yaml, make a new one with tileproof keygen, keep it out of the programs' reach, "
            f"and run again)")


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
    signer = Signer(key, path)
    watch_key(signer.watch)  # everything this process redacts from now on is searched for the key
    return signer


def make_key(path: Path) -> Ed25519PrivateKey:
    """A new ed25519 key, written to ``path`` (PEM, PKCS#8, mode 0600, its folder 0700); never over an existing
    file. The caller refuses a path inside the repository first (``refuse_inside``)."""
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise TileproofError(f"{path}: already exists; a key is never overwritten "
                             f"(fix: choose another --key, or revoke the old key first)") from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return private


def signer_from_env(root: Path) -> Signer | None:
    """The signer ``$TILEPROOF_SIGNING_KEY`` names, or None when it is unset or empty."""
    path = os.environ.get(KEY_ENV, "")
    return load_signer(Path(path), root) if path else None


def envelope_of(statement: BaseModel, signer: Signer | None) -> Envelope:
    """A statement (a record's, or a registry change's) in a DSSE envelope, signed when a signer is given."""
    payload = statement.model_dump_json(by_alias=True).encode()
    sigs = [] if signer is None else [Signature(keyid=signer.keyid, sig=signer.sign(pae(PAYLOAD_TYPE, payload)))]
    return Envelope(payloadType=PAYLOAD_TYPE, payload=base64.b64encode(payload).decode(), signatures=sigs)


def is_envelope(raw: dict) -> bool:
    """A record file's JSON object is an envelope (else it is a plain, unsigned record)."""
    return "payloadType" in raw and "schema_version" not in raw


def payload_bytes(envelope: Envelope) -> bytes:
    """The statement bytes the signatures cover (decoded once per envelope)."""
    return envelope.body


def statement_of(envelope: Envelope, path: Path | str) -> AnyStatement:
    """The envelope's statement, of either predicate type; a RecordError naming the field when it is not one."""
    try:
        body = payload_bytes(envelope)
    except ValueError as e:
        raise _not_a_statement(path, str(e)) from None
    kinds: list[type[Statement] | type[StatementV2]] = [StatementV2, Statement]
    if PREDICATE_TYPE.encode() not in body:  # the cheap guess first; the other shape is still tried
        kinds.reverse()
    first: ValueError | None = None
    for kind in kinds:
        try:
            return kind.model_validate_json(body)
        except ValueError as e:
            first = first or e
    msg = first.errors()[0]["msg"] if isinstance(first, ValidationError) else str(first)
    raise _not_a_statement(path, msg) from None


def _not_a_statement(path: Path | str, msg: str) -> RecordError:
    return RecordError(path, "payload", f"not an in-toto {STATEMENT_TYPE} with {PREDICATE_TYPE} or "
                                        f"{PREDICATE_TYPE_V1} ({msg})",
                       "restore the record from git; records are never edited")


def verify_one(public: Ed25519PublicKey, signature: Signature, message: bytes) -> bool:
    """ed25519 verification of one DSSE signature over ``message`` (the PAE)."""
    try:
        public.verify(base64.b64decode(signature.sig, validate=True), message)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True

