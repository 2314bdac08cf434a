"""``python -m tileproof audit``: check every record, transcript and lesson.

The audit only reads: ``runs/``, ``evidence/``, ``lessons/`` and today's files.
Each rule is a pure function of data already read (a record, a parsed
transcript, the set of files on disk) returning ``(rule id, reason)`` pairs;
``audit()`` does the reading once (every evidence file hashed once) and turns
those pairs into :class:`Finding` rows. The only files it writes are its two
reports, ``evidence/AUDIT.md`` and ``evidence/audit.html`` (atomically), which
the orphan rule therefore skips.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import tempfile
import typing
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator

from pydantic import BaseModel, TypeAdapter, ValidationError

from tileproof.records import store
from tileproof.records.errors import RecordError
from tileproof.records.models import (
    CheckReport,
    CompileRecord,
    Environment,
    Record,
    RunRecord,
    SessionRecord,
    Toolchain,
    Transcript,
)
from tileproof.records.parsers import parse_gpu_query, parse_pip_freeze
from tileproof.toolchain.find import PACKAGES as TOOLCHAIN_PACKAGES
from tileproof.toolchain.find import major_minor

RULES: dict[str, str] = {
    "record-schema": "a record in runs/ is not valid JSON or does not validate against its schema version",
    "record-name": "a record's file name is not <run_id>.json",
    "record-seal": "a record changed after it was written: its seal is not the digest of its content",
    "record-reference": "a record names another record (reused_from) that is not in runs/",
    "evidence-path": "a record references an evidence path outside evidence/",
    "evidence-missing": "a record references an evidence file that does not exist",
    "evidence-digest": "an evidence file's sha256 or size differs from what its record says",
    "evidence-orphan": "a file in evidence/ that no record references",
    "verdict-exit-code": "a run's verdict disagrees with its exit code or timeout",
    "verdict-report": "a run's verdict disagrees with its check report (gate, checks, passed)",
    "report-transcript": "the check report inside a run record differs from its check-report.json transcript",
    "cc-transcript": "a run's GPU compute capability differs from its nvidia-smi query transcript",
    "cc-runtime": "the CUDA runtime's or the program's compute capability differs from nvidia-smi's",
    "gpu-transcript": "a run's GPU name, uuid or driver differs from its nvidia-smi query transcript",
    "packages-freeze": "recorded package versions differ from the run's pip freeze transcript",
    "toolchain-mixed": "tileiras/nvcc/nvvm/ptxas (tools or packages) of more than one major.minor",
    "build-verdict": "a compile record's build verdicts disagree with their exit codes or artifacts",
    "session-incomplete": "a run session's program records exist but its closing session record does not",
    "session-runs": "a session record's run list or verdict counts disagree with the run records",
    "lesson-front": "a lesson's front matter cannot be read",
    "lesson-published-without-evidence": "a published lesson lacks, today, the evidence the publish gate requires",
}
"""Stable rule ids → what each one catches (also listed at the end of both reports)."""

REPORT_MD = "AUDIT.md"
REPORT_HTML = "audit.html"
LESSONS = "lessons"
KEEP_FILES = frozenset({".gitkeep"})
"""Names in evidence/ that are never orphans."""

_RECORD = TypeAdapter(Record)


@dataclass(frozen=True, order=True)
class Finding:
    """One line of the audit: the file at fault, the rule, and why."""

    file: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.rule}: {self.reason}"


@dataclass(frozen=True)
class RowStatus:
    """One results row of a lesson, as the publish gate decided it."""

    program: str
    check: str
    optional: bool
    outcome: str
    """A ``gate.Outcome``: passed, no-record, failed, gated, stale, forged-cc, ..."""
    reason: str
    command: str | None
    """What would produce the missing evidence; None when passed."""
    run_id: str | None

    def __str__(self) -> str:
        fix = f" (fix: {self.command})" if self.command else ""
        return f"{self.program} {self.check}: {self.outcome}: {self.reason}{fix}"


@dataclass
class LessonStatus:
    """A lesson as the audit sees it, with the gate's decision for each row."""

    id: str
    file: str
    title: str
    status: str
    programs: list[str]
    publishable: bool
    rows: list[RowStatus]

    @property
    def missing(self) -> list[RowStatus]:
        """Required rows the gate does not accept today."""
        return [r for r in self.rows if r.outcome != "passed" and not r.optional]

    def summary(self) -> str:
        required = [r for r in self.rows if not r.optional]
        head = f"{self.file}: {self.status}, {len(required) - len(self.missing)}/{len(required)} required rows have evidence"
        return head if not self.missing else head + "; missing: " + "; ".join(map(str, self.missing))


@dataclass
class AuditResult:
    root: Path
    findings: list[Finding]
    records: list
    """Every record that validated, oldest first."""
    lessons: list[LessonStatus]
    evidence_files: int
    evidence_bytes: int
    record_files: int
    bad_records: set[str] = field(default_factory=set)
    """Record names (``runs/<name>.json``) with a finding against them or their evidence."""

    @property
    def ok(self) -> bool:
        return not self.findings


Issue = tuple[str, str]
"""(rule id, reason): what a pure rule returns; ``audit`` adds the file."""


# --- the rules: pure functions of data already read --------------------------


def transcripts(obj, where: str = "") -> list[tuple[str, Transcript]]:
    """Every ``Transcript`` inside a model, with its field path (``step.stdout``).

    Only fields whose annotation can hold a Transcript are visited (computed once
    per model class), so a new transcript field in models.py is found without
    touching this module, and a 200-entry ``packages`` dict is never walked.
    """
    out: list[tuple[str, Transcript]] = []
    _collect(obj, where, out)
    return out


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


@lru_cache(maxsize=None)
def _transcript_fields(cls: type) -> tuple[tuple[str, bool], ...]:
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


def evidence_issues(where: str, ref: Transcript, actual: tuple[int, str] | None) -> list[Issue]:
    """``actual``: (size, sha256) of the file today, None when it is missing."""
    if not evidence_path_ok(ref.path):
        return [("evidence-path", f"{where} points outside evidence/: {ref.path!r}")]
    if actual is None:
        return [("evidence-missing", f"{where} references a file that does not exist")]
    size, sha = actual
    if sha != ref.sha256:
        grew = f"; {ref.bytes} bytes recorded, {size} on disk" if size != ref.bytes else ""
        return [("evidence-digest", f"{where}: sha256 {sha[:12]}… on disk, {ref.sha256[:12]}… recorded{grew}")]
    if size != ref.bytes:
        return [("evidence-digest", f"{where}: {size} bytes on disk, {ref.bytes} recorded")]
    return []


def raw_seal(raw: dict) -> str:
    """``store.seal_of`` computed from the record's JSON as read, without a model.

    ``write_record`` writes exactly the model's JSON dump, so for an untouched
    file this equals ``seal_of(record)``; any edit, even one that validation
    would normalise away (a reformatted float, a dropped default), changes it.
    Three times faster than dumping the model again.
    """
    body = dict(raw)
    body["seal"] = ""
    return store.sha256_bytes(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


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
            out.append(("evidence-orphan", f"{store.EVIDENCE}/{folder}/",
                        f"none of its {len(files)} files is referenced by a record{record}"))
        else:
            out += [("evidence-orphan", rel, "no record references this file") for rel in sorted(files)]
    return out


def seal_issues(record, raw_digest: str, model_digest: str | None = None) -> list[Issue]:
    """``raw_digest``: ``raw_seal`` of the file; ``model_digest``: ``seal_of`` of
    the validated record, computed only when the first differs, to say whether
    the content changed or only its bytes."""
    if not record.seal:
        return [("record-seal", "record has no seal (not written by store.write_record)")]
    if record.seal == raw_digest:
        return []
    if model_digest == record.seal:
        return [("record-seal", "bytes changed after writing (the content still reads as sealed): restore it from git")]
    return [("record-seal", f"content digest {(model_digest or raw_digest)[:12]}… differs from its seal "
                            f"{record.seal[:12]}…: edited after writing")]


def expected_report_passed(report: CheckReport) -> bool:
    """What kernels/harness.py computes: gate ok, at least one check, all passed."""
    return report.gate == "ok" and bool(report.checks) and all(c.passed for c in report.checks)


def verdict_issues(rec: RunRecord) -> list[Issue]:
    """passed ⇔ exit 0, report passed, gate ok; gated ⇔ gate below-sm80, exit ≠ 0;
    no-gpu ⇔ gate no-gpu (or no report and no GPU), exit ≠ 0; failed ⇔ exit ≠ 0,
    gate ok, a check failed; timeout ⇔ the step timed out; error: anything else
    that is not a pass in disguise."""
    step, report, verdict = rec.step, rec.report, rec.verdict
    code = step.exit_code
    out: list[Issue] = []
    if step.timed_out and verdict != "timeout":
        out.append(("verdict-exit-code", f"verdict {verdict} but the step timed out"))
    elif verdict == "timeout" and not step.timed_out:
        out.append(("verdict-exit-code", f"verdict timeout but the step did not time out (exit {code})"))
    elif verdict == "passed" and code != 0:
        out.append(("verdict-exit-code", f"verdict passed but exit code {code}"))
    elif verdict in ("failed", "gated", "no-gpu") and code in (0, None):
        out.append(("verdict-exit-code", f"verdict {verdict} but exit code {code}"))

    if report is not None and report.passed != expected_report_passed(report):
        failed = sum(not c.passed for c in report.checks)
        out.append(("verdict-report", f"report.passed is {report.passed} but gate {report.gate}, "
                                      f"{len(report.checks)} checks, {failed} failed"))
    gate = report.gate if report is not None else None
    failing = [c.name for c in report.checks if not c.passed] if report is not None else []
    if verdict == "passed":
        if report is None:
            out.append(("verdict-report", "verdict passed without a check report"))
        elif gate != "ok" or not report.passed or failing or not report.checks:
            why = f"gate {gate}" if gate != "ok" else (f"checks failed: {', '.join(failing)}" if failing else "report not passed")
            out.append(("verdict-report", f"verdict passed but the check report says {why}"))
    elif verdict == "gated" and gate != "below-sm80":
        out.append(("verdict-report", f"verdict gated but the check report's gate is {gate or 'absent'}"))
    elif verdict == "no-gpu" and gate != "no-gpu" and not (report is None and rec.environment.gpu is None):
        out.append(("verdict-report", f"verdict no-gpu but the check report's gate is {gate or 'absent'} "
                                      f"and the environment has a GPU"))
    elif verdict == "failed":
        if report is None:
            out.append(("verdict-report", "verdict failed without a check report (a crash is 'error')"))
        elif gate != "ok":
            out.append(("verdict-report", f"verdict failed but the check report's gate is {gate}"))
        elif report.passed and not failing:
            out.append(("verdict-report", "verdict failed but every check in the report passed"))
    elif verdict == "error" and code == 0 and report is not None and expected_report_passed(report):
        out.append(("verdict-report", "verdict error but exit code 0 and every check passed"))
    return out


def report_diff(embedded: dict | None, text: bytes) -> list[str] | str:
    """Top-level keys in which a record's check report (as JSON) and its
    check-report.json transcript differ, or a problem with the transcript.
    Compared as JSON values, so the harness's key order and float spelling
    do not matter."""
    try:
        raw = json.loads(text)
    except ValueError:
        return "is not valid JSON"
    if not isinstance(raw, dict):
        return "is not a JSON object"
    if embedded is None:
        return "holds a check report the record lacks"
    missing = object()
    return [k for k in sorted(set(embedded) | set(raw)) if embedded.get(k, missing) != raw.get(k, missing)]


def report_transcript_issues(rec: RunRecord, diff: list[str] | str | None) -> list[Issue]:
    """``diff``: ``report_diff`` of the record and its transcript; None when
    there is no trustworthy transcript (the evidence rules report that)."""
    if rec.report_file is None:
        if rec.report is not None:
            return [("report-transcript", "record carries a check report but no check-report.json transcript")]
        return []
    if diff is None or diff == []:
        return []
    if isinstance(diff, str):
        return [("report-transcript", f"{rec.report_file.path} {diff}")]
    return [("report-transcript", f"check report differs from {rec.report_file.path} in {', '.join(diff)}")]


def cc_issues(env: Environment, rows: list[dict] | None, report: CheckReport | None = None) -> list[Issue]:
    """``rows``: the nvidia-smi query transcript re-parsed (None: no trustworthy transcript)."""
    gpu = env.gpu
    out: list[Issue] = []
    if gpu is None:
        if rows:
            listed = ", ".join(f"{r['name']} (cc {r['compute_capability']})" for r in rows)
            out.append(("cc-transcript", f"environment has no GPU but nvidia-smi lists {listed}"))
        return out
    if env.nvidia_smi_query is None:
        out.append(("cc-transcript", f"GPU {gpu.name} recorded without an nvidia-smi query transcript to confirm it"))
    elif rows is not None:
        row = next((r for r in rows if r["uuid"] == gpu.uuid), None) or next((r for r in rows if r["index"] == gpu.index), None)
        if row is None:
            out.append(("cc-transcript", f"GPU {gpu.index} ({gpu.uuid}) is not in the nvidia-smi query transcript"))
        else:
            if row["compute_capability"] != gpu.compute_capability:
                out.append(("cc-transcript", f"compute capability {gpu.compute_capability} recorded, "
                                             f"nvidia-smi says {row['compute_capability']}"))
            diffs = [f"{k} {getattr(gpu, k)!r} recorded, nvidia-smi says {row[k]!r}"
                     for k in ("name", "uuid", "driver_version") if row[k] != getattr(gpu, k)]
            if diffs:
                out.append(("gpu-transcript", "; ".join(diffs)))
    if gpu.runtime_compute_capability is not None and gpu.runtime_compute_capability != gpu.compute_capability:
        out.append(("cc-runtime", f"CUDA runtime says compute capability {gpu.runtime_compute_capability}, "
                                  f"nvidia-smi {gpu.compute_capability}"))
    if report is not None and report.device is not None and report.device.compute_capability != gpu.compute_capability:
        out.append(("cc-runtime", f"the program's report says compute capability {report.device.compute_capability}, "
                                  f"nvidia-smi {gpu.compute_capability}"))
    return out


def freeze_names(text: str) -> set[str]:
    """Names pip freeze lists without ``==`` (editable or direct-URL installs)."""
    out = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "==" in line:
            continue
        if "#egg=" in line:
            out.add(line.rsplit("#egg=", 1)[1].split("&")[0])
        elif " @ " in line:
            out.add(line.split(" @ ", 1)[0])
    return {n.strip().lower().replace("_", "-") for n in out}


def packages_issues(env: Environment, freeze: dict[str, str] | None, unpinned: set[str] = frozenset()) -> list[Issue]:
    """Recorded versions (packages, toolchain.packages, versions) vs pip freeze."""
    if freeze is None:
        return []
    diffs = []
    for source, table in (("packages", env.packages), ("toolchain.packages", env.toolchain.packages)):
        for name, version in table.items():
            got = freeze.get(name)
            if got is None:
                if name not in unpinned and source == "packages":
                    diffs.append(f"{name} {version} recorded, absent from pip freeze")
            elif got != version:
                diffs.append(f"{source}: {name} {version} recorded, pip freeze {got}")
    for name, version in env.versions.items():
        got = freeze.get(name)
        if got is not None and version is not None and got != version:
            diffs.append(f"versions: {name} {version} recorded, pip freeze {got}")
    missing = sorted(set(freeze) - set(env.packages))
    diffs += [f"{name} {freeze[name]} in pip freeze, not recorded" for name in missing]
    if not diffs:
        return []
    more = f" (+{len(diffs) - 3} more)" if len(diffs) > 3 else ""
    return [("packages-freeze", "; ".join(diffs[:3]) + more)]


def toolchain_issues(tc: Toolchain) -> list[Issue]:
    """Every tool (cuobjdump's tool version aside, as ``toolchain.coherence``)
    and every toolchain package must share one major.minor."""
    pieces = {f"{t.name}": major_minor(t.version) for t in tc.tools if t.name != "cuobjdump" and t.version}
    pieces.update({name: major_minor(v) for name, v in tc.packages.items() if name in TOOLCHAIN_PACKAGES})
    pieces = {k: v for k, v in pieces.items() if v}
    releases = sorted(set(pieces.values()))
    if len(releases) > 1:
        groups = "; ".join(f"{r}: {', '.join(sorted(n for n, x in pieces.items() if x == r))}" for r in releases)
        return [("toolchain-mixed", f"mixed releases ({groups})")]
    if releases and tc.major_minor is not None and tc.major_minor != releases[0]:
        return [("toolchain-mixed", f"major_minor {tc.major_minor} recorded but every piece is {releases[0]}")]
    return []


def build_issues(rec: CompileRecord, known: set[str]) -> list[Issue]:
    out: list[Issue] = []
    for b in rec.builds:
        label = f"{b.program} {b.target}"
        if b.verdict == "built":
            if b.step is not None and (b.step.timed_out or b.step.exit_code != 0):
                out.append(("build-verdict", f"{label}: built but its step exited {b.step.exit_code}"
                                             f"{' (timed out)' if b.step.timed_out else ''}"))
            if b.artifact is None:
                out.append(("build-verdict", f"{label}: built without an artifact"))
            if b.step is None and b.reused_from is None:
                out.append(("build-verdict", f"{label}: built with neither a step nor reused_from"))
        if b.reused_from is not None and b.reused_from not in known:
            out.append(("record-reference", f"{label}: reused_from {b.reused_from} is not in runs/"))
    all_built = bool(rec.builds) and all(b.verdict == "built" for b in rec.builds)
    if rec.passed != all_built:
        out.append(("build-verdict", f"passed is {rec.passed} but {sum(b.verdict == 'built' for b in rec.builds)} "
                                     f"of {len(rec.builds)} builds are built"))
    return out


def session_issues(session: SessionRecord, runs: list[RunRecord]) -> list[Issue]:
    """A closing session record vs the run records that name its session id."""
    out: list[Issue] = []
    have = {r.run_id for r in runs}
    listed = set(session.runs)
    if missing := [r for r in session.runs if r not in have]:
        out.append(("session-runs", f"lists {len(missing)} run(s) not in runs/ with this session: {', '.join(missing[:3])}"))
    if extra := sorted(have - listed):
        out.append(("session-runs", f"{len(extra)} run record(s) of this session are not listed: {', '.join(extra[:3])}"))
    counts = dict(Counter(r.verdict for r in runs))
    recorded = {k: v for k, v in session.verdict_counts.items() if v}
    if counts != recorded:
        out.append(("session-runs", f"verdict_counts {recorded} but the run records say {counts}"))
    return out


# --- lessons and the publish gate ---------------------------------------------


def lesson_files(root: Path) -> list[Path]:
    folder = root / LESSONS
    return sorted(folder.glob("*.md")) if folder.is_dir() else []


def read_lesson_front(path: Path):
    """The lesson's validated front matter; one-line RecordError otherwise."""
    from tileproof.records import lessons

    return lessons.load_path(path).front


def gate_candidates(records: Iterable, intact: set[str]) -> list[RunRecord]:
    """The run records the publish gate can pick, and no others.

    ``gate.decide`` takes, for each row, the newest intact-sealed record of the
    program from the row's hardware class (cc >= 8.0 with a GPU, cc < 8.0, or no
    GPU at all), and re-digests every record it is given. Passing only the newest
    record per (program, class) keeps its decision and spares 10,000 re-digests;
    records with a broken seal are left out (the gate ignores them too) and
    reported by ``record-seal``. ``intact``: run ids whose seal held.
    """
    from tileproof.judge.gate import MIN_CC, cc_tuple

    newest: dict[tuple, RunRecord] = {}
    for rec in records:
        if not isinstance(rec, RunRecord) or rec.run_id not in intact:
            continue
        gpu = rec.environment.gpu
        cc = cc_tuple(gpu.compute_capability) if gpu else None
        key = (rec.program, cc is not None and cc < MIN_CC, gpu is not None)
        old = newest.get(key)
        if old is None or (rec.created, rec.run_id) > (old.created, old.run_id):
            newest[key] = rec
    return list(newest.values())


def gate_decision(root: Path, front, candidates: list[RunRecord]) -> tuple[bool, list[RowStatus]]:
    """(publishable, one RowStatus per results row), from ``tileproof.gate`` with its
    inputs (today's digests, tolerance table, evidence reader) gathered as
    ``publish`` gathers them."""
    from tileproof.commands import (
        publish,  # imported lazily: only lessons need the gate
    )

    decision = publish.decide(root, front, candidates)
    rows = [RowStatus(program=r.row.program, check=r.row.check, optional=r.row.optional, outcome=r.outcome,
                      reason=r.reason, command=r.command, run_id=r.record.run_id if r.record else None)
            for r in decision.rows]
    return decision.publishable, rows


# --- reading ------------------------------------------------------------------


def _read(path: str) -> bytes:
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


def _walk(root: str, folder: str) -> Iterator[str]:
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
            raw = json.loads(_read(os.path.join(runs, name)))
        except (OSError, ValueError):  # unreadable or not JSON: record-schema says so
            raw = None
        if not isinstance(raw, dict):
            seals[name] = None
            continue
        try:
            raw = store.unwrap(raw)  # a signed record: its predicate (trust: records.registry.verify)
        except ValueError:
            seals[name] = None
            continue
        seals[name] = raw_seal(raw)
        ref = raw.get("report_file")
        if raw.get("kind") == "run" and isinstance(ref, dict) and isinstance(ref.get("path"), str):
            wanted[ref["path"]].append((name, ref.get("sha256"), raw.get("report")))
    disk: dict[str, tuple[int, str]] = {}
    diffs: dict[str, list[str] | str] = {}
    for rel in _walk(root, store.EVIDENCE):
        try:
            data = _read(os.path.join(root, rel))
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


class _Helper:
    """One forked process for the model-free byte work, when that pays off
    (Linux, 2+ CPUs, 200+ records); otherwise each job runs inline when asked."""

    def __init__(self, jobs: int):
        import multiprocessing

        self.pool = None
        if jobs >= PARALLEL_MIN_RECORDS and (os.cpu_count() or 1) > 1 \
                and "fork" in multiprocessing.get_all_start_methods():
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))

    def submit(self, fn, *args):
        """A callable returning ``fn(*args)``: computed meanwhile, or on call."""
        if self.pool is None:
            return lambda: fn(*args)
        return self.pool.submit(fn, *args).result

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def audit(root: Path, outputs: Iterable[Path] = ()) -> AuditResult:
    """Read runs/, evidence/ and lessons/ under ``root`` and apply every rule.

    ``outputs``: report files the audit writes (skipped by the orphan rule,
    besides the default ``evidence/AUDIT.md`` and ``evidence/audit.html``).
    The cyclic garbage collector is paused meanwhile: 10,000 records kept alive
    make each of its passes longer, which tripled the audit's time.
    """
    with paused_gc():
        runs_dir = Path(root) / store.RUNS
        names = sorted(e.name for e in os.scandir(runs_dir)
                       if e.name.endswith(".json") and e.is_file()) if runs_dir.is_dir() else []
        helper = _Helper(len(names))
        try:
            return _audit(Path(root), names, outputs, helper)
        finally:
            helper.close()


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


def _audit(root: Path, names: list[str], outputs: Iterable[Path], helper: _Helper) -> AuditResult:
    sroot = str(root)
    findings: list[Finding] = []
    add = findings.append
    records: list = []
    raw_refs: set[str] = set()
    flagged: set[str] = set()
    sealed_badly: set[str] = set()

    runs_dir = root / store.RUNS
    bytes_done = helper.submit(byte_pass, sroot, names)

    sruns = os.path.join(sroot, store.RUNS)
    for name in names:
        file = f"{store.RUNS}/{name}"
        try:
            data = _read(os.path.join(sruns, name))
        except OSError as e:
            add(Finding(file, "record-schema", f"cannot be read ({e.strerror})"))
            continue
        try:
            rec = _RECORD.validate_json(data)
        except ValidationError:
            try:
                rec = store.load_record(runs_dir / name)  # the one-line, version-first message
            except RecordError as e:
                add(Finding(file, "record-schema", f"{e.field + ': ' if e.field else ''}{e.problem}"))
                try:
                    raw_refs.update(raw_transcript_paths(json.loads(data)))
                except ValueError:
                    pass
                continue
        if name[:-5] != rec.run_id:
            add(Finding(file, "record-name", f"run_id is {rec.run_id}, file name is {name}"))
        records.append((name, rec))

    # The transcripts the consistency rules re-read (a session's pip freeze and
    # nvidia-smi query, shared by its records), trusted only where their digest
    # is the one their record gives. The helper hashes every file meanwhile.
    refs_of = {name: transcripts(rec) for name, rec in records}
    trusted: dict[str, bytes | None] = {}
    for _, rec in records:
        if isinstance(rec, RunRecord):
            for t in (rec.environment.pip_freeze, rec.environment.nvidia_smi_query):
                if t is not None and t.path not in trusted and evidence_path_ok(t.path):
                    try:
                        data = _read(os.path.join(sroot, t.path))
                    except OSError:
                        data = None
                    trusted[t.path] = data if data is not None and store.sha256_bytes(data) == t.sha256 else None
    records.sort(key=lambda nr: (nr[1].created, nr[1].run_id))
    findings += _consistency(records, trusted)

    seals, disk, diffs = bytes_done()
    for name, rec in records:
        file = f"{store.RUNS}/{name}"
        if seals.get(name) != rec.seal:
            flagged.add(name)
            model_digest = store.seal_of(rec)
            if model_digest != rec.seal:  # the gate, which re-digests the model, ignores it too
                sealed_badly.add(rec.run_id)
            for rule, reason in seal_issues(rec, seals.get(name) or "", model_digest):
                add(Finding(file, rule, reason))
        if isinstance(rec, RunRecord):
            for rule, reason in report_transcript_issues(rec, diffs.get(name)):
                add(Finding(file, rule, reason))
        for where, t in refs_of[name]:
            got = disk.get(t.path)
            if got is not None and got[1] == t.sha256 and got[0] == t.bytes:
                continue  # the common case; disk holds only normalised paths under evidence/
            issues = evidence_issues(f"{file} {where}", t, got)
            for rule, reason in issues:
                # Missing and digest findings name the evidence file; the reason names the record.
                add(Finding(t.path if rule != "evidence-path" else file, rule, reason))
                flagged.add(name)

    referenced = {t.path for refs in refs_of.values() for _, t in refs} | raw_refs
    skip = {f"{store.EVIDENCE}/{REPORT_MD}", f"{store.EVIDENCE}/{REPORT_HTML}"}
    skip |= {store.rel(root, Path(p)) for p in outputs}
    evidence_files = evidence_bytes = 0
    orphans: list[str] = []
    for rel, (size, _sha) in disk.items():
        if rel in skip or rel.rsplit("/", 1)[-1] in KEEP_FILES:
            continue
        evidence_files += 1
        evidence_bytes += size
        if rel not in referenced:
            orphans.append(rel)
    for rule, file, reason in orphan_issues(orphans, referenced, {n[:-5] for n in names}):
        add(Finding(file, rule, reason))

    records = [rec for _, rec in records]
    intact = {rec.run_id for rec in records} - sealed_badly
    lessons = _audit_lessons(root, records, intact, add)
    findings.sort()
    flagged |= {f.file[len(store.RUNS) + 1:] for f in findings if f.file.startswith(f"{store.RUNS}/")}
    return AuditResult(root=root, findings=findings, records=records, lessons=lessons,
                       evidence_files=evidence_files, evidence_bytes=evidence_bytes,
                       record_files=len(names), bad_records={n[:-5] for n in flagged})


def _consistency(records: list[tuple[str, object]], trusted: dict[str, bytes | None]) -> list[Finding]:
    """Verdicts, GPU, packages, toolchain, builds and sessions, record by record.
    Parsed transcripts and verdicts on shared environments are cached: a
    session's records share one pip freeze and one nvidia-smi transcript."""
    out: list[Finding] = []
    freeze_cache: dict[str, tuple[dict, set] | None] = {}
    query_cache: dict[str, list[dict] | None] = {}
    tc_cache: dict = {}
    pkg_cache: dict[str, list] = {}
    known = {rec.run_id for _, rec in records}
    by_session: dict[str, list[RunRecord]] = defaultdict(list)
    sessions: dict[str, tuple[str, SessionRecord]] = {}
    for name, rec in records:
        file = f"{store.RUNS}/{name}"
        issues: list[Issue] = []
        if isinstance(rec, RunRecord):
            env = rec.environment
            by_session[env.session_id].append(rec)
            issues += verdict_issues(rec)
            q = env.nvidia_smi_query
            if q is not None and q.path not in query_cache:
                text = trusted.get(q.path)
                query_cache[q.path] = None if text is None else parse_gpu_query(text.decode("utf-8", "replace"))
            issues += cc_issues(env, query_cache.get(q.path) if q is not None else None, rec.report)
            fz = env.pip_freeze
            if fz.path not in freeze_cache:
                text = trusted.get(fz.path)
                decoded = None if text is None else text.decode("utf-8", "replace")
                freeze_cache[fz.path] = None if decoded is None else (parse_pip_freeze(decoded), freeze_names(decoded))
            parsed = freeze_cache[fz.path]
            if parsed is not None:
                # A session's records share one environment: compare dicts (C speed), judge once.
                seen = pkg_cache.setdefault(fz.path, [])
                hit = next((i for p, t, v, i in seen if p == env.packages and t == env.toolchain.packages
                            and v == env.versions), None)
                if hit is None:
                    hit = packages_issues(env, parsed[0], parsed[1])
                    seen.append((env.packages, env.toolchain.packages, env.versions, hit))
                issues += hit
            issues += _toolchain_cached(env.toolchain, tc_cache)
        elif isinstance(rec, CompileRecord):
            issues += build_issues(rec, known)
            issues += _toolchain_cached(rec.toolchain, tc_cache)
        elif isinstance(rec, SessionRecord):
            if rec.session_id in sessions:
                issues.append(("session-runs", f"session {rec.session_id} is closed twice "
                                               f"(also by {sessions[rec.session_id][1].run_id})"))
            sessions[rec.session_id] = (name, rec)
        out += [Finding(file, rule, reason) for rule, reason in issues]
    names = {rec.run_id: name for name, rec in records}
    for sid, runs in by_session.items():
        if sid not in sessions:
            out.append(Finding(f"{store.RUNS}/{names[runs[0].run_id]}", "session-incomplete",
                               f"session {sid} has {len(runs)} program record(s) but no closing "
                               f"session record (interrupted run?)"))
    for sid, (name, session) in sessions.items():
        out += [Finding(f"{store.RUNS}/{name}", rule, reason)
                for rule, reason in session_issues(session, by_session.get(sid, []))]
    return out


def _toolchain_cached(tc: Toolchain, cache: dict) -> list[Issue]:
    """Records share a handful of toolchains: judge each distinct one once."""
    key = (tc.major_minor, tuple((t.name, t.version) for t in tc.tools), tuple(sorted(tc.packages.items())))
    issues = cache.get(key)
    if issues is None:
        issues = cache[key] = toolchain_issues(tc)
    return issues


def _audit_lessons(root: Path, records: list, intact: set[str], add) -> list[LessonStatus]:
    out = []
    candidates = None
    for path in lesson_files(root):
        file = f"{LESSONS}/{path.name}"
        try:
            front = read_lesson_front(path)
        except (RecordError, ValidationError, ValueError) as e:
            add(Finding(file, "lesson-front", str(e).splitlines()[0]))
            continue
        if candidates is None:
            candidates = gate_candidates(records, intact)
        publishable, rows = gate_decision(root, front, candidates)
        status = LessonStatus(id=front.id, file=file, title=front.title, status=front.status,
                              programs=[p.path for p in front.programs], publishable=publishable, rows=rows)
        if front.status == "published" and not publishable:
            missing = status.missing
            more = f" (+{len(missing) - 2} more)" if len(missing) > 2 else ""
            add(Finding(file, "lesson-published-without-evidence",
                        "published, but the gate lacks " + "; ".join(
                            f"{r.program} {r.check}: {r.outcome}: {r.reason}" for r in missing[:2]) + more))
        out.append(status)
    return out


# --- writing the reports ---------------------------------------------------------


def write_atomically(path: Path, text: str) -> None:
    """temp + os.replace: the audit's reports are the only evidence files rewritten."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; these are read by people and browsers
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def add_arguments(parser) -> None:
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (default: .)")
    parser.add_argument("--md", type=Path, default=None, help=f"Markdown report (default: evidence/{REPORT_MD})")
    parser.add_argument("--html", type=Path, default=None, help=f"HTML report (default: evidence/{REPORT_HTML})")
    parser.add_argument("--no-write", action="store_true", help="check only; write no report")


def run(args) -> int:
    from tileproof.report import render as report  # only the CLI renders

    root = args.root
    md = args.md or root / store.EVIDENCE / REPORT_MD
    html = args.html or root / store.EVIDENCE / REPORT_HTML
    with paused_gc():  # rendering 10,000 records' tables with the collector on costs it 3x
        return _run(args, root, md, html, report)


def _run(args, root: Path, md: Path, html: Path, report) -> int:
    result = audit(root, outputs=(md, html))
    for f in result.findings:
        print(f)
    for lesson in result.lessons:
        if lesson.status == "draft":
            print(lesson.summary())
    written = ""
    if not args.no_write:
        write_atomically(md, report.render_markdown(result, md.parent))
        write_atomically(html, report.render_html(result, html.parent))
        written = f"; wrote {md} and {html}"
    n = len(result.findings)
    print(f"audit: {len(result.records)} records, {result.evidence_files} evidence files, "
          f"{len(result.lessons)} lessons: {n} finding{'s' * (n != 1)}{written}",
          file=sys.stderr if n else sys.stdout)
    return 1 if n else 0
