"""``tileproof publish LESSON [--dry-run] [--republish]``: flip a lesson to published from evidence.

Prints the lesson's one verdict (``gather.tree.Tree.verdict`` → ``judge.verdict``, the same that ``status`` and
the audit print) and, only when nothing blocks, rewrites the lesson's publish-owned parts (status, hardware,
results, compile-derived tables) in one atomic replace; otherwise it writes nothing and prints each blocker with
the command that would clear it. The lesson's state is said in the words ``status`` prints too, and the exit status
is that state's (``judge.lesson_state``): 0 published (or would be, or valid as published), 1 evidence missing or
a history or trust finding, 2 bad input or a refused input file. The rules: docs/records-and-staleness.md,
"When a published lesson stays valid" and "One verdict, three commands".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from tileproof import lesson_text
from tileproof.commands import add_lesson, add_root
from tileproof.gather.tree import Tree
from tileproof.judge import gate
from tileproof.judge.lesson_state import LessonState
from tileproof.records import lessons
from tileproof.records.errors import RecordError, one_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lesson(parser, many=False, help="the lesson to publish: lessons/LESSON.md")
    parser.add_argument("--dry-run", action="store_true", help="show the decision; change nothing")
    parser.add_argument("--republish", action="store_true",
                        help="rewrite an already published lesson from the records the decision accepts now "
                             "(after a re-run; refused unless the decision holds)")
    add_root(parser)
    parser.add_argument("--trust-root", default=None, metavar="COMMIT|file:PATH",
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
    tree = Tree.load(root, trust_root)
    for aside in tree.notes:  # what the catalog had to say changes no verdict: said aside
        print(aside, file=sys.stderr)
    refused = tree.refused()  # before the decision, which may read one of them
    if refused:
        state = LessonState.INPUT_REFUSED
        return state.exit_code, [f"{lesson.id}: {state.message}; nothing changed:",
                                 *(f"  {file}: {rule}: {reason}" for file, (rule, reason) in sorted(refused.items()))]
    for field, path in lessons.missing_programs(root, lesson):
        raise RecordError(lesson.shown, field, f"{path} does not exist", f"restore {path} or fix the program list")
    judged = tree.verdict(lesson)
    name, decision, fresh, state = lesson.id, judged.decision, judged.fresh, judged.state
    said = f"{name}: {state.message}"
    if state is LessonState.TRUST_BROKEN:
        return state.exit_code, [f"{said}; nothing changed:", *(f"  {f}" for f in judged.distrust),
                                 *describe(fresh.blockers)]
    if state is LessonState.HISTORY_BROKEN:
        return state.exit_code, [f"{said}; nothing changed:", *(f"  {f}" for f in judged.history_problems),
                                 *describe(decision.blockers)]
    note = [] if judged.history.status == "checked" else [f"history: NOT CHECKED ({judged.history.reason})"]
    if state is LessonState.DRAFT:
        return state.exit_code, [f"{said}; {fresh.lacking()}; nothing changed:", *describe(fresh.blockers),
                                  *(describe_tables(fresh) if dry_run else [])]
    if state is LessonState.READY:
        return _write(lesson, fresh, dry_run, note, "publish")
    if republish and fresh.publishable and (judged.refreshable or judged.states_releases or not judged.valid):
        return _write(lesson, fresh, dry_run, note, "republish")
    if state is LessonState.VALID:
        newer = judged.note()
        return state.exit_code, [f"{said} (run {lesson.front.hardware.run_id}); nothing changed",
                                 *([f"  {newer}"] if newer else []), *note]
    if republish:
        return state.exit_code, [f"{name}: published, and not republished: the newest evidence does not hold; "
                                 "nothing changed:", *describe(fresh.blockers)]
    if state is LessonState.DIFFERS:
        return state.exit_code, [f"{said}; nothing changed:",
                                 *(f"  {rule}: {reason}" for rule, reason in judged.findings())]
    refresh = [f"  the newest evidence holds: nox -s publish -- {name} --republish"] if judged.republishable else []
    return state.exit_code, [f"{said}; nothing changed:", *describe(decision.blockers), *refresh]


def _write(lesson: lessons.Lesson, decision: gate.Decision, dry_run: bool, note: list[str],
           verb: str) -> tuple[int, list[str]]:
    """Write (unless ``dry_run``) what the decision derives: status, hardware, results, compile tables."""
    text = lesson_text.render(lesson, decision.published_front(lesson.front), decision.published_blocks())
    hw = decision.hardware()
    if hw is not None:
        summary = f"{hw.gpu} (cc {hw.compute_capability}), driver {hw.driver}, run {hw.run_id}"
    elif decision.perf and not decision.rows:  # a note of performance claims alone: its bench records
        benches = sorted({c.record.run_id for c in decision.perf if c.record is not None})
        summary = f"the bench record{'s' * (len(benches) != 1)} {', '.join(benches)} behind its performance claims"
    else:  # a publishable decision has a passed required row behind it
        raise ValueError(f"{lesson.id}: publishable without a passed required row")
    if dry_run:
        return 0, [f"{lesson.id}: would {verb} from {summary} (dry run: nothing changed)",
                   *describe_all(decision), *note]
    lessons.write(lesson.path, text)
    return 0, [f"{lesson.id}: {verb}ed from {summary}", *describe_all(decision), *note]


def run(args: argparse.Namespace) -> int:
    code, lines = publish(args.root, args.lesson, args.dry_run, args.republish, args.trust_root)
    print("\n".join(map(one_line, lines)), file=sys.stdout)
    return code
