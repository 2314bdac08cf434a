"""Reading runs/ through the verified-file index (``records.file_index``): what ``status`` and ``publish``
learn about a record file (its seal, its signature's verification against the registry) kept by the
sha256 of its bytes, so an unchanged record is read and validated, never re-sealed or re-verified.

:func:`read_records` gives exactly what ``store.read_records`` gives: every file is still read through
``safe_read`` and validated into its model (a record whose bytes are not the ones an entry was made from
finds no entry and is examined in full, and a file that does not read or validate is never an entry, so
its one line is raised as before). The facts are keyed by the record's sha256, the code key and the
registry's digest: a changed registry re-verifies every signature.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from tileproof.records import file_index, signing, store
from tileproof.records.models import Record
from tileproof.records.runner_keys import RunnerRegistry, Verification
from tileproof.records.safe_read import read_bytes
from tileproof.records.store import Examined

_RECORD = TypeAdapter(Record)
KIND = "examined"


def registry_scope(registry: RunnerRegistry) -> str:
    """The digest trust outcomes are kept under: the registry's canonical JSON."""
    return hashlib.sha256(registry.model_dump_json().encode()).hexdigest()


def read_records(root: Path, registry: RunnerRegistry) -> list[Examined]:
    """``store.read_records``, through the index (see the module docstring)."""
    root = Path(root)
    stray = store.stray_files(root)
    if stray:
        raise store.stray_error(stray[0])
    index = file_index.shared(root)
    scope = registry_scope(registry)
    out = [_read(root, path, registry, index, scope) for path in store.record_files(root)]
    index.save()
    return out


def _read(root: Path, path: Path, registry: RunnerRegistry, index: file_index.Index, scope: str) -> Examined:
    data = read_bytes(root, f"{store.RUNS}/{path.name}", "record", str(path))
    sha = hashlib.sha256(data).hexdigest()
    fact = index.fact(sha, KIND, scope)
    if fact is not None:
        try:
            record = _RECORD.validate_json(data) if fact["plain"] else store.validate(
                path, store.unwrap(json.loads(data)))
            verification = Verification(fact["trust"], fact["keyid"], fact["reason"])
            return Examined(record, fact["seal"], verification, registry.in_force)
        except (ValidationError, ValueError, KeyError, TypeError):
            pass  # an entry this code cannot use: examined in full below, and replaced
    examined = store.read_record(path, registry, root)
    v = examined.verification
    index.remember(sha, KIND, {"plain": not signing.is_envelope(json.loads(data)), "seal": examined.seal,
                               "trust": v.trust, "keyid": v.keyid, "reason": v.reason}, scope)
    return examined
