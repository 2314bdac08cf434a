"""A verdict that does not take the program's word: tileproof checks the outputs a program handed over.

After a program's step, while its report folder still exists (``execute.run_program``), :func:`check` reads the
manifest the program wrote (``handover.json``, through ``records.safe_read``), validates it
(``records.handover.Handover``) and keeps it under ``evidence/`` (redacted, like every transcript); then
:func:`plan` (the validated checks and their tolerance entries) goes, as one job, to the session's
:class:`Checker`: one ``runner.outside_worker`` process per run session, started as the session opens
(``process.start``: the same containment and wall as a program's step) with no GPU visible, which reads the
program's report folder (each program's lies in the session's handover folder, bound into the worker read-only)
and answers one JSON line per job, read back as ``OutsideCheck`` models. A job the worker does not answer in
time, or answers wrongly, fails every check it had by name (``checker-error``: never a pass); the worker is then
ended, and the next job starts a new one.

:func:`combine` then makes the record's verdict from both words: ``passed`` only when the program's report and
tileproof's own check agree on every check; a check on which they disagree is ``checker-disagrees`` (NaN, Inf
or an all-equal output is a failure outside whatever the report says); a passing run with a check tileproof
could not recompute (nothing handed over, no reference) is ``unverified``, which never decides that check's row
(``RunRecord.unverified``, ``judge.gate``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

import tileproof
from tileproof.records import tolerances
from tileproof.records.errors import InputRefused, TileproofError
from tileproof.records.handover import MANIFEST, MANIFEST_CAP_BYTES, REFERENCES_FILE, Handover
from tileproof.records.models import CheckReport, OutsideCheck, OutsideVerdict, RunVerdict, pair_checks
from tileproof.records.redact import redact
from tileproof.records.safe_read import read_bytes, read_text
from tileproof.records.store import sha256_bytes, write_evidence
from tileproof.runner.environment import child_env
from tileproof.runner.process import Finished, Running, scratch_dir, start
from tileproof.runner.wall import Wall

CHECKER_CAP = 4 << 20
"""Bytes kept of the checker's output (one JSON line: a few hundred bytes per check)."""

_PACKAGE_ROOT = Path(tileproof.__file__).resolve().parent.parent
"""The folder holding the ``tileproof`` package: the checker's only import path beside the interpreter's own."""


class _Answer(BaseModel):
    """What ``outside_worker`` prints for one job."""

    model_config = ConfigDict(extra="forbid")
    job: str
    checks: list[OutsideCheck]
    refused: str | None = None


def checker_env() -> dict[str, str]:
    """The allowlisted environment with no GPU visible and only tileproof's own package on the import path."""
    env = child_env()
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONPATH"] = str(_PACKAGE_ROOT)
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _failed_all(names: list[str], why: str, problem: str = "checker-error") -> list[OutsideCheck]:
    return [OutsideCheck.model_validate({"name": n, "status": "failed", "problem": problem, "why": why})
            for n in names]


def plan(root: Path, raw: bytes | None) -> dict[str, Any] | str | None:
    """What the worker checks: ``{"checks": [...], "table": {check: [rtol, atol]}, "references": text,
    "references_file": path}`` from the manifest's bytes ``raw`` validated as ``Handover``, today's tolerance
    entries and reference table (``references`` None without one); None when the program handed nothing over; a
    one-line reason when the manifest, the tolerance table or the reference table cannot be read (every check then
    fails, ``refused``)."""
    if raw is None:
        return None
    try:
        manifest = Handover.model_validate_json(raw)
    except ValidationError as e:
        err = e.errors()[0]
        return f"{MANIFEST}: {'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
    try:
        table = tolerances.load_table(root)
        text: str | None = read_text(root, REFERENCES_FILE, "tolerances")
    except InputRefused as e:
        if e.kind != "missing":
            return str(e).splitlines()[0]
        text = None
    except TileproofError as e:
        return str(e).splitlines()[0]
    return {"checks": [c.model_dump(mode="json") for c in manifest.checks],
            "table": {c.name: list(table[c.name]) for c in manifest.checks if c.name in table},
            "references": text, "references_file": REFERENCES_FILE}


def read_manifest(folder: Path) -> tuple[bytes | None, str | None]:
    """(``handover.json`` as the program left it in ``folder``, None when there is none; why it was refused: a
    link, a special file, ``records.safe_read``; larger than ``MANIFEST_CAP_BYTES``)."""
    try:
        raw = read_bytes(folder, MANIFEST, "handover", MANIFEST)
    except InputRefused as e:
        return None, None if e.kind == "missing" else str(e)
    if len(raw) > MANIFEST_CAP_BYTES:
        return None, f"{MANIFEST}: {len(raw)} bytes, more than the {MANIFEST_CAP_BYTES} a manifest may hold"
    return raw, None


class Checker:
    """tileproof's own checker of one run session (:func:`session`): one walled ``outside_worker`` process, started
    when the session opens and kept for every job; ended (and started anew at the next job) when it fails one."""

    def __init__(self, root: Path, handovers: Path, scratch: Path) -> None:
        self.root = root
        self.handovers = handovers
        """The folder each program's report folder is made in (``execute.run_program``): bound into the worker
        read-only, it sees the folders made there after it started."""
        self.scratch = scratch
        self.worker: Running | None = None
        self.starts = 0
        """How many workers this checker started (1 for a session whose checks all went well)."""
        self.jobs = 0

    def _start(self) -> Running:
        self.starts += 1
        return start([sys.executable, "-m", "tileproof.runner.outside_worker"], env=checker_env(), cwd=self.scratch,
                     cap=CHECKER_CAP, scratch=self.scratch,
                     wall=Wall(self.root, (self.scratch,), readable=(self.handovers,)))

    def _fail(self, names: list[str], what: str) -> list[OutsideCheck]:
        """End the worker and fail every check of the job it had, with what it did in one line."""
        assert self.worker is not None
        done: Finished = self.worker.end()
        self.worker = None
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        said = f"exit code {done.exit_code}: {tail[0][:300]}" if done.exit_code not in (None, 0) or tail[0] else ""
        return _failed_all(names, f"tileproof's checker failed: {what}" + (f" ({said})" if said else ""))

    def run(self, folder: Path, planned: dict[str, Any], names: list[str], timeout: float) -> list[OutsideCheck]:
        """One job: the planned checks of ``folder`` (a folder in ``handovers``), answered within ``timeout``."""
        self.jobs += 1
        job = secrets.token_hex(8)
        plan_file = self.scratch / f"plan-{job}.json"
        plan_file.write_text(json.dumps(planned), encoding="utf-8")
        os.chmod(plan_file, 0o644)  # the worker reads it as the wall's user
        try:
            if self.worker is not None and self.worker.started.proc.poll() is not None:
                self.worker.end()  # it died between jobs (killed from outside): a new one takes over
                self.worker = None
            if self.worker is None:
                self.worker = self._start()
        except (OSError, TileproofError) as e:
            plan_file.unlink(missing_ok=True)
            return _failed_all(names, f"tileproof's checker could not be started: {str(e).splitlines()[0]}")
        try:
            if not self.worker.send(json.dumps({"job": job, "folder": str(folder), "plan": str(plan_file)}).encode()):
                return self._fail(names, "it ended before it was given the job")
            line = self.worker.read_line(timeout)
            if line is None:
                return self._fail(names, "timed out" if self.worker.timed_out else "it ended without answering")
            try:
                answer = _Answer.model_validate_json(line)
            except ValidationError as e:
                return self._fail(names, f"it printed no verdict ({e.errors()[0]['msg']})")
            if answer.job != job:
                return self._fail(names, f"it answered job {answer.job[:16]!r}, not this one")
        finally:
            plan_file.unlink(missing_ok=True)
        if answer.refused:
            return _failed_all(names, answer.refused, "refused")
        return answer.checks

    def close(self) -> None:
        """End the worker (its input closed: it ends by itself)."""
        if self.worker is not None:
            self.worker.end()
            self.worker = None


    def warm(self) -> None:
        """Start the worker now, while the first program runs (its start then costs that program no wall time);
        one that cannot start is started again, or its failure named, at the first job."""
        if self.worker is None:
            with contextlib.suppress(OSError, TileproofError):
                self.worker = self._start()


@contextlib.contextmanager
def session(root: Path, warm: bool = False) -> Iterator[Checker]:
    """A checker for a run session and its handover folder (``Checker.handovers``), both gone when it ends; its
    worker started at once with ``warm`` (``Checker.warm``: a run session), else at the first job (a bench's
    program: nothing of the checker runs beside its timed work)."""
    with scratch_dir() as handovers, scratch_dir() as mine:
        os.chmod(handovers, 0o711)  # the worker (the wall's user) enters it; it lists nothing
        checker = Checker(root, handovers, mine)
        try:
            if warm:
                checker.warm()
            yield checker
        finally:
            checker.close()


def check(checker: Checker, run_id: str, folder: Path, report: CheckReport, timeout: float) -> OutsideVerdict:
    """tileproof's own check of what the program left in ``folder`` (made in ``checker.handovers``): one
    ``OutsideCheck`` per check of ``report`` (``unverified``/``no-outputs`` for one it handed nothing over for) and
    per handed-over check the report lacks; the manifest kept as evidence of ``run_id``. ``wall_s``: the seconds
    this took as tileproof saw them: the manifest read and kept, the job's round trip through the session's
    worker (waiting, at the first job, for the rest of a start that began with the session), and that worker's
    start when this job started it (the first job after a worker failed)."""
    root = checker.root
    names = [c.name for c in report.checks]
    started = time.perf_counter()
    raw, refused = read_manifest(folder)
    manifest = write_evidence(root, run_id, MANIFEST, redact(raw)[0]) if raw is not None else None
    planned = refused or plan(root, raw)
    found: list[OutsideCheck] = []
    text = planned.get("references") if isinstance(planned, dict) and planned["checks"] else None
    if isinstance(planned, str):
        found = _failed_all(names, planned, "refused")
    elif planned is not None and planned["checks"]:
        found = checker.run(folder, planned, names or [c["name"] for c in planned["checks"]], timeout)
    wall = time.perf_counter() - started
    pairs = pair_checks(report, found)
    missing = [OutsideCheck(name=c.name, status="unverified", problem="no-outputs", index=i,
                            why=f"the program handed over no outputs for check {c.name}")
               for i, (c, mine) in enumerate(pairs) if mine is None]
    return OutsideVerdict(checks=[*found, *missing], manifest=manifest, wall_s=round(wall, 6),
                          references_sha256=sha256_bytes(text.encode()) if text is not None else None)


def combine(verdict: RunVerdict, reason: str, report: CheckReport | None,
            outside: OutsideVerdict | None) -> tuple[RunVerdict, str]:
    """The record's verdict from the program's (``execute.verdict_of``) and tileproof's own check."""
    if outside is None or report is None or verdict not in ("passed", "failed"):
        return verdict, reason
    pairs = outside.pairs(report)
    for i, (said, mine) in enumerate(pairs):
        if mine is None or mine.status == "unverified":
            continue
        if said.passed != (mine.status == "passed"):
            program = "passed" if said.passed else "failed"
            return "checker-disagrees", (f"check {_named(said.name, i, pairs)}: the program's report says {program}, "
                                         f"tileproof's own check says {mine.status} ({mine.problem or 'agrees'}): "
                                         f"{mine.why}")
    failed = [c for c in outside.checks if c.status == "failed"]
    if verdict == "passed" and failed:
        c = failed[0]
        return "checker-disagrees", f"check {c.name}: tileproof's own check failed ({c.problem}): {c.why}"
    unverified = [(i, c) for i, (_, c) in enumerate(pairs) if c is not None and c.status == "unverified"]
    if verdict == "passed" and unverified:
        i, c = unverified[0]
        more = f" and {len(unverified) - 1} more" if len(unverified) > 1 else ""
        return "unverified", (f"{reason}, by the program's word only for check {_named(c.name, i, pairs)}{more}: "
                              f"{c.why} (an unverified check decides nothing)")
    if verdict == "passed":
        return verdict, f"{reason}; tileproof's own check agrees"
    return verdict, reason


def _named(name: str, index: int, pairs: list) -> str:
    """A check as a reason names it: its name, and its position in the report when another check shares the name."""
    return f"{name} (#{index})" if sum(1 for said, _ in pairs if said.name == name) > 1 else name
