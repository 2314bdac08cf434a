"""``tileproof publish LESSON [--dry-run]``: flip a lesson to published from evidence.

Gathers what the pure gate needs (records under runs/, today's digests, the
tolerance table, a reader for evidence/), asks ``gate.decide`` and, only when
every required row has its evidence, rewrites the lesson's status, hardware
block and results (front matter and body table) in one atomic replace.
Otherwise nothing is written and each missing row is printed with the command
that would produce its evidence. A lesson that declares performance claims
(front matter ``performance:``) also needs a bench record supporting each one
(``perf_claims``): each unsupported claim is printed the same way. Exit
status: 0 published (or would publish, or already published with evidence),
1 evidence missing, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path, PurePosixPath
from typing import Iterable

from tileproof.claims import core as claims
from tileproof.judge import gate, perf_claims
from tileproof.records import lessons, store, tolerances
from tileproof.records.errors import InputRefused, RecordError
from tileproof.records.models import BenchRecord, LessonFront, RunRecord
from tileproof.records.safe_read import read_evidence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lesson", help="lesson id (lessons/<id>.md)")
    parser.add_argument("--dry-run", action="store_true", help="show the decision; change nothing")
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (default: .)")


# --- gathering the gate's inputs (the only file access) ------------------------------


def _inside(root: Path, rel: str, folder: str | None = None) -> Path | None:
    """``root/rel`` when ``rel`` is a plain relative path (under ``folder``), else None."""
    pp = PurePosixPath(rel)
    if pp.is_absolute() or ".." in pp.parts or (folder and pp.parts[:1] != (folder,)):
        return None
    return Path(root) / pp


def today_digests(root: Path, paths: Iterable[str]) -> dict[str, str | None]:
    """path → sha256 of the file today, None when it does not exist."""
    out: dict[str, str | None] = {}
    for rel in paths:
        path = _inside(root, rel)
        out[rel] = store.sha256_file(path) if path is not None and path.is_file() else None
    return out


def evidence_reader(root: Path):
    """A reader for files under evidence/ only, through ``safe_read.read_evidence``; None
    for a path elsewhere or a missing file; a link, FIFO or oversized file raises one line."""
    def read(rel: str) -> bytes | None:
        if _inside(root, rel, store.EVIDENCE) is None:
            return None
        try:
            return read_evidence(root, rel)
        except InputRefused as e:
            if e.kind == "missing":
                return None
            raise
    return read


def load_table(root: Path) -> dict[str, gate.Bound]:
    """The tolerance table (kernels/tolerances.py) as check name → Bound; {} when absent."""
    if not (Path(root) / tolerances.TABLE_FILE).is_file():
        return {}
    return {name: gate.Bound(rtol, atol) for name, (rtol, atol) in tolerances.load_table(Path(root)).items()}


def run_records(root: Path) -> list[RunRecord]:
    """Every run record under runs/ (a record that fails validation raises one line)."""
    return [r for r in store.load_records(Path(root)) if isinstance(r, RunRecord)]


def bench_records(root: Path) -> list[BenchRecord]:
    """Every bench record under runs/ (``*-bench-*.json``; one that fails validation raises one line)."""
    files = [p for p in store.record_files(Path(root)) if "-bench-" in p.name]
    return [r for r in map(store.load_record, files) if isinstance(r, BenchRecord)]


def decide(root: Path, lesson: lessons.Lesson | LessonFront, records: list | None = None,
           bench: list | None = None) -> gate.Decision:
    """``gate.decide`` with its inputs read from ``root`` (records: all of runs/ unless given;
    bench: the bench records under runs/ unless given, read only when the lesson declares
    performance claims)."""
    front = lesson.front if isinstance(lesson, lessons.Lesson) else lesson
    records = run_records(root) if records is None else [r for r in records if isinstance(r, RunRecord)]
    if bench is None:
        bench = bench_records(root) if front.performance else []
    programs = {row.program for row in front.results}
    paths = programs | {s.path for r in records if r.program in programs for s in r.sources}
    return gate.decide(front, records + [r for r in bench if isinstance(r, BenchRecord)],
                       today_digests(root, sorted(paths)), load_table(root), evidence_reader(root))


# --- the command ---------------------------------------------------------------------


def describe(decision: gate.Decision, rows: Iterable[gate.RowDecision]) -> list[str]:
    lines = []
    for r in rows:
        tag = " (optional)" if r.row.optional else ""
        lines.append(f"  {r.row.program} {r.row.check}{tag}: {r.outcome}: {r.reason}")
        if r.command:
            lines.append(f"      fix: {r.command}")
    return lines


def describe_perf(claims: Iterable[perf_claims.ClaimDecision]) -> list[str]:
    lines = []
    for c in claims:
        lines.append(f"  perf claim {c.claim.id} ({c.claim.statement}): {c.outcome}: {c.reason}")
        if c.command:
            lines.append(f"      fix: {c.command}")
    return lines


def _lacking(decision: gate.Decision) -> str:
    """``1 of 5 required rows lack evidence``, and/or ``1 of 2 performance claims lack support``."""
    parts = []
    if decision.missing or not decision.unsupported:
        n, total = len(decision.missing), sum(1 for r in decision.rows if not r.row.optional)
        parts.append(f"{n} of {total} required rows lack evidence")
    if decision.unsupported:
        parts.append(f"{len(decision.unsupported)} of {len(decision.perf)} performance claims lack a supporting "
                     f"bench record")
    return " and ".join(parts)


def publish(root: Path, lesson_id: str, dry_run: bool = False) -> tuple[int, list[str]]:
    """Decide and (unless dry-run) publish; returns (exit status, lines to print)."""
    lesson = lessons.load(root, lesson_id)
    for field, path in lessons.missing_programs(root, lesson):
        raise RecordError(lesson.shown, field, f"{path} does not exist", f"restore {path} or fix the program list")
    decision = decide(root, lesson)
    name = lesson.id
    if lesson.front.status == "published":
        if decision.publishable:
            return 0, [f"{name}: already published (run {lesson.front.hardware.run_id}); nothing changed"]
        return 1, [f"{name}: published, but its evidence no longer holds (nox -s audit fails); nothing changed:",
                   *describe(decision, decision.missing), *describe_perf(decision.unsupported)]
    if not decision.publishable:
        return 1, [f"{name}: stays draft; {_lacking(decision)}; nothing changed:",
                   *describe(decision, decision.missing), *describe_perf(decision.unsupported)]
    refuted = claims.refuted_claims(root, lesson.id)
    if refuted:
        return 1, [f"{name}: stays draft; it still asserts {len(refuted)} refuted claim(s); nothing changed:",
                   *(f"  claim {cid}: {why} (claims record {run_id})\n      fix: correct the document, then set "
                     f"'asserted: false' on {cid} in lessons/claims/{name}.claims.yaml" for cid, why, run_id in refuted)]
    text = lessons.render(lesson, decision.published_front(lesson.front))
    hw = decision.hardware()
    summary = f"{hw.gpu} (cc {hw.compute_capability}), driver {hw.driver}, run {hw.run_id}"
    if dry_run:
        return 0, [f"{name}: would publish from {summary} (dry run: nothing changed)",
                   *describe(decision, decision.rows), *describe_perf(decision.perf)]
    lessons.write(lesson.path, text)
    return 0, [f"{name}: published from {summary}", *describe(decision, decision.rows), *describe_perf(decision.perf)]


def run(args: argparse.Namespace) -> int:
    code, lines = publish(args.root, args.lesson, args.dry_run)
    print("\n".join(lines), file=sys.stdout)
    return code
