"""``tileproof publish LESSON [--dry-run]``: flip a lesson to published from evidence.

Asks the one publish decision (``gather.tree.Tree.decide`` → ``gate.decide``:
rows, performance claims and refuted claims) and, only when nothing blocks,
rewrites the lesson's status, hardware block and results (front matter and body
table) in one atomic replace. Otherwise nothing is written and each blocker is
printed with the command that would clear it. Exit status: 0 published (or would
publish, or already published with evidence), 1 evidence missing, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from tileproof.gather.tree import Tree
from tileproof.judge import gate
from tileproof.records import lessons
from tileproof.records.errors import RecordError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lesson", help="lesson id (lessons/<id>.md)")
    parser.add_argument("--dry-run", action="store_true", help="show the decision; change nothing")
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (default: .)")


def describe(blockers: Iterable[gate.Blocker]) -> list[str]:
    lines = []
    for b in blockers:
        lines.append(f"  {b}")
        if b.command:
            lines.append(f"      fix: {b.command}")
    return lines


def describe_all(decision: gate.Decision) -> list[str]:
    """Every row and performance claim, passed or not (what a publish rests on)."""
    lines = []
    for r in decision.rows:
        optional = " (optional)" if r.row.optional else ""
        lines.append(f"  {r.row.program} {r.row.check}{optional}: {r.outcome}: {r.reason}")
        lines += [f"      fix: {r.command}"] if r.command else []
    for c in decision.perf:
        lines.append(f"  perf claim {c.claim.id} ({c.claim.statement}): {c.outcome}: {c.reason}")
        lines += [f"      fix: {c.command}"] if c.command else []
    return lines


def publish(root: Path, lesson_id: str, dry_run: bool = False) -> tuple[int, list[str]]:
    """Decide and (unless dry-run) publish; returns (exit status, lines to print)."""
    lesson = lessons.load(root, lesson_id)
    for field, path in lessons.missing_programs(root, lesson):
        raise RecordError(lesson.shown, field, f"{path} does not exist", f"restore {path} or fix the program list")
    decision = Tree.load(root).decide(lesson)
    name = lesson.id
    if lesson.front.status == "published":
        if decision.publishable:
            return 0, [f"{name}: already published (run {lesson.front.hardware.run_id}); nothing changed"]
        return 1, [f"{name}: published, but its evidence no longer holds (nox -s audit fails); nothing changed:",
                   *describe(decision.blockers)]
    if not decision.publishable:
        return 1, [f"{name}: stays draft; {decision.lacking()}; nothing changed:", *describe(decision.blockers)]
    text = lessons.render(lesson, decision.published_front(lesson.front))
    hw = decision.hardware()
    if hw is None:  # a publishable decision has a passed required row behind it
        raise ValueError(f"{name}: publishable without a passed required row")
    summary = f"{hw.gpu} (cc {hw.compute_capability}), driver {hw.driver}, run {hw.run_id}"
    if dry_run:
        return 0, [f"{name}: would publish from {summary} (dry run: nothing changed)", *describe_all(decision)]
    lessons.write(lesson.path, text)
    return 0, [f"{name}: published from {summary}", *describe_all(decision)]


def run(args: argparse.Namespace) -> int:
    code, lines = publish(args.root, args.lesson, args.dry_run)
    print("\n".join(lines), file=sys.stdout)
    return code
