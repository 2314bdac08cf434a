"""The audit's read of runs/: every record validated, the rules that need a whole record applied, and of each only
plain values kept (:class:`Kept`), never the whole record's model, so a fleet's records fit in memory.

A plain run record's outcome is kept in the catalog (``catalog.Audited``, its index) as one entry, kind
:data:`KIND`, keyed by the sha256 of its bytes and the code key: what is kept of it and the issues its per-record
checks found. The checks read nothing but the record and two of its transcripts (``audit_rules.Context``: its pip
freeze and nvidia-smi query, through :class:`Transcripts`, which refuses any other), so the entry also holds what
each of those was found to be (its digest when its bytes on disk are the ones the record names, else None). A
record file whose ``lstat`` is the one the index's ``files`` row holds (git's own trust in stat data, racy entries
excluded; below a real runs/, within the record cap) has those bytes: its entry is used, without the file being
read, when each of its two transcripts is found today as it was then; any other record is read, validated and
checked in full, and its entry made. An entry that fails its check digest or does not decode is ignored (counted
in the index's notes) and the record read in full. A signed record (an envelope: its signature is judged against
the registry) and every other kind (few) are always read in full.

``tests/test_audit_read.py`` compares, for every record of the suite's trees, what an entry gives with what the
full read gives.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tileproof.catalog import Audited
from tileproof.judge import plausibility, preselect
from tileproof.judge.audit import audit_rules
from tileproof.judge.audit.result import Issue, RunTable, TableRow, table_row
from tileproof.judge.audit.rules import commits, evidence, files, inputs, sessions
from tileproof.judge.audit.rules.packages import freeze_names
from tileproof.records import models, store
from tileproof.records.errors import InputRefused, RecordError, TileproofError
from tileproof.records.findings import Finding
from tileproof.records.models import SHARED_MAX, RunRecord, TranscriptRef, share
from tileproof.records.parsers import parse_gpu_query, parse_pip_freeze
from tileproof.records.safe_read import read_evidence
from tileproof.records.trust.runner_keys import RunnerRegistry, Verification
from tileproof.records.walk import read_record, real_folders, vouches

KIND = Audited.KIND
"""The catalog's kind of a run record's kept values and issues (scope ``audit``: a plain record's outcome depends on
no registry; kept apart from the byte pass's facts)."""


class NotYetKnown(frozenset[str]):
    """``Context.known`` while records are still being read: a check of a run record that asked which run ids
    validated would be answered before every record was read, so it fails instead (checks of the other kinds, which
    the audit keeps in full, run once every record was read)."""

    def __contains__(self, item) -> bool:
        raise AssertionError("Context.known asked before every record was read (run it with the kept kinds)")


@dataclass(slots=True)
class Kept:
    """What the audit keeps of one record that validated, once the rules that need the whole record ran. The record
    itself is kept for the other kinds (compile, bench, claims, session: few) and for ``audit --since``'s few
    records."""

    name: str
    sha256: str
    """Of its bytes: a record read again (:func:`again`) must be these bytes."""
    seal: str
    facts: preselect.Facts
    seen: plausibility.Seen
    refs: list[tuple[str, TranscriptRef]]
    """``evidence.refs``: every transcript it references, with its field path."""
    claim: commits.Claim
    verification: Verification | None
    """Its signature's, None for a plain record (not an envelope)."""
    report: tuple[TranscriptRef | None, bool] | None = None
    """A run record's ``report_file`` and whether it carries a ``report``; None for other kinds."""
    session: sessions.SessionRun | None = None
    record: Any = None
    unisolated: bool = False
    """A step of it ran without a wall (``models.unisolated``): the audit lists such records."""


def parse(root: Path, name: str, data: bytes, runners: RunnerRegistry) -> tuple[Any, Verification | None]:
    """The record in ``data`` (``runs/<name>``'s bytes) and its signature's verification (None: a plain record);
    the envelope reader's InputRefused or RecordError (one line) when it is neither."""
    try:
        return store.record_of_json(data), None
    except ValidationError:
        # a signed record (an envelope), or the one-line, version-first message
        loaded = store.read_record(root / store.RUNS / name, runners)
        return loaded.record, loaded.verification


def again(root: Path, read: Kept, runners: RunnerRegistry):
    """The record of ``read`` in full: the one kept, or for a run record the one read again from runs/, which must
    be the bytes audited (a TileproofError, one line, when the file changed meanwhile)."""
    if read.record is not None:
        return read.record
    file = f"{store.RUNS}/{read.name}"
    try:
        data = read_record(str(root), read.name)
        if store.sha256_bytes(data) == read.sha256:
            return parse(root, read.name, data, runners)[0]
    except (InputRefused, RecordError, ValidationError):
        pass
    raise TileproofError(f"{file}: changed while the audit read it (fix: audit again once nothing writes runs/)")


Dep = tuple[str, str, str | None]
"""(path, sha256 the record names, the digest it was found with: that one when its bytes on disk are those, else
None): one of the transcripts a run record's checks read, as :meth:`Transcripts.trust` found it."""


class Transcripts:
    """The transcripts the consistency rules re-read (a run record's pip freeze and nvidia-smi query, shared by its
    session's records), each read once, by the first run record naming it, and kept only where its digest is that
    record's: ``audit_rules.Context``'s readers, which answer only for the record checked (:meth:`trust`)."""

    def __init__(self, root: Path):
        self.root = root
        self.trusted: dict[str, bytes | None] = {}
        self.digests: dict[str, str | None] = {}
        self.queries: dict[str, list[dict] | None] = {}
        self.freezes: dict[str, tuple[dict, set] | None] = {}
        self.asked: frozenset[str] = frozenset()

    @staticmethod
    def of(rec: RunRecord) -> list[tuple[str, str]]:
        """(path, sha256) of each transcript the checks of ``rec`` may read."""
        return [(t.path, t.sha256) for t in (rec.environment.pip_freeze, rec.environment.nvidia_smi_query)
                if t is not None]

    def trust(self, named: list[tuple[str, str]]) -> list[Dep]:
        """Each transcript of ``named`` (:meth:`of` a record: path, sha256) read unless it was, and trusted when its
        digest is the one named; the readers answer for these alone until the next call. Returns what each was
        found as."""
        found = self.found(named)
        self.asked = frozenset(path for path, _sha in named)
        return [(path, sha256, digest) for (path, sha256), digest in zip(named, found, strict=True)]

    def found(self, named: list[tuple[str, str]]) -> list[str | None]:
        """:meth:`trust`'s reading of ``named``: what each was found as, the readers left as they were."""
        for path, sha256 in named:
            if path not in self.trusted and evidence.evidence_path_ok(path):
                try:
                    data = read_evidence(self.root, path)
                except InputRefused:  # missing or refused: the evidence rules report it
                    data = None
                ok = data is not None and store.sha256_bytes(data) == sha256
                self.trusted[path] = data if ok else None
                self.digests[path] = sha256 if ok else None
        return [self.digests.get(path) for path, _sha in named]

    def _text(self, t) -> str | None:
        if t.path not in self.asked:  # a verified entry records only what trust() was given
            raise AssertionError(f"a check read {t.path}, not one of its record's pip freeze and nvidia-smi query")
        text = self.trusted.get(t.path)
        return None if text is None else text.decode("utf-8", "replace")

    def query_rows(self, t):
        if t.path not in self.queries:
            text = self._text(t)
            self.queries[t.path] = None if text is None else parse_gpu_query(text)
        elif t.path not in self.asked:
            self._text(t)
        return self.queries[t.path]

    def freeze(self, t):
        if t.path not in self.freezes:
            text = self._text(t)
            self.freezes[t.path] = None if text is None else (parse_pip_freeze(text), freeze_names(text))
        elif t.path not in self.asked:
            self._text(t)
        return self.freezes[t.path]


def add_all(add, file: str, issues: Iterable[Issue]) -> None:
    for rule_id, reason in issues:
        add(Finding(file, rule_id, reason))


def found_in(file: str, issues: Iterable[Issue]) -> list[Finding]:
    """Each issue of ``file`` as its finding."""
    return [Finding(file, rule_id, reason) for rule_id, reason in issues]


@dataclass
class Checking:
    """What the per-record rules read besides the record: the registry its signature is judged against, the
    rules' context (``ctx``, its ``known`` :class:`NotYetKnown` meanwhile), the transcripts they may read and the
    report's table each run record joins."""

    root: Path
    runners: RunnerRegistry
    ctx: audit_rules.Context
    transcripts: Transcripts
    table: RunTable


def validate(checking: Checking, names: list[str], audited: Audited) -> tuple[list[Kept], set[str], list[Finding]]:
    """What is kept of each record that validates, the per-record rules of its run records applied (``checking``)
    and those added to its table; the evidence paths of the records that do not validate; the findings. A plain run
    record comes from its entry in the catalog (``audited``) while its bytes are those (the module docstring); a
    few (``audit --since``: ``audited`` asked for few) are each read and kept in full."""
    kept: list[Kept] = []
    raw_refs: set[str] = set()
    findings: list[Finding] = []
    sroot = str(checking.root)
    vouched = not audited.few and real_folders(sroot, store.RUNS)
    for name in names:
        try:
            st: os.stat_result | None = os.lstat(os.path.join(sroot, store.RUNS, name))
        except OSError:
            st = None  # the reader says why
        got = audited.take(f"{store.RUNS}/{name}", st) if vouched and st is not None and vouches(st) else None
        read = _from_entry(name, *got, checking.transcripts, findings.append, checking.table,
                           audited.ignored) if got else None
        read = read or _read_in_full(checking, name, st, audited, (findings, raw_refs))
        if read is not None:
            kept.append(read)
    return kept, raw_refs, findings


def _read_in_full(checking: Checking, name: str, st: os.stat_result | None, audited: Audited,
                  out: tuple[list[Finding], set[str]]) -> Kept | None:
    """The record ``runs/<name>`` read, validated and checked in full, its entry kept when it is a plain run record;
    its findings (and, when it does not validate, the evidence paths its raw JSON names) to ``out``."""
    findings, raw_refs = out
    file = f"{store.RUNS}/{name}"
    try:
        data = read_record(str(checking.root), name)
    except InputRefused as e:
        findings.append(Finding(file, *inputs.refused_issue(e)))
        return None
    sha = audited.content(str(checking.root), name, st, data)  # learned: status, --since read no record
    try:
        rec, verification = parse(checking.root, name, data, checking.runners)
    except InputRefused as e:  # read, but not UTF-8 or nested too deep: the reader names why
        findings.append(Finding(file, *inputs.refused_issue(e)))
        findings.append(Finding(file, files.SCHEMA, f"does not parse as a record ({inputs.rule_for(e.kind)})"))
        return None
    except RecordError as e:
        findings.append(Finding(file, files.SCHEMA, f"{e.field + ': ' if e.field else ''}{e.problem}"))
        with contextlib.suppress(ValueError, RecursionError):  # not JSON: the schema finding says so
            raw_refs.update(evidence.raw_transcript_paths(json.loads(data)))
        return None
    findings += found_in(file, files.name_issues(name, rec.run_id))
    read = Kept(name, sha, rec.seal, preselect.facts_of(rec), plausibility.seen(rec), evidence.refs(rec),
                commits.claim_of(rec), verification, unisolated=models.unisolated(rec))
    if isinstance(rec, RunRecord):
        findings += _run_checks(checking, read, rec, audited)
    if audited.few or not isinstance(rec, RunRecord):
        read.record = rec
    return read


def _run_checks(checking: Checking, read: Kept, rec: RunRecord, audited: Audited) -> list[Finding]:
    """The per-record rules of a run record read in full, its row added to the table, and (a plain record) its
    entry kept: what :func:`_from_entry` gives back next time."""
    deps = checking.transcripts.trust(Transcripts.of(rec))
    issues = audit_rules.run_checks(rec, checking.ctx)
    read.report = (rec.report_file.ref() if rec.report_file else None, rec.report is not None)
    row = table_row(read.name, rec)
    read.session = sessions.session_run(read.name, rec)
    checking.table.add(row)
    if read.verification is None and (entry := _entry(read, row, issues, deps)) is not None:
        audited.add(read.sha256, entry)
    return found_in(f"{store.RUNS}/{read.name}", issues)


class _Decoded:
    """A part of an entry that many records' entries hold alike (a session's transcripts and what the signals read
    of it, a program's sources and commit), kept in the entry as its JSON text: each text decoded once (``decode``)
    and one value for all (bounded as ``models.share`` is)."""

    def __init__(self, decode: Callable[[Any], Any]) -> None:
        self.decode, self.done = decode, dict[str, Any]()

    def __call__(self, text: str) -> Any:
        got = self.done.get(text)
        if got is None:
            if len(self.done) >= SHARED_MAX:
                self.done.clear()
            got = self.done[text] = self.decode(json.loads(text))
        return got


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


_SEEN = _Decoded(plausibility.Seen.shared_of_row)
_CLAIM = _Decoded(lambda c: commits.Claim(share(c[0]), c[1], share(tuple(map(tuple, c[2])))))
_REF = _Decoded(lambda r: share((r[0], TranscriptRef(*r[1:]))))
_PLACE = _Decoded(lambda p: (tuple(p[0]), share(p[1])))
SESSION_WIDE = "environment."
"""The references a session's records hold alike (field paths starting so): kept as texts (:class:`_Decoded`)."""


def _entry(read: Kept, row: TableRow, issues: list[Issue], deps: list[Dep]) -> dict | None:
    """A plain run record's verified entry: what :func:`_from_entry` gives back. Its report reference and the
    transcripts its checks read are among its references (``evidence.refs``: every transcript): kept as their place
    there, and a transcript found as the record names it as 1 (else its digest found, or None). None (no entry:
    the record is read in full every time) if one were not."""
    assert read.report is not None
    report, has_report = read.report
    refs = [t for _where, t in read.refs]
    at = {(t.path, t.sha256): i for i, t in reversed(list(enumerate(refs)))}
    if (report is not None and report not in refs) or any((path, sha) not in at for path, sha, _found in deps):
        return None
    shared_seen, own_seen = read.seen.to_rows()
    return {"seal": read.seal, "facts": read.facts.to_row(), "seen": [_text(shared_seen), own_seen],
            "refs": [_text((where, *t)) if where.startswith(SESSION_WIDE) else (where, *t) for where, t in read.refs],
            "claim": _text(read.claim), "report": [refs.index(report) if report is not None else None, has_report],
            "place": _text([row.column, row.session_id]), "issues": issues, "unisolated": read.unisolated,
            "deps": [(at[path, sha], 1 if found == sha else found) for path, sha, found in deps]}


def _from_entry(name: str, sha: str, value: dict, transcripts: Transcripts, add, table: RunTable,
                undecoded: Callable[[], None] = lambda: None) -> Kept | None:
    """The record ``runs/<name>`` (content ``sha``) from its entry ``value``, its issues added and its row added to
    ``table``; None when there is none, it does not decode (counted as ignored), or one of the transcripts its checks
    read is not found as it was then (the record is then read in full; ``undecoded`` is told of one that does
    not decode). The entry's check digest vouches for its
    shape (made by this code: ``catalog.index``), so its values are taken as they are."""
    try:
        refs = [_REF(ref) if isinstance(ref, str) else (ref[0], TranscriptRef(*ref[1:])) for ref in value["refs"]]
        named = [refs[i][1] for i, _found in value["deps"]]
        expected = [t.sha256 if state == 1 else state for t, (_i, state) in zip(named, value["deps"], strict=True)]
        if transcripts.found([(t.path, t.sha256) for t in named]) != expected:
            return None
        facts = preselect.Facts.from_row(value["facts"])
        if facts.kind != "run" or facts.program is None or facts.verdict is None:
            raise ValueError("not a run record's facts")
        report, has_report = value["report"]
        shared_seen, own_seen = value["seen"]
        column, session_id = _PLACE(value["place"])
        read = Kept(name, sha, value["seal"], facts, _SEEN(shared_seen).from_rows(own_seen), refs,
                    _CLAIM(value["claim"]), None, (refs[report][1] if report is not None else None, has_report),
                    unisolated=bool(value["unisolated"]))
        row = TableRow(name, facts.program, column, facts.created, facts.run_id, facts.verdict, session_id)
        read.session = sessions.SessionRun(name, row.run_id, session_id, share(row.verdict))
        issues = list(map(tuple, value["issues"]))
    except (KeyError, TypeError, ValueError, IndexError):
        undecoded()
        return None
    file = f"{store.RUNS}/{name}"
    add_all(add, file, files.name_issues(name, facts.run_id))
    add_all(add, file, issues)
    table.add(row)
    return read
