"""A verdict that does not take the program's word: tileproof checks the outputs a program handed over.

After a program's step, while its report folder still exists (``execute.run_program``), :func:`check` reads the
manifest the program wrote (``handover.json``, through ``records.safe_read``), validates it
(``records.handover.Handover``) and keeps it under ``evidence/`` (redacted, like every transcript); then
:func:`plan` (the validated checks and their tolerance entries) goes to ``runner.outside_worker``, started in a
process of its own (``process.start_and_wait``: the same containment as a program's step) with no GPU visible,
whose one JSON line is read back as ``OutsideCheck`` models.

:func:`combine` then makes the record's verdict from both words: ``passed`` only when the program's report and
tileproof's own check agree on every check; a check on which they disagree is ``checker-disagrees`` (NaN, Inf
or an all-equal output is a failure outside whatever the report says); a passing run with a check tileproof
could not recompute (nothing handed over, no reference) is ``unverified``, which never decides that check's row
(``RunRecord.unverified``, ``judge.gate``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

import tileproof
from tileproof.records import tolerances
from tileproof.records.errors import InputRefused, TileproofError
from tileproof.records.handover import MANIFEST, MANIFEST_CAP_BYTES, REFERENCES_FILE, Handover
from tileproof.records.models import CheckReport, OutsideCheck, OutsideVerdict, RunVerdict
from tileproof.records.redact import redact
from tileproof.records.safe_read import read_bytes, read_text
from tileproof.records.store import sha256_bytes, write_evidence
from tileproof.runner.environment import child_env
from tileproof.runner.process import scratch_dir, start_and_wait
from tileproof.runner.wall import Wall

CHECKER_CAP = 4 << 20
"""Bytes kept of the checker's output (one JSON line: a few hundred bytes per check)."""

_PACKAGE_ROOT = Path(tileproof.__file__).resolve().parent.parent
"""The folder holding the ``tileproof`` package: the checker's only import path beside the interpreter's own."""


class _Answer(BaseModel):
    """What ``outside_worker`` prints."""

    model_config = ConfigDict(extra="forbid")
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


def _run_worker(root: Path, folder: Path, planned: dict[str, Any], names: list[str],
                timeout: float) -> list[OutsideCheck]:
    with scratch_dir() as mine:
        (mine / "plan.json").write_text(json.dumps(planned), encoding="utf-8")
        done = start_and_wait([sys.executable, "-m", "tileproof.runner.outside_worker", str(folder),
                               str(mine / "plan.json")], env=checker_env(), cwd=mine, timeout=timeout,
                              cap=CHECKER_CAP, scratch=mine, wall=Wall(root, (mine, folder)))
    if done.timed_out or done.exit_code != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        why = "timed out" if done.timed_out else f"exit code {done.exit_code}: {tail[0][:300]}"
        return _failed_all(names, f"tileproof's checker failed: {why}")
    try:
        answer = _Answer.model_validate_json(done.stdout)
    except ValidationError as e:
        return _failed_all(names, f"tileproof's checker printed no verdict ({e.errors()[0]['msg']})")
    if answer.refused:
        return _failed_all(names, answer.refused, "refused")
    return answer.checks


def check(root: Path, run_id: str, folder: Path, report: CheckReport, timeout: float) -> OutsideVerdict:
    """tileproof's own check of what the program left in ``folder``: one ``OutsideCheck`` per check of
    ``report`` (``unverified``/``no-outputs`` for one it handed nothing over for) and per handed-over check the
    report lacks; the manifest kept as evidence of ``run_id``."""
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
        found = _run_worker(root, folder, planned, names or [c["name"] for c in planned["checks"]], timeout)
    wall = time.perf_counter() - started
    seen = {c.name for c in found}
    missing = [OutsideCheck(name=n, status="unverified", problem="no-outputs",
                            why=f"the program handed over no outputs for check {n}")
               for n in names if n not in seen]
    return OutsideVerdict(checks=[*found, *missing], manifest=manifest, wall_s=round(wall, 6),
                          references_sha256=sha256_bytes(text.encode()) if text is not None else None)


def combine(verdict: RunVerdict, reason: str, report: CheckReport | None,
            outside: OutsideVerdict | None) -> tuple[RunVerdict, str]:
    """The record's verdict from the program's (``execute.verdict_of``) and tileproof's own check."""
    if outside is None or report is None or verdict not in ("passed", "failed"):
        return verdict, reason
    said = {c.name: c.passed for c in report.checks}
    by_name = {c.name: c for c in outside.checks}
    for name, passed in said.items():
        mine = by_name.get(name)
        if mine is None or mine.status == "unverified":
            continue
        if passed != (mine.status == "passed"):
            program = "passed" if passed else "failed"
            return "checker-disagrees", (f"check {name}: the program's report says {program}, tileproof's own "
                                         f"check says {mine.status} ({mine.problem or 'agrees'}): {mine.why}")
    failed = [c for c in outside.checks if c.status == "failed"]
    if verdict == "passed" and failed:
        c = failed[0]
        return "checker-disagrees", f"check {c.name}: tileproof's own check failed ({c.problem}): {c.why}"
    unverified = [c for c in outside.checks if c.status == "unverified" and c.name in said]
    if verdict == "passed" and unverified:
        c = unverified[0]
        return "unverified", (f"{reason}, by the program's word only for check {c.name}: {c.why} "
                              "(an unverified check decides nothing)")
    if verdict == "passed":
        return verdict, f"{reason}; tileproof's own check agrees"
    return verdict, reason

