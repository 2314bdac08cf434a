"""Reading runs/ through the verified-file index (``records.file_index``): what ``status`` and ``publish``
learn about a record file (its seal, its signature's verification against the registry) kept by the
sha256 of its bytes, so an unchanged record is read and validated, never re-sealed or re-verified.

:func:`read_records` gives exactly what ``store.read_records`` gives: every file is still read through
``safe_read`` and validated into its model (a record whose bytes are not the ones an entry was made from
finds no entry and is examined in full, and a file that does not read or validate is never an entry, so
its one line is raised as before). The facts are keyed by the record's sha256, the code key and the
registry's digest: a changed registry re-verifies every signature.

:func:`read_facts` is what choosing needs (``judge.preselect``): every record as its ``Facts``, with its seal and
signature outcome, kept in the same entry. A record whose ``lstat`` is the one the index's ``files`` table holds
(``file_index.Index.known``: git's own trust in stat data, racy entries excluded) is not read at all; any other
is read, validated and verified in full, and its facts learned. :func:`read_chosen` then reads the few records
chosen, in full, as :func:`read_records` does.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from tileproof.judge.preselect import Facts, facts_of
from tileproof.records import file_index, signing, store
from tileproof.records.runner_keys import RunnerRegistry, Verification
from tileproof.records.safe_read import read_bytes
from tileproof.records.store import Examined

KIND = "examined"


def registry_scope(registry: RunnerRegistry) -> str:
    """The digest trust outcomes are kept under: the registry's canonical JSON."""
    return hashlib.sha256(registry.model_dump_json().encode()).hexdigest()


def _opened(root: Path, registry: RunnerRegistry) -> tuple[file_index.Index, str]:
    """The tree's index and the registry's scope, once runs/ holds nothing that cannot be a record (else its
    one line is raised, as ``store.read_records`` raises it)."""
    stray = store.stray_files(root)
    if stray:
        raise store.stray_error(stray[0])
    return file_index.shared(root), registry_scope(registry)


def read_records(root: Path, registry: RunnerRegistry) -> list[Examined]:
    """``store.read_records``, through the index (see the module docstring)."""
    root = Path(root)
    index, scope = _opened(root, registry)
    out = [_read(root, path, registry, index, scope) for path in store.record_files(root)]
    index.save()
    return out


def read_chosen(root: Path, registry: RunnerRegistry, names: Iterable[str]) -> list[Examined]:
    """The records named ``names`` (in runs/), each read and validated in full, through the index as
    :func:`read_records` reads every one."""
    index = file_index.shared(root)
    scope = registry_scope(registry)
    runs = Path(root) / store.RUNS
    out = [_read(Path(root), runs / name, registry, index, scope) for name in names]
    index.save()
    return out


def read_facts(root: Path, registry: RunnerRegistry) -> list[tuple[str, Examined[Facts]]]:
    """Every record file under runs/ (its name, as ``store.record_names`` lists them), with its facts examined (seal and
    signature outcome; its standing is the caller's to judge): see the module docstring. Raises as
    :func:`read_records` does, for the first record that does not read or validate."""
    root = Path(root)
    index, scope = _opened(root, registry)
    runs = root / store.RUNS
    plain_folder = runs.is_dir() and stat.S_ISDIR(os.lstat(runs).st_mode)  # a link in its place is read in full
    index.load_files(f"{store.RUNS}/")
    index.load_facts(scope)
    now = file_index.now_ns()
    out = []
    folder = os.fspath(runs)
    for name in store.record_names(root):
        rel = f"{store.RUNS}/{name}"
        fact, st = None, None
        if plain_folder:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                st = None
            known = index.known(rel, st) if st is not None and stat.S_ISREG(st.st_mode) else None
            fact = index.fact(known.sha256, KIND, scope) if known is not None else None
        item = _from_fact(fact, registry) if fact is not None else None
        if item is None:
            item = _learn(root, runs / name, registry, index, scope, st, now)
        out.append((name, item))
    index.save()
    return out


def _from_fact(fact: dict, registry: RunnerRegistry) -> Examined[Facts] | None:
    try:
        facts = Facts.from_json(fact["facts"])
        return Examined(facts, fact["seal"], Verification(fact["trust"], fact["keyid"], fact["reason"]),
                        registry.in_force)
    except (KeyError, TypeError, ValueError, IndexError):
        return None  # an entry this code cannot use: the record is read in full, and the entry replaced


def _learn(root: Path, path: Path, registry: RunnerRegistry, index: file_index.Index, scope: str,
           st: os.stat_result | None, now: int) -> Examined[Facts]:
    """One record read in full (``_read``), its facts kept, and its stat learned when it did not change while
    it was read."""
    rel = f"{store.RUNS}/{path.name}"
    data = read_bytes(root, rel, "record", str(path))
    known = content_of(data)
    examined = _read(root, path, registry, index, scope, data, known.sha256)
    learn_read(index, root, path.name, st, known, now)
    return Examined(facts_of(examined.record), examined.seal, examined.verification, examined.policy)


def content_of(data: bytes) -> file_index.Known:
    """A record file's bytes as the index knows content: size, sha256 and git blob id, in one pass."""
    return file_index.hash_stream(len(data), [data])[0]


def learn_read(index: file_index.Index, root: Path | str, name: str, st: os.stat_result | None,
               known: file_index.Known, now: int) -> None:
    """Remember that ``runs/<name>``, whose ``lstat`` before it was read through ``safe_read`` was ``st``, held
    ``known`` (:func:`content_of` its bytes): when it is a regular file whose stat did not change while it was
    read (``file_index.Index.learn`` keeps only settled files), and the index does not know it by that stat
    already."""
    rel = f"{store.RUNS}/{name}"
    if st is None or not stat.S_ISREG(st.st_mode) or index.known(rel, st) is not None:
        return
    try:
        after = os.lstat(os.path.join(root, store.RUNS, name))
    except OSError:
        return
    if file_index.stat_key(after) == file_index.stat_key(st) and st.st_size == known.size:
        index.learn(rel, st, known, now)


def _read(root: Path, path: Path, registry: RunnerRegistry, index: file_index.Index, scope: str,
          data: bytes | None = None, sha: str | None = None) -> Examined:
    if data is None:
        data = read_bytes(root, f"{store.RUNS}/{path.name}", "record", str(path))
    sha = sha or hashlib.sha256(data).hexdigest()
    fact = index.fact(sha, KIND, scope)
    if fact is not None:
        try:
            record = store.record_of_json(data) if fact["plain"] else store.validate(
                path, store.unwrap(json.loads(data)))
            verification = Verification(fact["trust"], fact["keyid"], fact["reason"])
            if fact.get("facts") != facts_of(record).to_json():
                raise ValueError("facts of other content")  # never: the entry is keyed by these bytes
            return Examined(record, fact["seal"], verification, registry.in_force)
        except (ValidationError, ValueError, KeyError, TypeError):
            pass  # an entry this code cannot use: examined in full below, and replaced
    examined = store.read_record(path, registry, root, data)
    keep(index, sha, scope, examined, plain=not signing.is_envelope(json.loads(data)))
    return examined


def keep(index: file_index.Index, sha: str, scope: str, examined: Examined, plain: bool) -> None:
    """The entry of a record whose bytes have the sha256 ``sha``, examined in full (its seal checked and its
    signature verified against the registry of ``scope``, before any standing is judged): the one shape
    :func:`read_facts` and ``_read`` read back; written only when the index lacks it. ``plain``: not an envelope
    (a wrong guess only costs a full read next time: ``_read`` falls back)."""
    value = _entry(examined, plain)
    if index.fact(sha, KIND, scope) != value:
        index.remember(sha, KIND, value, scope)


def keep_missing(index: file_index.Index, scope: str, entries: Iterable[tuple[str, Examined, bool]]) -> None:
    """:func:`keep` for each (sha256, examined record, plain) whose entry the index lacks, found without reading
    any entry's value (``Index.have``: an entry is a function of the bytes, the code and the registry, so one
    that is there is this one; one that fails its check digest is replaced when read)."""
    there = index.have(KIND, scope)
    for sha, examined, plain in entries:
        if sha not in there:
            index.remember(sha, KIND, _entry(examined, plain), scope)


def _entry(examined: Examined, plain: bool) -> dict:
    v = examined.verification
    return {"plain": plain, "seal": examined.seal, "trust": v.trust, "keyid": v.keyid, "reason": v.reason,
            "facts": facts_of(examined.record).to_json()}
