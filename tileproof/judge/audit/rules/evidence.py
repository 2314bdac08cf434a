"""Evidence references: every transcript a record names exists under evidence/ with its digest;
nothing there is orphaned."""

from __future__ import annotations

import typing
from collections import defaultdict
from collections.abc import Iterator
from functools import cache

from pydantic import BaseModel

from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.records import store
from tileproof.records.models import Transcript, TranscriptRef, share

PATH = rule("evidence-path", "a record references an evidence path outside evidence/")
MISSING = rule("evidence-missing", "a record references an evidence file that does not exist")
DIGEST = rule("evidence-digest", "an evidence file's sha256 or size differs from what its record says")
ORPHAN = rule("evidence-orphan", "a file in evidence/ that no record references")


def transcripts(obj, where: str = "") -> list[tuple[str, Transcript]]:
    """Every ``Transcript`` inside a model, with its field path (``step.stdout``).

    Only fields whose annotation can hold a Transcript are visited (computed once
    per model class), so a new transcript field in records/models/ is found without
    touching this module, and a 200-entry ``packages`` dict is never walked.
    """
    out: list[tuple[str, Transcript]] = []
    _collect(obj, where, out)
    return out


def refs(obj) -> list[tuple[str, TranscriptRef]]:
    """:func:`transcripts` as (field path, its values): what the audit keeps of a record's references."""
    return [share((where, t.ref())) for where, t in transcripts(obj)]


def _collect(obj, where: str, out: list) -> None:
    if obj is None:
        return
    if isinstance(obj, Transcript):
        out.append((where, obj))
    elif isinstance(obj, BaseModel):
        prefix = f"{where}." if where else ""
        for name, direct in _transcript_fields(type(obj)):
            value = getattr(obj, name)
            if direct:  # a Transcript or None: no call needed
                if value is not None:
                    out.append((prefix + name, value))
            else:
                _collect(value, prefix + name, out)
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _collect(item, f"{where}[{i}]", out)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            _collect(item, f"{where}[{key}]", out)


@cache


def _transcript_fields(cls: type[BaseModel]) -> tuple[tuple[str, bool], ...]:
    """(field name, holds only a Transcript or None) for each field that can hold one."""
    out = []
    for name, info in cls.model_fields.items():
        if _can_hold_transcript(info.annotation, set()):
            args = set(typing.get_args(info.annotation)) or {info.annotation}
            out.append((name, args <= {Transcript, type(None)}))
    return tuple(out)


def _can_hold_transcript(tp, seen: set) -> bool:
    if tp is Transcript:
        return True
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp in seen:
            return False
        seen.add(tp)
        return any(_can_hold_transcript(f.annotation, seen) for f in tp.model_fields.values())
    return any(_can_hold_transcript(arg, seen) for arg in typing.get_args(tp))


def raw_transcript_paths(raw) -> Iterator[str]:
    """Evidence paths inside a record that did not validate (so that its files
    are not also reported as orphans): any object with path, sha256 and bytes."""
    if isinstance(raw, dict):
        if isinstance(raw.get("path"), str) and "sha256" in raw and "bytes" in raw:
            yield raw["path"]
        for value in raw.values():
            yield from raw_transcript_paths(value)
    elif isinstance(raw, list):
        for value in raw:
            yield from raw_transcript_paths(value)


def evidence_path_ok(path: str) -> bool:
    """A reference must be a plain relative path under evidence/."""
    parts = path.split("/")
    return len(parts) >= 2 and parts[0] == store.EVIDENCE and not {"", ".", ".."} & set(parts)


def evidence_issues(where: str, ref: Transcript | TranscriptRef, actual: tuple[int, str] | None) -> list[Issue]:
    """``actual``: (size, sha256) of the file today, None when it is missing."""
    if not evidence_path_ok(ref.path):
        return [(PATH, f"{where} points outside evidence/: {ref.path!r}")]
    if actual is None:
        return [(MISSING, f"{where} references a file that does not exist")]
    size, sha = actual
    if sha != ref.sha256:
        grew = f"; {ref.bytes} bytes recorded, {size} on disk" if size != ref.bytes else ""
        return [(DIGEST, f"{where}: sha256 {sha[:12]}… on disk, {ref.sha256[:12]}… recorded{grew}")]
    if size != ref.bytes:
        return [(DIGEST, f"{where}: {size} bytes on disk, {ref.bytes} recorded")]
    return []


def orphan_issues(orphans: list[str], referenced: set[str], run_ids: set[str]) -> list[tuple[str, str, str]]:
    """(rule, file, reason) for unreferenced evidence files. A folder
    ``evidence/<dir>/`` none of whose files is referenced is one finding (the
    usual cause: a run interrupted before its record was written)."""
    by_dir: dict[str, list[str]] = defaultdict(list)
    for rel in orphans:
        parts = rel.split("/")
        by_dir[parts[1] if len(parts) > 2 else ""].append(rel)
    used = {p.split("/")[1] for p in referenced if p.count("/") >= 2}
    out = []
    for folder, files in sorted(by_dir.items()):
        if folder and len(files) > 1 and folder not in used:
            record = "" if folder in run_ids else f" and there is no {store.RUNS}/{folder}.json"
            out.append((ORPHAN, f"{store.EVIDENCE}/{folder}/",
                        f"none of its {len(files)} files is referenced by a record{record}"))
        else:
            out += [(ORPHAN, rel, "no record references this file") for rel in sorted(files)]
    return out
