"""``tileproof check``: the lesson check (``authoring.check``), one line per problem: ``file: rule: what (fix: …)``."""

from __future__ import annotations

import argparse
import sys

from tileproof.authoring.check import problems
from tileproof.commands import add_root
from tileproof.records import lessons


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_root(parser)


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    notes: list[str] = []
    found = problems(root, notes)
    for p in found:
        print(p)
    for note in notes:  # what the verified-file index had to say changes no finding: said aside
        print(note, file=sys.stderr)
    n = len(lessons.lesson_ids(root))
    print(f"check: {n} lesson(s), {len(found)} problem(s)")
    return 1 if found else 0
