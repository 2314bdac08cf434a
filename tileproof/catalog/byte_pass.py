"""The byte pass: runs/ and evidence/ read fast for the audit, every file once, in a second process.

Every file is read through ``records.safe_read`` (regular files inside the
repository only, never a link in runs/ or evidence/, FIFOs and devices refused
from ``lstat`` without being opened, size-capped); a refused file is
an ``input-*`` finding (``judge.audit.rules.inputs``), never hashed or skipped.

``byte_pass`` is the model-free half of the audit (record seals from the raw
JSON, every evidence file hashed, check reports compared with their
transcripts); ``helper`` runs it in the runner's one forked process when that pays off (``catalog.fork``).
A fast path, never a source of truth: every fact it takes from the index is one a full read would give.
Nothing here decides anything: the rules are ``judge.audit.rules``'s.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Iterator, MutableMapping

from tileproof.catalog import index as catalog_index
from tileproof.catalog.fork import Background
from tileproof.judge.audit.result import Issue
from tileproof.judge.audit.rules import inputs
from tileproof.judge.audit.rules.verdicts import report_diff
from tileproof.records import store
from tileproof.records.errors import InputRefused
from tileproof.records.safe_read import read_evidence
from tileproof.records.walk import read_record, real_folders, vouches, walk


class Hashed(MutableMapping[str, tuple[int, str]]):
    """Path → (size, sha256 as lowercase hex) of each evidence file the byte pass hashed, as a dict of them reads,
    each kept as 40 bytes (the size, then the digest's bytes) and made into its tuple when asked for: every one is
    sent from the byte helper and held to the audit's end, so each is kept in the least memory (docs/benchmarks.md,
    "The catalog")."""

    def __init__(self) -> None:
        self._packed: dict[str, bytes] = {}

    def __getitem__(self, rel: str) -> tuple[int, str]:
        packed = self._packed[rel]
        return int.from_bytes(packed[:8], "little"), packed[8:].hex()

    def __setitem__(self, rel: str, value: tuple[int, str]) -> None:
        size, sha256 = value
        digest = bytes.fromhex(sha256)
        if len(digest) != 32 or digest.hex() != sha256:
            raise ValueError(f"not a sha256 in lowercase hex: {sha256!r}")  # never: hashlib's hexdigest
        self._packed[rel] = size.to_bytes(8, "little") + digest

    def __delitem__(self, rel: str) -> None:
        del self._packed[rel]

    def __contains__(self, rel: object) -> bool:
        return rel in self._packed

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)


def byte_pass(root: str, record_names: list[str], folders: tuple[str, ...] | None = None):
    """The model-free half of the audit, run in a second process while this one
    validates: ``raw_seal`` of each record file (None when not a JSON object, or
    refused: the main process reports that); (size, sha256) of every file under
    evidence/, each read once through ``safe_read`` and streamed as it is hashed (:class:`Hashed`); and, for each
    run record whose check-report.json matches its digest, ``report_diff`` of the
    two. Returns (seals, digests, report diffs by record file name, refused
    evidence: path → its ``inputs`` issue, the index's notes).

    What it learns goes to the verified-file index (``catalog.index``): a record's seal and
    report reference by the sha256 of its bytes, a transcript's digest by its stat data, a report
    diff by the two contents it compares. An unchanged file is not hashed again, and a record file whose
    ``lstat`` is the one indexed (below a real runs/) is not read here when its facts are known: the main
    process reads and validates every record file, and compares its seal with the one given here.
    ``folders``: the folders under evidence/ to read (``audit --since``); default all of evidence/."""
    index = catalog_index.opened(root)
    index.few = folders is not None  # audit --since: a few folders' rows, asked for one by one
    now = catalog_index.now_ns()
    seals: dict[str, str | None] = {}
    wanted: dict[str, list] = defaultdict(list)
    runs_vouched = real_folders(root, store.RUNS)
    for name in record_names:
        sha = _indexed_record(root, name, index) if runs_vouched else None
        fact = index.fact(sha, "raw-record") if sha is not None else None
        if fact is None:  # not known by its stat (a known one is not read here: the main process reads it)
            try:
                data = read_record(root, name)
            except InputRefused:  # reported by _validate
                seals[name] = None
                continue
            sha = hashlib.sha256(data).hexdigest()
            fact = index.fact(sha, "raw-record")
            if fact is None:
                fact = _raw_facts(data)
                index.remember(sha, "raw-record", fact)
        seals[name] = fact["seal"]
        if fact.get("report") is not None:
            path, recorded = fact["report"]
            wanted[path].append((name, recorded, sha))
    disk = Hashed()
    diffs: dict[str, list[str] | str] = {}
    refused: dict[str, Issue] = {}
    stats: dict[str, os.stat_result] = {}
    starts = folders if folders is not None else (store.EVIDENCE,)
    real = {folder: real_folders(root, folder) for folder in starts}
    listed = ((rel, real[folder]) for folder in starts for rel in walk(root, folder, _refusing(refused), stats))
    for rel, vouched in listed:
        try:  # an index entry is used only below real folders (a linked evidence/ is read, and refused)
            known = catalog_index.content(root, rel, "evidence", index, stats.pop(rel, None) if vouched else None, now)
        except InputRefused as e:  # a link, FIFO, oversized file...: its own finding, never hashed
            refused[rel] = inputs.refused_issue(e)
            continue
        disk[rel] = (known.size, known.sha256)
        for name, recorded, record_sha in wanted.get(rel, ()):
            if recorded == known.sha256:
                diffs[name] = _report_diff(root, name, record_sha, rel, known.sha256, index)
    index.save()
    return seals, disk, diffs, refused, tuple(index.notes())


def _indexed_record(root: str, name: str, index: catalog_index.Index) -> str | None:
    """The sha256 the index gives the record file ``runs/<name>`` by its ``lstat`` (one that :func:`vouches`, its stat
    the one a row was made from: ``catalog_index.Index.known``), or None (then it is read). Only below a real runs/
    (:func:`real_folders`) does a stat vouch for the file."""
    try:
        st = os.lstat(os.path.join(root, store.RUNS, name))
    except OSError:
        return None
    if not vouches(st):
        return None
    known = index.known(f"{store.RUNS}/{name}", st)
    return known.sha256 if known is not None else None


def _raw_facts(data: bytes) -> dict:
    """A record file's seal digest from its raw JSON (None when it is not a record's JSON object) and, for a
    run record, its check report's (path, sha256)."""
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, nested past json: reported by _validate
        return {"seal": None, "report": None}
    if not isinstance(raw, dict):
        return {"seal": None, "report": None}
    try:
        raw = store.unwrap(raw)  # a signed record: its predicate (trust: records.trust.runner_keys.verify)
    except ValueError:
        return {"seal": None, "report": None}
    ref = raw.get("report_file")
    report = None
    if raw.get("kind") == "run" and isinstance(ref, dict) and isinstance(ref.get("path"), str):
        report = [ref["path"], ref.get("sha256")]
    return {"seal": store.seal_of_json(raw), "report": report}


def _report_diff(root: str, name: str, record_sha: str, rel: str, transcript_sha: str,
                 index: catalog_index.Index) -> list[str] | str:
    """``report_diff`` of the record ``runs/<name>`` (content ``record_sha``) and its check report ``rel``
    (content ``transcript_sha``), from the index when both contents are the ones it was made from."""
    key = hashlib.sha256(f"{record_sha}\0{transcript_sha}".encode()).hexdigest()
    fact = index.fact(key, "report-diff")
    if fact is not None:
        return fact["diff"]
    raw = store.unwrap(json.loads(read_record(root, name)))
    data = read_evidence(root, rel)
    if hashlib.sha256(data).hexdigest() != transcript_sha:  # changed since it was hashed: compare what is there
        return report_diff(raw.get("report"), data)
    diff = report_diff(raw.get("report"), data)
    index.remember(key, "report-diff", {"diff": diff})
    return diff


PARALLEL_MIN_RECORDS = 200
"""Below this, everything runs in this process (a second one costs more)."""

WORKERS_NOTE = ("1 forked process computes record seals, hashes every evidence file and compares check "
                "reports while the main process validates records and runs the other rules")


def helper(jobs: int) -> Background:
    """The runner's one forked process for ``byte_pass`` when there are enough records to pay for it."""
    return Background(jobs >= PARALLEL_MIN_RECORDS)


def _refusing(refused: dict[str, Issue]):
    """A walk's ``refuse`` keeping each refusal in ``refused`` as its ``input-*`` issue."""
    def refuse(rel: str, error: InputRefused) -> None:
        refused[rel] = inputs.refused_issue(error)
    return refuse


