"""Reading runs/ and evidence/ fast, for the audit: every file read once, the byte work in a second process.

``byte_pass`` is the model-free half of the audit (record seals from the raw
JSON, every evidence file hashed, check reports compared with their
transcripts); ``Helper`` runs it in one forked process when that pays off.
Nothing here decides anything: the rules are ``judge.audit.rules``'s.
"""

from __future__ import annotations

import gc
import hashlib
import json
import multiprocessing
import os
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

from tileproof.judge.audit.rules.verdicts import report_diff
from tileproof.records import store


def read(path: str) -> bytes:
    """A whole file with the fewest syscalls and no buffered-reader object:
    40,000 small files are read per audit of 10,000 records."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) <= size:  # a short read or a file that grew: read the rest
            chunks = [data]
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
        return data
    finally:
        os.close(fd)


def walk(root: str, folder: str) -> Iterator[str]:
    """Every file under ``root/folder`` as a root-relative POSIX path."""
    stack = [folder]
    while stack:
        rel = stack.pop()
        try:
            entries = os.scandir(os.path.join(root, rel))
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    stack.append(f"{rel}/{e.name}")
                else:
                    yield f"{rel}/{e.name}"


def byte_pass(root: str, record_names: list[str]):
    """The model-free half of the audit, run in a second process while this one
    validates: ``raw_seal`` of each record file (None when not a JSON object);
    (size, sha256) of every file under evidence/, each read once; and, for each
    run record whose check-report.json matches its digest, ``report_diff`` of the
    two. Returns (seals, digests, report diffs by record file name)."""
    seals: dict[str, str | None] = {}
    wanted: dict[str, list] = defaultdict(list)
    runs = os.path.join(root, store.RUNS)
    for name in record_names:
        try:
            raw = json.loads(read(os.path.join(runs, name)))
        except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested past json: record-schema says so
            raw = None
        if not isinstance(raw, dict):
            seals[name] = None
            continue
        try:
            raw = store.unwrap(raw)  # a signed record: its predicate (trust: records.registry.verify)
        except ValueError:
            seals[name] = None
            continue
        seals[name] = store.seal_of_json(raw)
        ref = raw.get("report_file")
        if raw.get("kind") == "run" and isinstance(ref, dict) and isinstance(ref.get("path"), str):
            wanted[ref["path"]].append((name, ref.get("sha256"), raw.get("report")))
    disk: dict[str, tuple[int, str]] = {}
    diffs: dict[str, list[str] | str] = {}
    for rel in walk(root, store.EVIDENCE):
        try:
            data = read(os.path.join(root, rel))
        except OSError:  # a dangling link or unreadable file: reported as missing if referenced
            continue
        disk[rel] = (len(data), sha := hashlib.sha256(data).hexdigest())
        for name, recorded, report in wanted.get(rel, ()):
            if recorded == sha:
                diffs[name] = report_diff(report, data)
    return seals, disk, diffs


PARALLEL_MIN_RECORDS = 200
"""Below this, everything runs in this process (a second one costs more)."""

WORKERS_NOTE = ("1 forked process computes record seals, hashes every evidence file and compares check "
                "reports while the main process validates records and runs the other rules")


class Helper:
    """One forked process for the model-free byte work, when that pays off
    (Linux, 2+ CPUs, 200+ records); otherwise each job runs inline when asked."""

    def __init__(self, jobs: int):
        self.pool = None
        if jobs >= PARALLEL_MIN_RECORDS and (os.cpu_count() or 1) > 1 \
                and "fork" in multiprocessing.get_all_start_methods():
            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))

    def submit(self, fn, *args):
        """A callable returning ``fn(*args)``: computed meanwhile, or on call."""
        if self.pool is None:
            return lambda: fn(*args)
        return self.pool.submit(fn, *args).result

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


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


