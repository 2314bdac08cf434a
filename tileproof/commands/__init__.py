"""Thin commands: gather inputs, call the layers below, print, set the exit code. Nothing imports a command.

The arguments several commands share are spelled once, here: ``--root DIR`` (every command works on one course's
repository) and the lesson ids (``LESSON``, ``lessons/LESSON.md``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT_HELP = "the course's repository (default: the current folder)"


def add_root(parser: argparse.ArgumentParser, help: str = ROOT_HELP) -> None:
    """``--root DIR``: the course's repository, the same option in every command."""
    parser.add_argument("--root", type=Path, default=Path.cwd(), metavar="DIR", help=help)


def add_lesson(parser: argparse.ArgumentParser, many: bool, help: str) -> None:
    """The lesson ids a command takes: one (``lesson``) or any number (``lessons``), each ``LESSON``."""
    if many:
        parser.add_argument("lessons", nargs="*", metavar="LESSON", help=help)
    else:
        parser.add_argument("lesson", metavar="LESSON", help=help)
