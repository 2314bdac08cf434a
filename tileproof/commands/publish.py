"""``tileproof publish LESSON [--dry-run] [--republish]``: flip a lesson to published from evidence.

Prints the lesson's one verdict (``gather.tree.Tree.verdict`` → ``judge.verdict``: the
publish decision, the history check and the re-derivation, the same that ``status``
and the audit print) and, only when nothing blocks, rewrites the lesson's status,
hardware block and results (front matter and body table) and its compile-derived
tables (``res_usage``: REG/SHARED from the compile records) in one atomic replace.
Otherwise nothing is written and each blocker is printed with the command that would
clear it. Exit status: 0 published (or would publish, or already published and
valid), 1 evidence missing, 2 bad input.

Publish refuses (exit 2) a tree with an input file the audit refuses by what it is
(``gather.inputs``: a transcript that is a link, one out of the repository, a FIFO, a file over
its cap), even one its decision does not read; ``status`` says such a tree is not ready, from the
same verdict. Publish refuses while git history shows a record or transcript once committed under
runs/ or evidence/ is now missing, changed or replaced by a link or special file: a deleted
refutation is no longer among the records the decision reads, so the history is what still says
it was there. A tree without history is published from its records with a ``history: NOT
CHECKED`` line (the audit, not publish, fails closed on that). An already published lesson is
valid while the records it cites still hold and it shows what they give; newer passing evidence
leaves it valid (a note says ``--republish`` would refresh it), a hand edit or a cited record that
no longer holds is refused (a plausibility signal on a cited record that nothing settles included).
``--republish`` writes it again from the newest evidence, exactly as a first publish writes it, and
only while that evidence holds (a newer failing run blocks it).

Publish also refuses while the trust root's checks find something (``judge.trust_root``,
against ``--trust-root`` or the tree's pin): an unsigned registry change or a root reset
the pin was not moved to, a registry missing, emptied or loosened after history listed a
key. Records are judged by the commit that first added them (``judge.standing``). Every
printed line goes through ``records.errors.one_line``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from tileproof import lesson_text
from tileproof.gather.tree import Tree
from tileproof.judge import gate
from tileproof.records import lessons
from tileproof.records.errors import RecordError, one_line


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
    tree = Tree.load(root, trust_root)
    refused = tree.refused()  # before the decision, which may read one of them
    if refused:
        return 2, [f"{lesson.id}: not published: inputs the audit refuses; nothing changed:",
                   *(f"  {file}: {rule}: {reason}" for file, (rule, reason) in sorted(refused.items()))]
    for field, path in lessons.missing_programs(root, lesson):
        raise RecordError(lesson.shown, field, f"{path} does not exist", f"restore {path} or fix the program list")
    judged = tree.verdict(lesson)
    name, decision, fresh = lesson.id, judged.decision, judged.fresh
    if judged.distrust:
        return 1, [f"{name}: not published: the runner registry's history does not hold from the trust root; "
                   "nothing changed:", *(f"  {f}" for f in judged.distrust),
                   *describe(fresh.blockers)]
    if judged.history_problems:
        return 1, [f"{name}: not published: committed records or transcripts were deleted or edited; nothing changed:",
                   *(f"  {f}" for f in judged.history_problems),
                   *describe(decision.blockers)]
    note = [] if judged.history.status == "checked" else [f"history: NOT CHECKED ({judged.history.reason})"]
    if not judged.published:
        if not fresh.publishable:
            return 1, [f"{name}: stays draft; {fresh.lacking()}; nothing changed:", *describe(fresh.blockers),
                       *(describe_tables(fresh) if dry_run else [])]
        return _write(lesson, fresh, dry_run, note, "publish")
    if republish and fresh.publishable and (judged.refreshable or judged.states_releases or not judged.valid):
        return _write(lesson, fresh, dry_run, note, "republish")
    if judged.valid:
        newer = judged.note()
        return 0, [f"{name}: already published (run {lesson.front.hardware.run_id}); nothing changed",
                   *([f"  {newer}"] if newer else []), *note]
    if republish:
        return 1, [f"{name}: published, and not republished: the newest evidence does not hold; nothing changed:",
                   *describe(fresh.blockers)]
    if decision.publishable:
        return 1, [f"{name}: published, but it does not show what its records give; nothing changed:",
                   *(f"  {rule}: {reason}" for rule, reason in judged.findings())]
    refresh = [f"  the newest evidence holds: nox -s publish -- {name} --republish"] if judged.republishable else []
    return 1, [f"{name}: published, but its evidence no longer holds (nox -s audit fails); nothing changed:",
               *describe(decision.blockers), *refresh]


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
