"""Records and evidence on disk: written once, atomically, never edited.

A record goes to ``runs/<run id>.json`` by writing a temp file in the same
folder and hard-linking it to its final name (``os.link`` fails if the name
exists, so nothing recorded is ever overwritten). Evidence files go under
``evidence/<run id>/`` the same way and are referenced by path and sha256.

Given a signer, the record file is a DSSE envelope around an in-toto statement
whose predicate is the record (``records.trust.signing``); without one it is the plain
record, as before signing existed, and reads back as ``unsigned``.
``load_record`` reads both forms; ``read_record`` also says whether the record
verifies against the runner registry (``records.trust.runner_keys.verify``).

Also the one implementation of: atomic replacement of a file that is meant to
be rewritten (``write_atomic``: lessons, reports, caches, schemas), the seal
check (``seal_status``) and typed loading (``Examined``: a record with its seal
status and its signature's verification, computed once, from which the judge's
``trust.refusal`` alone decides whether it counts).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Generic, Literal, NamedTuple, TypeVar

from pydantic import TypeAdapter, ValidationError

from tileproof import __version__
from tileproof.records.errors import DiskFull, KeyExposed, NotKept, RecordError, TileproofError, utf8_problem
from tileproof.records.models import (
    AS_READ,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    FileDigest,
    Record,
    Transcript,
)
from tileproof.records.redact import watched_key_in
from tileproof.records.safe_read import decode, parse_json, read_bytes
from tileproof.records.trust import signing
from tileproof.records.trust.runner_keys import (
    UNSIGNED,
    RunnerRegistry,
    TreePolicy,
    Trust,
    Verification,
    verify,
)
from tileproof.records.trust.trust_history import FirstCommit

RUNS = "runs"
EVIDENCE = "evidence"
_RECORD = TypeAdapter(Record)
FILE_MODE = 0o644
"""Records and transcripts are readable by everyone (``tempfile`` would leave 0600)."""


def new_run_id(kind: str, now: datetime | None = None) -> str:
    """``<UTC yyyymmddThhmmssZ>-<kind>-<8 hex>``: sortable and unique."""
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{kind}-{secrets.token_hex(4)}"


_RUN_ID_TIME = re.compile(r"(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z")


def run_id_time(run_id: str) -> datetime | None:
    """The UTC time a run id (``new_run_id``) was made at; None for an id not of that form."""
    m = _RUN_ID_TIME.match(run_id)
    if m is None:
        return None
    year, month, day, hour, minute, second = map(int, m.groups())
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    except ValueError:  # month 13, hour 25
        return None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digest(root: Path, path: Path) -> FileDigest:
    """The digest of a file, named by its path relative to ``root``."""
    return FileDigest(path=rel(root, path), sha256=sha256_file(path))


def rel(root: Path, path: Path) -> str:
    path = Path(path)
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""What a full file system (or an exhausted quota) answers a write with."""

_WRITTEN: list[list[Path]] = []
"""The records and transcripts written inside each open :func:`whole`, innermost last (a process-wide
stack, not a context variable: a session's worker threads write for it too)."""
_WRITTEN_LOCK = threading.Lock()


def _no_space(path: Path, e: OSError) -> DiskFull:
    return DiskFull(path, e.strerror or os.strerror(e.errno or 0))


def write_once(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` atomically; refuse if it already exists. A full file system is one
    :class:`DiskFull` line, and no temp file is left."""
    with _WRITTEN_LOCK:
        if _WRITTEN:
            _WRITTEN[-1].append(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise TileproofError(f"{path}: already exists; records and evidence are never overwritten") from None
    except OSError as e:
        if e.errno in NO_SPACE:
            raise _no_space(path, e) from None
        raise
    finally:
        if tmp is not None:
            os.unlink(tmp)


@contextmanager
def whole(root: Path) -> Iterator[None]:
    """A session's records and transcripts are kept whole or not at all: on a :class:`NotKept` error (a
    full disk, a signing key a program printed) every record under ``runs/`` and every ``evidence/<id>/``
    folder written inside is removed, and the error's line says so. They are this process's own, never
    committed. Any other error (an interrupt) leaves them as they are: a session without its session
    record was interrupted."""
    written: list[Path] = []
    with _WRITTEN_LOCK:
        _WRITTEN.append(written)
    try:
        yield
    except NotKept as e:
        removed = discard(root, written)
        raise NotKept(f"{e}; the {removed} file(s) this session had written were removed") from None
    finally:
        with _WRITTEN_LOCK:
            _WRITTEN.remove(written)


def discard(root: Path, written: Iterable[Path]) -> int:
    """Remove the records and ``evidence/<id>/`` folders of ``written`` (paths :func:`write_once` was given);
    how many files were removed. Nothing outside ``runs/`` and ``evidence/`` is touched, and no link is
    followed."""
    runs, evidence = Path(root) / RUNS, Path(root) / EVIDENCE
    files, folders = [], []
    for path in map(Path, written):
        if path.parent == runs:
            files.append(path)
        elif path.is_relative_to(evidence) and len(path.relative_to(evidence).parts) >= 2:
            folders.append(evidence / path.relative_to(evidence).parts[0])
    removed = 0
    for file in dict.fromkeys(files):
        with suppress(FileNotFoundError):
            file.unlink()
            removed += 1
    for folder in dict.fromkeys(folders):
        if folder.is_dir() and not folder.is_symlink():
            removed += sum(1 for p in folder.rglob("*") if not p.is_dir())
            shutil.rmtree(folder, ignore_errors=True)
    return removed


def write_atomic(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` in one ``os.replace`` (temp file in the same folder, fsynced):
    a reader sees the old file or the new one, never half of one. For files meant to be rewritten
    (a lesson, a report, a cache); records and evidence use ``write_once``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in NO_SPACE:
            raise _no_space(path, e) from None
        raise


def write_generated(root: Path, rel: Path, text: str) -> Path | None:
    """Make the generated file ``root/rel`` hold ``text``: the one writer of every generated file
    (``schema/``, ``cpp/tolerances.h``, the guide's reference), ``write_atomic`` and only when it
    differs, so a current file is left untouched. Its path when it was written, else None."""
    path = Path(root) / rel
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return None
    write_atomic(path, text)
    return path


def write_evidence(root: Path, run_id: str, name: str, data: bytes | str) -> Transcript:
    """Write ``evidence/<run_id>/<name>`` once and return its reference. Bytes that hold the material of a
    signing key this process loaded (``redact.watch_key``) are never stored: one :class:`KeyExposed` line
    (whatever wrote them should have redacted them first)."""
    if isinstance(data, str):
        data = data.encode()
    path = root / EVIDENCE / run_id / name
    if watched_key_in(data):
        raise KeyExposed(f"{path}: not written: it holds the material of the signing key this process loaded "
                         f"(fix: redact it before it is stored; revoke the key if a program printed it)")
    write_once(path, data)
    return Transcript(path=rel(root, path), sha256=sha256_bytes(data), bytes=len(data))


def header(run_id: str, git, host) -> dict:
    """The fields every record starts with (``RecordBase``), created now."""
    return dict(schema_version=SCHEMA_VERSION, run_id=run_id, created=datetime.now(timezone.utc),
                tileproof_version=__version__, git=git, host=host)


def record_path(root: Path, run_id: str) -> Path:
    return root / RUNS / f"{run_id}.json"


def seal_of(record) -> str:
    """sha256 over the record's canonical JSON with its ``seal`` emptied.

    Only the fields the record was built or read with count (``exclude_unset``):
    ``write_record`` sets every field, so a record's seal covers all it holds, and a
    field added to the model later, with a default, leaves the seals of the records
    written before it intact (they are read without it, so it stays unset).
    """
    return seal_of_json(record.model_dump(mode="json", exclude_unset=True))


def seal_of_json(raw: dict) -> str:
    """The seal digest of a record's JSON object (as read from its file, or dumped from its model):
    sha256 over the canonical JSON with ``seal`` emptied. ``write_record`` writes exactly the model's
    dump, so for an untouched file this equals ``seal_of(record)``, without building a model."""
    body = dict(raw)
    body["seal"] = ""
    return sha256_bytes(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


SealStatus = Literal["intact", "broken", "missing"]
"""``intact``: the seal is the digest of the content; ``broken``: it is not (edited after writing);
``missing``: the record has no seal (not written by ``write_record``)."""


def seal_status(record, digest: str | None = None) -> SealStatus:
    """The one seal check. ``digest``: ``seal_of(record)`` when the caller already has it."""
    if not record.seal:
        return "missing"
    return "intact" if (digest if digest is not None else seal_of(record)) == record.seal else "broken"


R = TypeVar("R")


@dataclass(frozen=True)
class Examined(Generic[R]):
    """A record as loaded, with what was checked about it once: its seal and its signature's
    verification against the runner registry. Whether it counts as evidence is the judge's call
    (``judge.trust.refusal``), made from these fields only."""

    record: R
    seal: SealStatus
    verification: Verification = UNSIGNED
    """``registry.UNSIGNED`` for a record that carries no signature (or was built in memory)."""
    policy: TreePolicy | None = None
    """The policy in force it was examined under (the registry's, or ``signed-only`` once git history shows
    a registry that listed a key: ``judge.trust.trust_root``); None: the code's."""
    first: FirstCommit | None = None
    """The commit that first added the record's file (``runner.git_history``); None when it is not committed, or
    the tree has no history. Its standing and its place among "the newest" come from here (``judge.trust.standing``)."""

    @property
    def trust(self) -> Trust:
        """The ``registry.Trust`` word."""
        return self.verification.trust


Loaded = Examined
"""A record and its standing (``read_record``'s name for ``Examined``)."""


def examine(record: R, digest: str | None = None, verification: Verification = UNSIGNED,
            policy: TreePolicy | None = None, first: FirstCommit | None = None) -> Examined[R]:
    """``record`` with its seal checked (``digest``: its ``seal_of`` when already known)."""
    return Examined(record, seal_status(record, digest), verification, policy, first)


def write_record(root: Path, record, signer: signing.Signer | None = None) -> Path:
    """Validate, seal and write a record to ``runs/<run_id>.json``, once: a signed
    DSSE envelope when ``signer`` is given, else the plain (unsigned) record."""
    record = _RECORD.validate_python(record.model_dump(mode="python"))
    record = record.model_copy(update={"seal": seal_of(record)})
    path = record_path(root, record.run_id)
    if signer is None:
        data = record.model_dump_json(indent=2)
    else:
        if signer.path is not None:
            signing.refuse_inside(signer.path, root)
        plain = record.model_dump_json()
        signing.refuse_exposed(signer, path, plain.encode())
        body = json.loads(plain)  # the bytes a plain record file would parse to
        data = signing.envelope_of(signing.record_statement(body, record), signer).model_dump_json(indent=2)
    write_once(path, (data + "\n").encode())
    return path


_FIX = "restore the record from git; records are never edited"


def unwrap(raw: dict) -> dict:
    """A record file's JSON object → the record's JSON object (what the envelope's statement carries,
    or the object itself for a plain record). Raises ValueError when an envelope holds no statement."""
    if not signing.is_envelope(raw):
        return raw
    envelope = signing.Envelope.model_validate(raw)
    try:
        return signing.record_json(signing.statement_of(envelope, "record"))
    except RecordError as e:
        raise ValueError(e.problem) from None


def _root_of(path: Path) -> Path:
    """The repository a record file belongs to: the folder above ``runs/``, else its own folder."""
    return path.parent.parent if path.parent.name == RUNS else path.parent


def read_file(path: Path, root: Path | None = None, data: bytes | None = None) -> tuple[
        dict, signing.Envelope | None, signing.AnyStatement | None]:
    """The record's JSON object, and its envelope and statement when signed.

    Read through ``safe_read`` (a regular file inside ``root``, default the folder
    above ``runs/``; never a link; at most 8 MiB; UTF-8; nesting capped): every
    problem is one ``RecordError`` line.
    """
    path = Path(path)
    root = _root_of(path) if root is None else root
    shown = str(path)
    if data is None:  # ``data``: the file's bytes, when the caller read them through safe_read already
        data = read_bytes(root, path.absolute(), "record", shown)
    raw = parse_json(decode(data, shown), shown)
    if not isinstance(raw, dict):
        raise RecordError(path, "", "expected a JSON object", "restore it from git")
    if not signing.is_envelope(raw):
        return raw, None, None
    try:
        envelope = signing.Envelope.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise RecordError(path, ".".join(str(p) for p in err["loc"]), f"DSSE envelope: {err['msg']}", _FIX) from None
    statement = signing.statement_of(envelope, path)
    return signing.record_json(statement), envelope, statement


def validate(path: Path, raw: dict):
    """A record's JSON object as the record model, schema version first; one-line RecordError."""
    version = raw.get("schema_version")
    kind = raw.get("kind")
    readable = READABLE_VERSIONS.get(kind, (SCHEMA_VERSION,)) if isinstance(kind, str) else (SCHEMA_VERSION,)
    if version not in readable:
        raise RecordError(
            path, "schema_version", f"has version {version!r}; this tileproof reads {' or '.join(map(str, readable))}",
            "upgrade tileproof (pip install -U tileproof) or restore the record from git",
        )
    try:
        return _RECORD.validate_python(raw, context=AS_READ)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise RecordError(path, field, err["msg"], _FIX) from None


def record_of_json(data: bytes | str):
    """A plain record file's bytes as the record model, read as a file holds it (``models.AS_READ``: a version
    counter it lacks reads as 1); pydantic's ValidationError when they are not one (the audit's fast path: a
    record that fails it is read again by ``read_record``, which names why in one line)."""
    return _RECORD.validate_json(data, context=AS_READ)


def load_record(path: Path, root: Path | None = None):
    """Read one record (plain or signed), checking its schema version before its shape.
    Says nothing about its signature: ``read_record`` does."""
    return validate(path, read_file(path, root)[0])


def read_record(path: Path, registry: RunnerRegistry, root: Path | None = None, data: bytes | None = None) -> Examined:
    """Read one record, check its seal and verify it: signature, key, revocation, kind, subjects. ``data``: its
    bytes, when already read through ``safe_read``."""
    raw, envelope, statement = read_file(path, root, data)
    record = validate(path, raw)
    # the seal of the JSON as read (seal_of_json, as the audit's byte pass takes it), not of a fresh model dump
    return examine(record, seal_of_json(raw), verify(envelope, statement, record, registry), registry.in_force)


KEEP = frozenset({".gitkeep"})
"""Names in ``runs/`` that are not records and not strays."""


def record_files(root: Path) -> list[Path]:
    """Every entry of runs/ named ``*.json``, sorted by name (what ``sorted(folder.glob("*.json"))`` gives)."""
    folder = Path(root) / RUNS
    return [folder / name for name in record_names(root)]


def record_names(root: Path) -> list[str]:
    """The names of :func:`record_files`, sorted, without making a path per record."""
    return runs_listing(root)[0]


def stray_files(root: Path) -> list[str]:
    """Names in ``runs/`` that cannot be records (not ``*.json``, a folder, or not valid UTF-8: no run id has
    such a name, and no index or report could hold it), sorted.

    Links and special files named ``*.json`` are left to ``load_record``, which
    refuses them by what they are."""
    return runs_listing(root)[1]


class RunsListing(NamedTuple):
    """One listing of ``runs/``: :func:`record_names` and :func:`stray_files` (a reader that needs both, or
    several readers of one command, list every name once)."""

    names: list[str]
    strays: list[str]

    @property
    def files(self) -> list[str]:
        """The names that are not folders (what the audit reads as records: a folder named ``*.json`` is only a
        stray), sorted."""
        folders = {n for n in self.strays if n.endswith(".json")}  # the only json-named strays are folders
        return [n for n in self.names if n not in folders] if folders else self.names


def runs_listing(root: Path) -> RunsListing:
    """(:func:`record_names`, :func:`stray_files`) from one listing of ``runs/``."""
    folder = Path(root) / RUNS
    if not folder.is_dir():
        return RunsListing([], [])
    names: list[str] = []
    strays: list[str] = []
    with os.scandir(folder) as entries:
        for e in entries:
            name = e.name
            json_named, readable = name.endswith(".json"), utf8_problem(name) is None
            if json_named and readable:
                names.append(name)
            if name not in KEEP and (not json_named or not readable or e.is_dir(follow_symlinks=False)):
                strays.append(name)
    return RunsListing(sorted(names), sorted(strays))


def stray_error(name: str) -> RecordError:
    """The one line for a stray entry of ``runs/`` (a leftover temp file says so)."""
    leftover = name.startswith(".") and name.endswith(".tmp")
    return RecordError(f"{RUNS}/{name}", "", "is not a record (records are runs/<run id>.json files)",
                       "delete this leftover of an interrupted write" if leftover
                       else "move it out of runs/; only tileproof writes there")


def load_records(root: Path) -> list:
    """Every record under ``runs/``, oldest first; the first bad one raises.

    Anything else in ``runs/`` (a ``.txt``, a folder) is bad too: it raises.
    """
    _refuse_strays(root)
    return [load_record(p, root) for p in record_files(root)]


def read_records(root: Path, registry: RunnerRegistry) -> list[Examined]:
    """Every record under ``runs/`` with its seal and trust, oldest first; the first unreadable one
    raises, and so does anything else in ``runs/``."""
    _refuse_strays(root)
    return [read_record(p, registry, root) for p in record_files(root)]


def _refuse_strays(root: Path) -> None:
    stray = stray_files(root)
    if stray:
        raise stray_error(stray[0])


def of_kind(records: Iterable, kind: type) -> list:
    """The records of one model type (``RunRecord``, ``BenchRecord``...): selected by type, never by
    file name. Accepts records or ``Examined`` records (and returns the same)."""
    return [r for r in records if isinstance(r.record if isinstance(r, Examined) else r, kind)]
