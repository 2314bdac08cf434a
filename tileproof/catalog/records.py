"""Reading runs/ through the verified-file index (``catalog.index``): what ``status`` and ``publish``
learn about a record file (its seal, its signature's verification against the registry) kept by the
sha256 of its bytes, so an unchanged record is read and validated, never re-sealed or re-verified.

:func:`read_records` gives exactly what ``store.read_records`` gives: every file is still read through
``safe_read`` and validated into its model (a record whose bytes are not the ones an entry was made from
finds no entry and is examined in full, and a file that does not read or validate is never an entry, so
its one line is raised as before). The facts are keyed by the record's sha256, the code key and the
registry's digest: a changed registry re-verifies every signature.

:func:`read_facts` is what choosing needs (``judge.preselect``): every record as its ``Facts``, with its seal and
signature outcome, kept in the same entry. A record whose ``lstat`` is the one the index's ``files`` table holds
(``catalog_index.Index.known``: git's own trust in stat data, racy entries excluded) is not read at all; any other
is read, validated and verified in full, and its facts learned. :func:`read_chosen` then reads the few records
chosen, in full, as :func:`read_records` does.

So that a warm read costs one ``lstat`` a record and little more, :func:`read_facts` keeps what it
gives in the index's summary of runs/ (``catalog_index.Index.summary``: one row, one check digest, one JSON text, in
columns; what many records share, kept once): each record file's stat data beside its facts examined. An entry
is used only while the file's ``lstat`` is that one; an entry is made only of a record whose ``files`` row has its
stat (settled, and unchanged while it was read) and whose facts this code kept, so it says exactly what those two
rows say. A record the summary does not have (new, changed, or the summary made by other code, under another
registry, or failing its check) is looked up in ``files`` and ``facts`` (one by one when they are a few), or read
in full, and the summary is made anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from tileproof.catalog import index as catalog_index
from tileproof.catalog.fork import Background
from tileproof.judge.preselect import Facts, facts_of
from tileproof.records import store
from tileproof.records.safe_read import read_bytes
from tileproof.records.store import Examined
from tileproof.records.trust import signing
from tileproof.records.trust.runner_keys import RunnerRegistry, Verification

KIND = "examined"


def registry_scope(registry: RunnerRegistry) -> str:
    """The digest trust outcomes are kept under: the registry's canonical JSON."""
    return hashlib.sha256(registry.model_dump_json().encode()).hexdigest()


def _opened(root: Path, registry: RunnerRegistry, listing: store.RunsListing | None = None
            ) -> tuple[catalog_index.Index, str, list[str]]:
    """The tree's index, the registry's scope and the record files' names (``store.record_names``; of ``listing``,
    when the caller listed runs/ already), once runs/ holds nothing that cannot be a record (else its one line is
    raised, as ``store.read_records`` raises it)."""
    names, stray = listing or store.runs_listing(root)
    if stray:
        raise store.stray_error(stray[0])
    return catalog_index.opened(root), registry_scope(registry), names


def read_records(root: Path, registry: RunnerRegistry) -> list[Examined]:
    """``store.read_records``, through the index (see the module docstring)."""
    root = Path(root)
    index, scope, names = _opened(root, registry)
    runs = root / store.RUNS
    out = [_read(root, runs / name, registry, index, scope) for name in names]
    index.save()
    return out


def read_chosen(root: Path, registry: RunnerRegistry, names: Iterable[str]) -> list[Examined]:
    """The records named ``names`` (in runs/), each read and validated in full, through the index as
    :func:`read_records` reads every one (a few: their entries asked for one by one)."""
    index = catalog_index.opened(root)
    scope = registry_scope(registry)
    runs = Path(root) / store.RUNS
    names = list(names)
    with index.one_by_one() if len(names) < ONE_BY_ONE else contextlib.nullcontext():
        out = [_read(Path(root), runs / name, registry, index, scope) for name in names]
    index.save()
    return out


def read_facts(root: Path, registry: RunnerRegistry, listing: store.RunsListing | None = None
               ) -> list[tuple[str, Examined[Facts]]]:
    """Every record file under runs/ (its name, as ``store.record_names`` lists them; ``listing``: the caller's listing
    of runs/), with its facts examined (seal and signature outcome; its standing is the caller's to judge): see the
    module docstring. Raises as :func:`read_records` does, for the first record that does not read or validate."""
    root = Path(root)
    index, scope, names = _opened(root, registry, listing)
    runs = root / store.RUNS
    plain_folder = runs.is_dir() and stat.S_ISDIR(os.lstat(runs).st_mode)  # a link in its place is read in full
    summary = _Summary.of(index.summary(FOLDER, KIND, scope), names, registry) if plain_folder else None
    folder = os.fspath(runs)
    out: list = []
    stats: list[os.stat_result | None] = []
    found: list[int] = []  # per record: where the summary has it with this stat (-1: nowhere)
    for i, name in enumerate(names):
        st, j, item = None, -1, None
        if plain_folder:
            try:
                st = os.lstat(f"{folder}/{name}")
            except OSError:
                st = None
            if summary is not None and st is not None:
                j = summary.find(i, name, st)
                item = summary.item(j) if j >= 0 else None
                if item is None:
                    j = -1
        out.append((name, item))
        stats.append(None if item is not None else st)  # a miss's only: 100,000 kept would cost the collector
        found.append(j)
    misses = [i for i, j in enumerate(found) if j < 0]
    learned = _fill(root, registry, index, scope, out, stats, misses) if misses else set()
    if summary is None or learned or len(names) - len(misses) != summary.length:
        index.summarise(FOLDER, KIND, _summary_value(out, stats, found, learned, summary), scope)
    index.save()
    return out


FOLDER = f"{store.RUNS}/"
ONE_BY_ONE = 2_000
"""Fewer records than this missing from the summary: their ``files`` and ``facts`` rows are asked for one by one
(more: loaded all at once)."""


def _fill(root: Path, registry: RunnerRegistry, index: catalog_index.Index, scope: str, out: list,
          stats: list[os.stat_result | None], misses: list[int]) -> set[int]:
    """The records at ``misses`` (in ``out``, replaced there), from their ``files`` and ``facts`` rows when their stat
    is the one indexed, else read in full (:func:`_read_in_full`); returns those now indexed by that stat (the
    summary's new entries). Past :data:`PARALLEL_MIN` records to read in full (a cold ``status``: every record read and
    validated), the later half is read by the runner's forked helper meanwhile, with an index of its own, saved
    before its result comes back; a record that does not read or validate raises its line as one process reading in
    order would: the first half's first, else the second's. (Those the rows give fork nothing: a summary made after
    a cold audit, whose process holds every record, looks up 100,000 rows in this process alone.)"""
    many = len(misses) >= ONE_BY_ONE
    if many:
        index.load_files(FOLDER)
        index.load_facts(scope)
    found: list[tuple[int, Examined[Facts], bool]] = []
    unread: list[tuple[int, str, os.stat_result | None]] = []
    with contextlib.nullcontext() if many else index.one_by_one():
        for i in misses:
            name, st = out[i][0], stats[i]
            known = index.known(f"{store.RUNS}/{name}", st) if st is not None and stat.S_ISREG(st.st_mode) else None
            fact = index.fact(known.sha256, KIND, scope) if known is not None else None
            item = _from_fact(fact, registry) if fact is not None else None
            if item is not None:
                found.append((i, item, True))
            else:
                unread.append((i, name, st))
    now = catalog_index.now_ns()
    half = len(unread) // 2 if len(unread) >= PARALLEL_MIN else len(unread)
    helper = Background(half < len(unread))
    try:
        later = helper.submit(_read_saved, str(root), registry, scope, unread[half:], now) if unread[half:] else None
        with contextlib.nullcontext() if many else index.one_by_one():
            found += _read_in_full(root, registry, index, scope, unread[:half], now)
        found += later() if later is not None else []
    finally:
        helper.close()
    for i, item, _indexed in found:
        out[i] = (out[i][0], item)
    return {i for i, _item, indexed in found if indexed}


PARALLEL_MIN = 2_000
"""From this many records to read in full (:func:`_fill`), half of them are read in a second process."""


def _read_saved(root: str, registry: RunnerRegistry, scope: str, todo: list, now: int) -> list:
    """:func:`_read_in_full` in the forked helper, through this process's own index (its rows asked for one by one:
    none of the 100,000 loaded), saved before the result goes."""
    index = catalog_index.opened(root)
    with index.one_by_one():
        found = _read_in_full(Path(root), registry, index, scope, todo, now)
    index.save()
    return found


def _read_in_full(root: Path, registry: RunnerRegistry, index: catalog_index.Index, scope: str,
                  todo: list[tuple[int, str, os.stat_result | None]], now: int
                  ) -> list[tuple[int, Examined[Facts], bool]]:
    """(i, facts examined, whether now indexed by its stat) of each record (i, name, ``lstat``) of ``todo``, read in
    full (:func:`_learn`)."""
    runs = root / store.RUNS
    found: list[tuple[int, Examined[Facts], bool]] = []
    for i, name, st in todo:
        item, read = _learn(root, runs / name, registry, index, scope, st, now)
        regular = st is not None and stat.S_ISREG(st.st_mode)
        known = index.known(f"{store.RUNS}/{name}", st) if st is not None and regular else None
        # indexed only when learned by this stat (not racy, unchanged while read): else not summarised
        found.append((i, item, known is not None and known == read))
    return found


class _Summary:
    """The summary of runs/ (``catalog_index.Index.summary``) as read: for each record file it names, the stat data
    the file had and its facts examined. Columns of one entry per file: ``names``, ``dev``, ``ino``, ``size``,
    ``mtime``, ``ctime`` (``lstat``'s, in ns), ``run_id``, ``created`` (its facts' own) and ``group``: an index into
    ``groups``, each what many records share: the facts of one of them (``Facts.to_row``; the others' differ only
    in run id and date), the seal, and the verification's trust, key id and reason."""

    COLUMNS = ("names", "dev", "ino", "size", "mtime", "ctime", "run_id", "created", "group")

    def __init__(self, value: dict, names: list[str], registry: RunnerRegistry) -> None:
        columns = [value[c] for c in self.COLUMNS]
        if not all(isinstance(c, list) and len(c) == len(columns[0]) for c in columns):
            raise ValueError("columns of unequal length")
        self.names, self.dev, self.ino, self.size, self.mtime, self.ctime, self.run_id, self.created, self.group = (
            columns)
        self.raw_groups = value["groups"]
        self.groups = [(Facts.from_row(row), seal, Verification(trust, keyid, reason))
                       for row, seal, trust, keyid, reason in self.raw_groups]
        self.length = len(self.names)
        self.at = None if self.names == names else {name: j for j, name in enumerate(self.names)}
        self.in_force = registry.in_force

    @classmethod
    def of(cls, value: object, names: list[str], registry: RunnerRegistry) -> _Summary | None:
        try:
            return cls(value, names, registry) if isinstance(value, dict) else None
        except (KeyError, TypeError, ValueError, IndexError):
            return None  # one this code cannot use: every record is looked up as if there were none, and it is replaced

    def find(self, i: int, name: str, st: os.stat_result) -> int:
        """Where the summary has ``name`` (the ``i``-th record file) with the ``lstat`` ``st``, a regular file's; -1:
        nowhere."""
        j = i if self.at is None else self.at.get(name, -1)
        if (j < 0 or st.st_ino != self.ino[j] or st.st_mtime_ns != self.mtime[j] or st.st_ctime_ns != self.ctime[j]
                or st.st_size != self.size[j] or st.st_dev != self.dev[j] or not stat.S_ISREG(st.st_mode)):
            return -1
        return j

    def item(self, j: int) -> Examined[Facts] | None:
        """The ``j``-th entry's facts examined; None when this code cannot read it."""
        try:
            shared, seal, verification = self.groups[self.group[j]]
            facts = shared.of_record(str(self.run_id[j]), datetime.fromisoformat(self.created[j]))
        except (TypeError, ValueError, IndexError):
            return None
        return Examined(facts, seal, verification, self.in_force)


def _summary_value(out: list, stats: list[os.stat_result | None], found: list[int], learned: set[int],
                   summary: _Summary | None) -> dict:
    """The summary of runs/ after this read: the entries still found in ``summary`` (``found``: copied) and those
    ``learned`` (each record whose ``files`` row now has its stat and whose facts are kept), in the order of ``out``."""
    columns: dict[str, list] = {c: [] for c in _Summary.COLUMNS}
    groups: list[list] = []
    alike: dict[str, int] = {}
    copied: dict[int, int] = {}  # the summary's group → the new one

    def group(row: list, seal: str, trust: str, keyid: str | None, reason: str) -> int:
        key = json.dumps([row[0], *row[3:], seal, trust, keyid, reason])  # what the group's records share
        if key not in alike:
            alike[key] = len(groups)
            groups.append([row, seal, trust, keyid, reason])
        return alike[key]

    for i, (name, item) in enumerate(out):
        j = found[i]
        if j >= 0 and summary is not None:
            was = summary.group[j]
            if was not in copied:
                copied[was] = group(*summary.raw_groups[was])
            values = (name, summary.dev[j], summary.ino[j], summary.size[j], summary.mtime[j], summary.ctime[j],
                      summary.run_id[j], summary.created[j], copied[was])
        elif i in learned:
            row, v = item.record.to_row(), item.verification
            values = (name, *catalog_index.stat_key(stats[i]), row[1], row[2],  # type: ignore[arg-type]  # a miss's
                      group(row, item.seal, v.trust, v.keyid, v.reason))
        else:
            continue
        for column, value in zip(_Summary.COLUMNS, values, strict=True):
            columns[column].append(value)
    return {**columns, "groups": groups}


def _from_fact(fact: dict, registry: RunnerRegistry) -> Examined[Facts] | None:
    try:
        facts = Facts.from_row(fact["facts"])
        return Examined(facts, fact["seal"], Verification(fact["trust"], fact["keyid"], fact["reason"]),
                        registry.in_force)
    except (KeyError, TypeError, ValueError, IndexError):
        return None  # an entry this code cannot use: the record is read in full, and the entry replaced


def _learn(root: Path, path: Path, registry: RunnerRegistry, index: catalog_index.Index, scope: str,
           st: os.stat_result | None, now: int) -> tuple[Examined[Facts], catalog_index.Known]:
    """One record read in full (``_read``), its facts kept, and its stat learned when it did not change while
    it was read; with the content read."""
    rel = f"{store.RUNS}/{path.name}"
    data = read_bytes(root, rel, "record", str(path))
    known = content_of(data)
    examined = _read(root, path, registry, index, scope, data, known.sha256)
    learn_read(index, root, path.name, st, known, now)
    return Examined(facts_of(examined.record), examined.seal, examined.verification, examined.policy), known


def content_of(data: bytes) -> catalog_index.Known:
    """A record file's bytes as the index knows content: size, sha256 and git blob id, in one pass."""
    return catalog_index.hash_stream(len(data), [data])[0]


def known_read(index: catalog_index.Index, root: Path | str, name: str, st: os.stat_result | None, data: bytes,
               now: int) -> catalog_index.Known:
    """What ``data``, just read from ``runs/<name>`` through ``safe_read`` (its ``lstat`` before the read: ``st``),
    holds: the index's entry, not hashed again, when that stat is the one indexed, the read gave the entry's size
    and the file did not change while it was read; else :func:`content_of` it, learned (:func:`learn_read`)."""
    hit = index.known(f"{store.RUNS}/{name}", st) if st is not None and stat.S_ISREG(st.st_mode) else None
    if hit is not None and hit.size == len(data) and _unchanged(root, name, st):
        return hit
    known = content_of(data)
    learn_read(index, root, name, st, known, now)
    return known


def learn_read(index: catalog_index.Index, root: Path | str, name: str, st: os.stat_result | None,
               known: catalog_index.Known, now: int) -> None:
    """Remember that ``runs/<name>``, whose ``lstat`` before it was read through ``safe_read`` was ``st``, held
    ``known`` (:func:`content_of` its bytes): when it is a regular file whose stat did not change while it was
    read (``catalog_index.Index.learn`` keeps only settled files), and the index does not know it by that stat
    already."""
    rel = f"{store.RUNS}/{name}"
    if st is None or not stat.S_ISREG(st.st_mode) or index.known(rel, st) is not None:
        return
    if st.st_size == known.size and _unchanged(root, name, st):
        index.learn(rel, st, known, now)


def _unchanged(root: Path | str, name: str, st: os.stat_result | None) -> bool:
    """Whether ``runs/<name>``'s ``lstat`` now is ``st``, the one taken before it was read."""
    try:
        after = os.lstat(os.path.join(root, store.RUNS, name))
    except OSError:
        return False
    return st is not None and catalog_index.stat_key(after) == catalog_index.stat_key(st)


def _read(root: Path, path: Path, registry: RunnerRegistry, index: catalog_index.Index, scope: str,
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
            if fact.get("facts") != facts_of(record).to_row():
                raise ValueError("facts of other content")  # never: the entry is keyed by these bytes
            return Examined(record, fact["seal"], verification, registry.in_force)
        except (ValidationError, ValueError, KeyError, TypeError):
            pass  # an entry this code cannot use: examined in full below, and replaced
    examined = store.read_record(path, registry, root, data)
    keep(index, sha, scope, examined, plain=not signing.is_envelope(json.loads(data)))
    return examined


def keep(index: catalog_index.Index, sha: str, scope: str, examined: Examined, plain: bool) -> None:
    """The entry of a record whose bytes have the sha256 ``sha``, examined in full (its seal checked and its
    signature verified against the registry of ``scope``, before any standing is judged): the one shape
    :func:`read_facts` and ``_read`` read back; written only when the index lacks it. ``plain``: not an envelope
    (a wrong guess only costs a full read next time: ``_read`` falls back)."""
    value = _entry(examined.seal, examined.verification, facts_of(examined.record), plain)
    if index.fact(sha, KIND, scope) != value:
        index.remember(sha, KIND, value, scope)


def keep_missing(index: catalog_index.Index, scope: str, entries: Iterable[tuple[str, Examined[Facts], bool]]) -> None:
    """:func:`keep` for each (sha256, examined record as its facts, plain) whose entry the index lacks, found
    without reading any entry's value (``Index.have``: an entry is a function of the bytes, the code and the
    registry, so one that is there is this one; one that fails its check digest is replaced when read). A reader
    of a few records (``Index.few``: ``audit --since``) asks for their keys alone."""
    entries = list(entries)
    there = index.have(KIND, scope, [sha for sha, _e, _p in entries] if index.few else None)
    for sha, examined, plain in entries:
        if sha not in there:
            index.remember(sha, KIND, _entry(examined.seal, examined.verification, examined.record, plain), scope)


def _entry(seal: str, v: Verification, facts: Facts, plain: bool) -> dict:
    return {"plain": plain, "seal": seal, "trust": v.trust, "keyid": v.keyid, "reason": v.reason,
            "facts": facts.to_row()}
