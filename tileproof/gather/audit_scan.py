"""Reading runs/ and evidence/ fast, for the audit: every file read once, the byte work in a second process.

Every file is read through ``records.safe_read`` (regular files inside the
repository only, never a link in runs/ or evidence/, FIFOs and devices refused
from ``lstat`` without being opened, size-capped); a refused file is
an ``input-*`` finding (``judge.audit.rules.inputs``), never hashed or skipped.

``byte_pass`` is the model-free half of the audit (record seals from the raw
JSON, every evidence file hashed, check reports compared with their
transcripts); ``helper`` runs it in the runner's one forked process when that pays off.
Nothing here decides anything: the rules are ``judge.audit.rules``'s.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from tileproof.judge.audit.result import Issue
from tileproof.judge.audit.rules import inputs
from tileproof.judge.audit.rules.verdicts import report_diff
from tileproof.records import store
from tileproof.records.errors import InputRefused
from tileproof.records.safe_read import read_bytes, read_evidence
from tileproof.runner.forked import ForkedHelper


def walk(root: str, folder: str, refused: dict[str, Issue]) -> Iterator[str]:
    """Every entry under ``root/folder`` that is not a folder, as a root-relative POSIX path.

    Nothing is followed or opened here: ``os.scandir`` reports each entry's type
    from the directory itself, a link (to a folder too) is yielded as an entry
    (``safe_read`` then refuses it), and a folder that cannot be listed is
    ``refused`` (one ``input-unreadable`` issue), never skipped silently."""
    stack = [folder]
    while stack:
        rel = stack.pop()
        try:
            entries = os.scandir(os.path.join(root, rel))
        except FileNotFoundError:
            continue
        except OSError as err:
            refused[rel] = inputs.refused_issue(InputRefused(rel, "unreadable", f"cannot be listed ({err.strerror})",
                                                             "check its permissions"))
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(f"{rel}/{entry.name}")
                else:
                    yield f"{rel}/{entry.name}"


def read_record(root: str, name: str) -> bytes:
    """One record file ``runs/<name>`` through ``safe_read`` (a plain file, never a link, at most 8 MiB)."""
    return read_bytes(root, f"{store.RUNS}/{name}", "record")


def byte_pass(root: str, record_names: list[str]):
    """The model-free half of the audit, run in a second process while this one
    validates: ``raw_seal`` of each record file (None when not a JSON object, or
    refused: the main process reports that); (size, sha256) of every file under
    evidence/, each read once through ``safe_read.read_evidence``; and, for each
    run record whose check-report.json matches its digest, ``report_diff`` of the
    two. Returns (seals, digests, report diffs by record file name, refused
    evidence: path → its ``inputs`` issue)."""
    seals: dict[str, str | None] = {}
    wanted: dict[str, list] = defaultdict(list)
    for name in record_names:
        try:
            raw = json.loads(read_record(root, name))
        except (InputRefused, ValueError, RecursionError):  # refused, not JSON, nested past json: reported by _validate
            raw = None
        if not isinstance(raw, dict):
            seals[name] = None
            continue
        try:
            raw = store.unwrap(raw)  # a signed record: its predicate (trust: records.runner_keys.verify)
        except ValueError:
            seals[name] = None
            continue
        seals[name] = store.seal_of_json(raw)
        ref = raw.get("report_file")
        if raw.get("kind") == "run" and isinstance(ref, dict) and isinstance(ref.get("path"), str):
            wanted[ref["path"]].append((name, ref.get("sha256"), raw.get("report")))
    disk: dict[str, tuple[int, str]] = {}
    diffs: dict[str, list[str] | str] = {}
    refused: dict[str, Issue] = {}
    for rel in walk(root, store.EVIDENCE, refused):
        try:
            data = read_evidence(root, rel)
        except InputRefused as e:  # a link, FIFO, oversized file...: its own finding, never hashed
            refused[rel] = inputs.refused_issue(e)
            continue
        disk[rel] = (len(data), sha := hashlib.sha256(data).hexdigest())
        for name, recorded, report in wanted.get(rel, ()):
            if recorded == sha:
                diffs[name] = report_diff(report, data)
    return seals, disk, diffs, refused


PARALLEL_MIN_RECORDS = 200
"""Below this, everything runs in this process (a second one costs more)."""

WORKERS_NOTE = ("1 forked process computes record seals, hashes every evidence file and compares check "
                "reports while the main process validates records and runs the other rules")


def helper(jobs: int) -> ForkedHelper:
    """The runner's one forked process for ``byte_pass`` when there are enough records to pay for it."""
    return ForkedHelper(jobs >= PARALLEL_MIN_RECORDS)


@contextmanager
def paused_gc():
    """No cyclic garbage collection inside (reference counting still frees)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


