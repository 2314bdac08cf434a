"""Records and evidence on disk: written once, atomically, never edited.

A record goes to ``runs/<run id>.json`` by writing a temp file in the same
folder and hard-linking it to its final name (``os.link`` fails if the name
exists, so nothing recorded is ever overwritten). Evidence files go under
``evidence/<run id>/`` the same way and are referenced by path and sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.models import READABLE_VERSIONS, SCHEMA_VERSION, FileDigest, Record, Transcript

RUNS = "runs"
EVIDENCE = "evidence"
_RECORD = TypeAdapter(Record)
FILE_MODE = 0o644
"""Records and transcripts are readable by everyone (``tempfile`` would leave 0600)."""


def new_run_id(kind: str, now: datetime | None = None) -> str:
    """``<UTC yyyymmddThhmmssZ>-<kind>-<8 hex>``: sortable and unique."""
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{kind}-{secrets.token_hex(4)}"


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


def write_once(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` atomically; refuse if it already exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise TileproofError(f"{path}: already exists; records and evidence are never overwritten") from None
    finally:
        os.unlink(tmp)


def write_evidence(root: Path, run_id: str, name: str, data: bytes | str) -> Transcript:
    """Write ``evidence/<run_id>/<name>`` once and return its reference."""
    if isinstance(data, str):
        data = data.encode()
    path = root / EVIDENCE / run_id / name
    write_once(path, data)
    return Transcript(path=rel(root, path), sha256=sha256_bytes(data), bytes=len(data))


def header(run_id: str, git, host) -> dict:
    """The fields every record starts with (``RecordBase``), created now."""
    from tileproof import __version__

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
    body = record.model_dump(mode="json", exclude_unset=True)
    body["seal"] = ""
    return sha256_bytes(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def write_record(root: Path, record) -> Path:
    """Validate, seal and write a record to ``runs/<run_id>.json``, once."""
    record = _RECORD.validate_python(record.model_dump(mode="python"))
    record = record.model_copy(update={"seal": seal_of(record)})
    path = record_path(root, record.run_id)
    write_once(path, (record.model_dump_json(indent=2) + "\n").encode())
    return path


def load_record(path: Path):
    """Read one record, checking its schema version before its shape."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise RecordError(path, "", "file is missing", "restore it from git") from None
    except json.JSONDecodeError as e:
        raise RecordError(path, f"line {e.lineno}", f"not valid JSON ({e.msg})", "restore it from git") from None
    if not isinstance(raw, dict):
        raise RecordError(path, "", "expected a JSON object", "restore it from git")
    version = raw.get("schema_version")
    kind = raw.get("kind")
    readable = READABLE_VERSIONS.get(kind, (SCHEMA_VERSION,)) if isinstance(kind, str) else (SCHEMA_VERSION,)
    if version not in readable:
        raise RecordError(
            path, "schema_version", f"has version {version!r}; this tileproof reads {' or '.join(map(str, readable))}",
            "upgrade tileproof (pip install -U tileproof) or restore the record from git",
        )
    try:
        return _RECORD.validate_python(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise RecordError(path, field, err["msg"], "restore the record from git; records are never edited") from None


def record_files(root: Path) -> list[Path]:
    folder = root / RUNS
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def load_records(root: Path) -> list:
    """Every record under ``runs/``, oldest first; the first bad one raises."""
    return [load_record(p) for p in record_files(root)]
