"""``tileproof publish LESSON [--dry-run]``: flip a lesson to published from evidence.

Asks the one publish decision (``gather.tree.Tree.decide`` → ``gate.decide``:
rows, performance claims and refuted claims) and, only when nothing blocks,
rewrites the lesson's status, hardware block and results (front matter and body
table) and its compile-derived tables (``res_usage``: REG/SHARED from the compile
records) in one atomic replace. Otherwise nothing is written and each blocker is
printed with the command that would clear it. Exit status: 0 published (or would
publish, or already published with evidence), 1 evidence missing, 2 bad input.

Publish also refuses when git history shows a record or transcript once committed
under runs/ or evidence/ is now missing or changed (``runner.history``): a deleted
refutation is no longer among the records the decision reads, so the history is
what still says it was there. A tree without history is published from its
records with a ``history: NOT CHECKED`` line (the audit, not publish, fails closed
on that). An already published lesson whose hardware or results differ from what
the decision derives (``judge.audit.rules.rederive``: a hand edit, or evidence that
moved on) is refused too, unless ``--republish`` asks to rewrite it: then, when the
decision holds, its hardware, results and compile tables are written again from the
records it accepts now, exactly as a first publish writes them.

Publish also refuses while the trust root's checks find something (``judge.trust_root``,
against ``--trust-root`` or the tree's pin): an unsigned registry change or a root reset
the pin was not moved to, a registry missing, emptied or loosened after history listed a
key. Records are judged by the commit that first added them (``judge.standing``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from tileproof.gather.tree import Tree
from tileproof.judge import gate
from tileproof.judge.audit.rules import history as history_rules
from tileproof.judge.audit.rules import rederive
from tileproof.records import lessons
from tileproof.records.errors import RecordError
from tileproof.runner import history


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lesson", help="lesson id (lessons/<id>.md)")
    parser.add_argument("--dry-run", action="store_true", help="show the decision; change nothing")
    parser.add_argument("--republish", action="store_true",
                        help="rewrite an already published lesson from the records the decision accepts now "
                             "(after a re-run; refused unless the decision holds)")
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (default: .)")
    parser.add_argument("--trust-root", default=None, metavar="COMMIT|FILE",
                        help="the trust root (as for tileproof audit; default: $TILEPROOF_TRUST_ROOT, "
                             "else the tree's .ci/trust-root)")


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
    return lines + describe_tables(decision)


def describe_tables(decision: gate.Decision) -> list[str]:
    """The compile-derived tables the lesson's body would get, as they would be written."""
    table = decision.res_usage
    if table is None:
        return []
    head = f"  {table.subject}: {table.reason}" + (f" (skipped: {'; '.join(table.skipped)})"
                                                   if table.filled and table.skipped else "")
    return [head, *(f"      {line}".rstrip() for line in table.rendered().splitlines())]


def publish(root: Path, lesson_id: str, dry_run: bool = False, republish: bool = False,
            trust_root: str | None = None) -> tuple[int, list[str]]:
    """Decide and (unless dry-run) publish; returns (exit status, lines to print)."""
    lesson = lessons.load(root, lesson_id)
    for field, path in lessons.missing_programs(root, lesson):
        raise RecordError(lesson.shown, field, f"{path} does not exist", f"restore {path} or fix the program list")
    tree = Tree.load(root, trust_root)
    decision = tree.decide(lesson)
    name = lesson.id
    distrust = tree.trust.state.findings if tree.trust is not None else ()
    if distrust:
        return 1, [f"{name}: not published: the runner registry's history does not hold from the trust root; "
                   "nothing changed:", *(f"  {file}: {rule}: {reason}" for file, rule, reason in distrust),
                   *describe(decision.blockers)]
    checked = history.check_repository(root)
    if checked.findings:
        return 1, [f"{name}: not published: committed records or transcripts were deleted or edited; nothing changed:",
                   *(f"  {file}: {rule}: {reason}" for file, rule, reason in history_rules.history_issues(checked)),
                   *describe(decision.blockers)]
    note = [] if checked.status == "checked" else [f"history: NOT CHECKED ({checked.reason})"]
    if lesson.front.status == "published":
        edited = rederive.rederive_issues(lesson, decision)
        if (edited or rederive.unstated_releases(lesson.front, decision)) and republish and decision.publishable:
            return _write(lesson, decision, dry_run, note, "republish")
        if edited:
            return 1, [f"{name}: published, but it does not show what its records give; nothing changed:",
                       *(f"  {rule}: {reason}" for rule, reason in edited)]
        if decision.publishable:
            return 0, [f"{name}: already published (run {lesson.front.hardware.run_id}); nothing changed", *note]
        return 1, [f"{name}: published, but its evidence no longer holds (nox -s audit fails); nothing changed:",
                   *describe(decision.blockers)]
    if not decision.publishable:
        return 1, [f"{name}: stays draft; {decision.lacking()}; nothing changed:", *describe(decision.blockers),
                   *(describe_tables(decision) if dry_run else [])]
    return _write(lesson, decision, dry_run, note, "publish")


def _write(lesson: lessons.Lesson, decision: gate.Decision, dry_run: bool, note: list[str],
           verb: str) -> tuple[int, list[str]]:
    """Write (unless ``dry_run``) what the decision derives: status, hardware, results, compile tables."""
    text = lessons.render(lesson, decision.published_front(lesson.front), decision.published_blocks())
    hw = decision.hardware()
    if hw is None:  # a publishable decision has a passed required row behind it
        raise ValueError(f"{lesson.id}: publishable without a passed required row")
    summary = f"{hw.gpu} (cc {hw.compute_capability}), driver {hw.driver}, run {hw.run_id}"
    if dry_run:
        return 0, [f"{lesson.id}: would {verb} from {summary} (dry run: nothing changed)",
                   *describe_all(decision), *note]
    lessons.write(lesson.path, text)
    return 0, [f"{lesson.id}: {verb}ed from {summary}", *describe_all(decision), *note]


def run(args: argparse.Namespace) -> int:
    code, lines = publish(args.root, args.lesson, args.dry_run, args.republish, args.trust_root)
    print("\n".join(lines), file=sys.stdout)
    return code
