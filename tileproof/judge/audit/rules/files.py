"""Records as files: schema, file name, seal (rules the orchestrator applies while reading runs/)."""

from __future__ import annotations

from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.records import store

SCHEMA = rule("record-schema", "a record in runs/ is not valid JSON or does not validate against its schema version")
NAME = rule("record-name", "a record's file name is not <run_id>.json")
SEAL = rule("record-seal", "a record changed after it was written: its seal is not the digest of its content")


def name_issues(file_name: str, run_id: str) -> list[Issue]:
    if file_name[:-5] != run_id:
        return [(NAME, f"run_id is {run_id}, file name is {file_name}")]
    return []


def seal_issues(record, raw_digest: str, model_digest: str | None = None) -> list[Issue]:
    """``raw_digest``: ``store.seal_of_json`` of the file as read; ``model_digest``: ``seal_of`` of
    the validated record, computed only when the first differs, to say whether the content changed
    or only its bytes. The verdict itself is ``store.seal_status``'s."""
    status = store.seal_status(record, raw_digest)
    if status == "missing":
        return [(SEAL, "record has no seal (not written by store.write_record)")]
    if status == "intact":
        return []
    if model_digest == record.seal:
        return [(SEAL, "bytes changed after writing (the content still reads as sealed): restore it from git")]
    return [(SEAL, f"content digest {(model_digest or raw_digest)[:12]}… differs from its seal "
                   f"{record.seal[:12]}…: edited after writing")]
