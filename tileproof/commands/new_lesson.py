"""``tileproof new-lesson ID [--python NAME] [--cpp NAME]``: scaffold a draft lesson (``authoring.scaffold``)."""

from __future__ import annotations

import argparse

from tileproof.authoring.generated import COMMAND, make_current
from tileproof.authoring.scaffold import scaffold
from tileproof.commands import add_lesson, add_root


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lesson(parser, many=False, help="the new lesson's id: lessons/LESSON.md")
    parser.add_argument("--python", metavar="NAME", help="write kernels/NAME.py (default without --cpp: the id)")
    parser.add_argument("--cpp", metavar="NAME", help="write cpp/NAME.cu")
    parser.add_argument("--title", help="the lesson's title (default: from the id)")
    add_root(parser)


NEXT = ("nox -s tests", "nox -s compile -- --arch sm_90")
"""What an author runs after new-lesson, before a GPU: the course's checks (check, lint-kernels, its tests), then
the build (sessions every course has: ``tileproof.sessions``)."""


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    for rel in scaffold(root, args.lesson, args.python, args.cpp, args.title):
        print(f"wrote {rel}")
    for path in make_current(root):
        print(f"wrote {path} ({COMMAND})")
    print(f"next: {'; '.join(NEXT)}; then on a GPU: nox -s run-gpu -- {args.lesson}")
    return 0
