"""The runner registry: which public keys may sign which records, and when.

``lessons/runners.yaml`` (committed; adding, rotating or revoking a key is a
reviewed commit) lists each runner key: owner, keyid, raw public key (hex),
the record kinds it may sign (and ``registry``: it may endorse the next change
of this file, ``records.trust.registry_change``), the date it was added and, once
revoked, the instant from which its signatures no longer count. :func:`verify`
checks a record against the file as it is; what git history says about the
record and its key is ``judge.trust.standing``'s and ``judge.trust.trust_root``'s (the
rules: docs/threat-model.md, "The runner registry and the trust root").

It lives under ``lessons/`` and not ``runs/``: ``runs/`` and ``evidence/`` are
the append-only log GPU hosts add to (every file there must keep its first
committed bytes), while the registry is policy that changes on every rotation
and must be reviewed like the lessons it vouches for.

:func:`verify` is the one place a record's :data:`Trust` is decided.
"""

from __future__ import annotations

import hashlib
import typing
from dataclasses import dataclass
from datetime import date
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal

import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import (
    AwareDatetime,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tileproof.records import models
from tileproof.records.errors import InputRefused, RecordError
from tileproof.records.safe_read import PARSED_KEPT, decode, parse_yaml, read_bytes
from tileproof.records.schemas import schema
from tileproof.records.trust import signing

REGISTRY = Path("lessons") / "runners.yaml"
REGISTRY_VERSION = 1
REGISTRY_KIND = "registry"
"""The one thing a key may sign besides records: the next version of the registry itself."""

if typing.TYPE_CHECKING:
    RecordKind = str  # built from the models at run time, which a type checker cannot follow
else:
    RecordKind = Literal[tuple(typing.get_args(c.model_fields["kind"].annotation)[0]
                               for c in typing.get_args(typing.get_args(models.Record)[0]))]
"""Every record kind (``compile``, ``run``, ``session``, ``bench``, ``claims``), from the models."""
RUNNER_KINDS: tuple[str, ...] = typing.get_args(RecordKind)

if typing.TYPE_CHECKING:
    SignKind = str
else:
    SignKind = Literal[RUNNER_KINDS + (REGISTRY_KIND,)]
"""What a key may sign: a record kind, or ``registry`` (a change of ``lessons/runners.yaml``)."""
SIGN_KINDS: tuple[str, ...] = typing.get_args(SignKind)

Trust = Literal["verified", "unsigned", "unknown-key", "bad-signature", "revoked", "kind-not-allowed",
                "subject-mismatch", "unisolated-not-allowed", "unendorsed-key", "dated-before-key",
                "dated-after-commit"]
"""A record's standing against the registry. Only ``verified`` means a registered runner,
allowed to sign this kind and not revoked at the record's time, signed exactly these bytes
and these subjects are the record's own digests. ``unsigned``: a plain (legacy) record or
an envelope without signatures; ``subject-mismatch``: validly signed, but the statement's
subjects are not the digests the record holds. The last three come from git history
(``judge.trust.standing``): ``unendorsed-key``, a key added by a registry change no key held before
signed; ``dated-before-key``, a record dated before its key was added; ``dated-after-commit``,
a record dated after the commit that first added it (or after now, when not committed)."""


class RunnerKey(models.Model):
    """One runner's public key and what it may sign."""

    owner: str = Field(min_length=1)
    """Who holds the private key (a person or a host), e.g. ``lead on h200-runner-1``."""
    keyid: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the raw public key, hex (what ``keygen`` prints)."""
    public_key: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The raw 32-byte ed25519 public key, hex."""
    may_sign: list[SignKind] = Field(min_length=1)
    """Record kinds this key may sign, and ``registry`` when it may sign the next registry change."""
    added: date
    """When the key was registered (the reviewed commit's date)."""
    revoked_since: AwareDatetime | None = None
    """Records this key signed with ``created`` at or after this instant are refused."""
    unisolated: bool = False
    """Whether this key may sign records whose programs ran without a wall (``Step.isolation`` ``none``: a host
    without user namespaces where tileproof is not root); false: such a record is ``unisolated-not-allowed``."""

    @model_validator(mode="after")
    def _keyid_is_the_key_digest(self):
        if hashlib.sha256(bytes.fromhex(self.public_key)).hexdigest() != self.keyid:
            raise ValueError("keyid is not the sha256 of public_key (copy both from tileproof keygen)")
        return self


TreePolicy = Literal["signed-only"]
"""What a registry may say about the trust policy: only ever to tighten it (``judge.trust.effective``)."""


@schema("runner-registry", REGISTRY_VERSION)
class RunnerRegistry(models.Model):
    """``lessons/runners.yaml``: every runner key ever registered (revoked ones stay, revoked)."""

    registry_version: Literal[1]
    runners: list[RunnerKey]
    policy: TreePolicy | None = None
    """``signed-only``: in this tree only verified records count, whatever the code's default
    (``judge.trust.POLICY``). A registry can tighten the policy, never loosen it; absent: the default."""

    @property
    def in_force(self) -> TreePolicy | None:
        """The tree's policy: ``signed-only`` when the registry says so or lists any runner key (a tree
        that registers keys accepts only signed records); None, the code's default, otherwise."""
        return "signed-only" if self.policy == "signed-only" or self.runners else None

    @field_validator("runners")
    @classmethod
    def _unique(cls, runners: list[RunnerKey]) -> list[RunnerKey]:
        seen = [r.keyid for r in runners]
        dup = sorted({k for k in seen if seen.count(k) > 1})
        if dup:
            raise ValueError(f"keyid {dup[0]} is listed twice (one entry per key; revoke, never re-add)")
        return runners

    @cached_property
    def keys(self) -> dict[str, tuple[RunnerKey, Ed25519PublicKey]]:
        """keyid → (entry, loaded public key), built once per registry."""
        return {r.keyid: (r, Ed25519PublicKey.from_public_bytes(bytes.fromhex(r.public_key))) for r in self.runners}


EMPTY = RunnerRegistry(registry_version=1, runners=[])


def registry_lists_keys(data: bytes | None) -> bool:
    """Whether a registry file's bytes (one committed version; None: absent) list any runner key.
    Unreadable bytes count as listing keys: this only ever decides that a record is from the
    time before signing, and must not say so by mistake."""
    if data is None:
        return False
    try:
        raw = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        return True
    return not isinstance(raw, dict) or bool(raw.get("runners", True))


def load_registry(root: Path) -> RunnerRegistry:
    """The registry in the working tree; an empty one when the file does not exist (nothing verifies).
    A malformed one (not YAML, a key written twice, an entry the schema refuses) is one ``RecordError``."""
    data = read_optional(root, REGISTRY)
    return EMPTY if data is None else parse_registry(decode(data, REGISTRY.as_posix()), REGISTRY.as_posix())


def read_optional(root: Path, path: Path) -> bytes | None:
    """A configuration file of the tree (the registry, the CI's pin) through ``safe_read``, as a lessons/
    file (regular, inside the repository, size capped): None when it does not exist; any other refusal raises."""
    try:
        return read_bytes(root, path, "lesson")
    except InputRefused as e:
        if e.kind == "missing":
            return None
        raise


def parse_registry(text: str, shown: str) -> RunnerRegistry:
    """A registry's text (the working tree's, or one committed version) as the model; one ``RecordError``
    naming ``shown`` when it is not YAML, writes a mapping key twice, or the schema refuses it."""
    try:
        raw = parse_yaml(text, shown)
        twice = repeated_key(text)
    except yaml.YAMLError as e:
        raise RecordError(shown, "", f"not valid YAML ({str(e).splitlines()[0]})", "restore it from git") from None
    if twice is not None:
        key, line = twice
        raise RecordError(shown, key, f"written twice (line {line}); YAML would keep only the last one",
                          "write each key once: a new runner is a new entry under runners:")
    try:
        return RunnerRegistry.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise RecordError(shown, field, err["msg"],
                          "fix the entry as tileproof keygen printed it; "
                          f"see schema/runner-registry.v{REGISTRY_VERSION}.schema.json") from None


@lru_cache(maxsize=PARSED_KEPT)
def repeated_key(text: str) -> tuple[str, int] | None:
    """The first mapping key a YAML text writes twice in one mapping, as (dotted path, 1-based line), or
    None. PyYAML keeps the last of two equal keys without a word: in the registry, an "added" entry
    would silently replace another. Each node is visited once (aliases are not walked again).

    Kept by the text itself, as ``parse_yaml`` keeps its value: every tree load reads the registry (and each
    committed version of it) again, and PyYAML's composer takes milliseconds over it."""
    seen: set[int] = set()

    def walk(node, path: str) -> tuple[str, int] | None:
        if id(node) in seen:
            return None
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for k, v in node.value:
                name = str(k.value) if isinstance(k, yaml.ScalarNode) else repr(k.value)
                if name != "<<" and name in keys:
                    return (f"{path}.{name}" if path else name), k.start_mark.line + 1
                keys.add(name)
                found = walk(v, f"{path}.{name}" if path else name)
                if found:
                    return found
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                found = walk(v, f"{path}.{i}" if path else str(i))
                if found:
                    return found
        return None

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    return None if root is None else walk(root, "")


@dataclass(frozen=True)
class Verification:
    """A record's trust and, when signed, by which key and why not verified."""

    trust: Trust
    keyid: str | None
    reason: str
    """One line: who vouched, or what failed."""


UNSIGNED = Verification("unsigned", None, "no signature (written without a signing key, or before signing existed)")

_ORDER: tuple[Trust, ...] = ("bad-signature", "subject-mismatch", "revoked", "kind-not-allowed",
                             "unisolated-not-allowed", "unknown-key")
"""When no signature verifies, the first of these found is reported."""


def verify(envelope: signing.Envelope | None, statement: signing.AnyStatement | None, record,
           registry: RunnerRegistry) -> Verification:
    """The record's trust. ``envelope`` and ``statement`` are None for a plain record;
    ``record`` is the validated predicate (its ``kind``, ``created`` and digests count)."""
    if envelope is None or statement is None or not envelope.signatures:  # the two come together
        return UNSIGNED
    message = signing.pae(envelope.payloadType, signing.payload_bytes(envelope))
    failures: dict[Trust, Verification] = {}
    for sig in envelope.signatures:
        v = _verify_signature(sig, message, statement, record, registry)
        if v.trust == "verified":
            return v
        failures.setdefault(v.trust, v)
    return next(failures[t] for t in _ORDER if t in failures)


def _verify_signature(sig: signing.Signature, message: bytes, statement: signing.AnyStatement, record,
                      registry: RunnerRegistry) -> Verification:
    entry = registry.keys.get(sig.keyid)
    if entry is None:
        return Verification("unknown-key", sig.keyid, f"key {sig.keyid[:16]}… is not in {REGISTRY.as_posix()}")
    runner, public = entry
    who = f"key {sig.keyid[:16]}… ({runner.owner})"
    if not signing.verify_one(public, sig, message):
        return Verification("bad-signature", sig.keyid, f"{who}: the signature does not match the content")
    if runner.revoked_since is not None and record.created >= runner.revoked_since:
        return Verification("revoked", sig.keyid, f"{who} is revoked since {runner.revoked_since.isoformat()}; "
                                                  f"the record is dated {record.created.isoformat()}")
    if record.kind not in runner.may_sign:
        return Verification("kind-not-allowed", sig.keyid,
                            f"{who} may sign {', '.join(runner.may_sign)}, not {record.kind} records")
    if not signing.subjects_match(statement, record):
        return Verification("subject-mismatch", sig.keyid,
                            f"{who} signed subjects that are not the record's own file digests")
    if not runner.unisolated and models.unisolated(record):
        return Verification("unisolated-not-allowed", sig.keyid,
                            f"{who} may not sign unisolated runs (a step ran without a wall: isolation none), and "
                            "its registry entry does not say unisolated: true")
    return Verification("verified", sig.keyid, f"signed by {who}")
