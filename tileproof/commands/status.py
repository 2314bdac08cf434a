"""``tileproof status [LESSON ...]``: lesson × program × evidence, at a glance.

One line per results row: the lesson's status, the program and check, what the
evidence says (the gate's outcome, worded for an author: for a draft the newest
evidence, for a published lesson the records it cites), the run id and the GPU;
one line per performance claim (check ``perf:<id>``): the bench program, the
claim's outcome with the value it rests on, the bench record and its GPU; then one
line per lesson saying what is left, from the same verdict ``publish`` and the
audit print (``gather.tree.Tree.verdict``), in the words ``publish`` prints too
(``judge.lesson_state``): "ready to publish" or "already published, its records hold"
exactly when ``publish --dry-run`` would exit 0, and for a valid published lesson with
newer evidence the note "newer evidence: republish to refresh". Every printed line goes through
``records.errors.one_line``. Reads only; exit 0 unless an input is malformed (one
line, exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tileproof import lesson_text
from tileproof.claims import matrix
from tileproof.claims import spec as claims_spec
from tileproof.claims import status as claims
from tileproof.commands import add_lesson, add_root
from tileproof.gather.audit_scan import paused_gc
from tileproof.gather.tree import Tree
from tileproof.judge import gate, perf_claims, release_matrix
from tileproof.judge.lesson_state import LessonState
from tileproof.judge.verdict import LessonVerdict
from tileproof.records import lessons
from tileproof.records.errors import one_line
from tileproof.report import bench_view

WORDS = {
    "passed": "passed",
    "no-record": "missing",
    "failed": "failed",
    "gated": "gated",
    "stale": "stale",
    "forged-cc": "forged cc",
    "incoherent-toolchain": "mixed toolchain",
    "out-of-bounds": "out of bounds",
    "missing-file": "no such file",
    "toolchain-absent": "toolchain absent",
}
"""Each gate outcome as the status table shows it."""

PERF_WORDS = {
    "supported": "supported",
    "no-bench-record": "missing",
    "wrong-hardware": "wrong hardware",
    "below-claim": "below claim",
    "spread-exceeds-margin": "spread > margin",
    "noisy": "noisy",
}
"""Each performance-claim outcome as the status table shows it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lesson(parser, many=True, help="the lessons to show: lessons/LESSON.md (default: all)")
    add_root(parser)


def _gpu(r: gate.RowDecision) -> str:
    gpu = r.record.environment.gpu if r.record else None
    return f"{gpu.name} cc {gpu.compute_capability}" if gpu else "-"


def _perf_row(lesson: lessons.Lesson, c: perf_claims.ClaimDecision) -> list[str]:
    evidence = PERF_WORDS[c.outcome] + (f": {c.value_text()}" if c.value is not None else "")
    gpu = c.record.environment.gpu if c.record else None
    return [lesson.id, lesson.front.status, c.claim.program, f"perf:{c.claim.id}", evidence,
            c.record.run_id if c.record else "-", f"{gpu.name} cc {gpu.compute_capability}" if gpu else "-"]


def summary(judged: LessonVerdict) -> str:
    """The lesson's line under the table, from its one verdict: its state in the words ``publish`` prints too
    (``LessonVerdict.state``), then what to do next; ready exactly when ``publish --dry-run`` exits 0."""
    lesson, decision, state = judged.lesson, judged.decision, judged.state
    required = [r for r in decision.rows if not r.row.optional]
    ready = sum(1 for r in required if r.outcome == "passed")
    head = f"{lesson.id}: {lesson.front.status}, {ready}/{len(required)} required rows have evidence"
    if decision.perf:
        head += f", {len(decision.perf) - len(decision.unsupported)}/{len(decision.perf)} performance claims supported"
    if decision.refuted:
        head += f", {len(decision.refuted)} refuted claim(s) still asserted"
    head += f"; {state.message}"
    if state is LessonState.READY:
        return head + f": nox -s publish -- {lesson.id}"
    if state is LessonState.VALID:
        note = judged.note()
        return head + (f"; {note}" if note else "")
    problems = judged.tree_problems
    if problems:
        found = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return head + f": {found.file}: {found.rule}{more} (nox -s publish -- {lesson.id} --dry-run lists them)"
    if state is LessonState.DRAFT:
        first = decision.blockers[0]
        return head + f"; next: {first.command} (nox -s publish -- {lesson.id} --dry-run lists every row)"
    return head


def claims_documents(root: Path, ids: list[str]) -> list[str] | None:
    """The named lessons that have a claims file (None: every document); a lesson without one has no claims."""
    if not ids:
        return None
    have = {path.name.removesuffix(claims_spec.SUFFIX) for path in claims_spec.claims_files(Path(root))}
    return [i for i in ids if i in have]


def table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def status(root: Path, ids: list[str], tree: Tree | None = None) -> list[str]:
    chosen = [lessons.load(root, i) for i in ids] if ids else lessons.load_all(root)
    if not chosen:
        return ["no lessons under lessons/"]
    tree = tree or Tree.load(Path(root))
    rows = [["LESSON", "STATUS", "PROGRAM", "CHECK", "EVIDENCE", "RUN", "GPU"]]
    footer = []
    for lesson in chosen:
        judged = tree.verdict(lesson)
        decision = judged.decision
        for r in decision.rows:
            evidence = WORDS[r.outcome]
            if r.outcome == "failed" and r.record and r.record.verdict != "passed":
                evidence += f" ({r.record.verdict})" if r.record.verdict != "failed" else ""
            evidence += " (optional)" if r.row.optional else ""
            run = r.record.run_id if r.record else "-"
            rows.append([lesson.id, lesson.front.status, r.row.program, r.row.check, evidence, run, _gpu(r)])
        rows.extend(_perf_row(lesson, c) for c in decision.perf)
        rows.extend([lesson.id, lesson.front.status, "-", f"claim:{c.claim_id}", "refuted", c.run_id, "-"]
                    for c in decision.refuted)
        footer.append(summary(judged))
        if lessons.block_text(lesson.shown, lesson.body, lessons.RESULTS) != "\n" + lesson_text.render_results_table(
                lesson.front.results):
            footer.append(f"{lesson.id}: the body's results table differs from the front matter (edited by hand?)")
    footer += [f"trust: {f}" for f in (tree.trust.state.findings if tree.trust is not None else ())]
    axis = [f"  {line}" for line in release_matrix.lines([tree.releases(lesson) for lesson in chosen])]
    return table(rows) + [""] + (["Python programs per cuda-tile release:", *axis, ""] if axis else []) + footer


def run(args: argparse.Namespace) -> int:
    with paused_gc():  # 100,000 records kept alive make each collector pass long (as for the audit)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    tree = Tree.load(Path(args.root))
    print("\n".join(map(one_line, status(args.root, args.lessons, tree))), file=sys.stdout)
    bench_lines = bench_view.status_lines(tree.records)
    if bench_lines:  # what bounds each bench case and how close it comes (report.bench_view)
        print("\nbench, newest record of each program (fastest tile kernel per shape):\n"
              + "\n".join(map(one_line, bench_lines)))
    for note in tree.notes:  # what the catalog had to say changes no verdict: said aside
        print(note, file=sys.stderr)
    documents = claims_documents(args.root, args.lessons)
    if documents == []:  # lessons named, none with a claims file
        return 0
    claim_lines = claims.status_lines(args.root, documents, tree.records)
    if len(claim_lines) > 1:
        print("\n" + "\n".join(map(one_line, claim_lines)))
    matrix_lines = matrix.status_lines(args.root, documents, tree.records)
    if matrix_lines:
        print("\nclaims per toolchain release:\n" + "\n".join(map(one_line, matrix_lines)))
    return 0
