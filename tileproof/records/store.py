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
from tileproof.records.models import SCHEMA_VERSION, FileDigest, Record, Transcript
from tileproof.records.safe_read import decode, parse_json, read_bytes

RUNS = "runs"
EVIDENCE = "evidence"
_RECORD = TypeAdapter(Record)


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


def _root_of(path: Path) -> Path:
    """The repository a record file belongs to: the folder above ``runs/``, else its own folder."""
    return path.parent.parent if path.parent.name == RUNS else path.parent


def load_record(path: Path, root: Path | None = None):
    """Read one record, checking its schema version before its shape.

    Read through ``safe_read`` (a regular file, never a link, at most 8 MiB,
    UTF-8, nesting capped); every problem is one ``RecordError`` line.
    """
    path = Path(path)
    root = _root_of(path) if root is None else root
    shown = str(path)
    text = decode(read_bytes(root, path.absolute(), "record", shown), shown)
    raw = parse_json(text, shown)
    if not isinstance(raw, dict):
        raise RecordError(path, "", "expected a JSON object", "restore it from git")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(
            path, "schema_version", f"has version {version!r}; this tileproof reads {SCHEMA_VERSION}",
            "upgrade tileproof (pip install -U tileproof) or restore the record from git",
        )
    try:
        return _RECORD.validate_python(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise RecordError(path, field, err["msg"], "restore the record from git; records are never edited") from None


KEEP = frozenset({".gitkeep"})
"""Names in ``runs/`` that are not records and not strays."""


def record_files(root: Path) -> list[Path]:
    folder = root / RUNS
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def stray_files(root: Path) -> list[str]:
    """Names in ``runs/`` that cannot be records (not ``*.json``, or a folder), sorted.

    Links and special files named ``*.json`` are left to ``load_record``, which
    refuses them by what they are."""
    folder = Path(root) / RUNS
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if e.name not in KEEP and (
            not e.name.endswith(".json") or e.is_dir(follow_symlinks=False)))


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
    stray = stray_files(root)
    if stray:
        raise stray_error(stray[0])
    return [load_record(p, root) for p in record_files(root)]
