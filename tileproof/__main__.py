"""The command line: ``tileproof COMMAND ...`` (or ``python -m tileproof COMMAND ...``).

Each command lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``; this file only
parses, dispatches (importing only the chosen command's module) and turns a ``TileproofError`` into one line on
stderr and exit status 2. The output and exit-status conventions: docs/commands.md, "Exit status and output".
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tileproof import __version__
from tileproof.records.errors import TileproofError

COMMANDS = {
    "compile": ("tileproof.commands.compile", "build every program for every target (no GPU needed)"),
    "run": ("tileproof.commands.run", "run lesson programs on this machine's GPU and write run records"),
    "publish": ("tileproof.commands.publish", "flip a lesson to published when its evidence allows"),
    "status": ("tileproof.commands.status", "lesson x program x newest evidence"),
    "audit": ("tileproof.commands.audit", "check every record, transcript and published lesson"),
    "bench": ("tileproof.commands.bench", "time the course kernels against cuBLAS/cupy on this GPU; bench record"),
    "claims": ("tileproof.commands.claims", "check every claim of the shipped documents; claims record"),
    "schema": ("tileproof.commands.schema",
               "regenerate schema/, cpp/tolerances.h and the guide's front-matter reference"),
    "check": ("tileproof.commands.check", "every lesson canonical, programs present, checks in the tolerance table, "
                                          "claims files valid, generated files current"),
    "init": ("tileproof.commands.init", "make a git repository a working course: files, sessions, the first key"),
    "new-lesson": ("tileproof.commands.new_lesson", "scaffold a draft lesson, its programs and tolerance entries"),
    "lint-kernels": ("tileproof.commands.lint", "static checks for known cuTile mistakes"),
    "keygen": ("tileproof.commands.keygen",
               "make a runner's signing key outside the repository; print its registry entry"),
    "verify": ("tileproof.commands.verify", "every record's signature against lessons/runners.yaml, and git history"),
    "sign-registry": ("tileproof.commands.sign_registry",
                      "endorse a change of lessons/runners.yaml with a key the committed registry trusts"),
    "badge": ("tileproof.commands.badge", "the evidence coverage as a shields.io endpoint JSON (rows, GPUs, releases)"),
    "fleet": ("tileproof.commands.fleet", "lessons x GPU kinds on a Slurm cluster or CI runners; merge; matrix"),
    "diff": ("tileproof.commands.diff", "what changed in the evidence between two commits (or one and the working "
                                        "tree)"),
    "history": ("tileproof.commands.history", "a bench case's rate or a check's error across records, and its steps"),
    "reproduce": ("tileproof.commands.reproduce", "run a record's program here and compare with the record"),
}

SIGPIPE_STATUS = 141
"""Exit status when stdout is closed early (128 + SIGPIPE, as a shell reports it)."""


def chosen_command(argv: list[str]) -> str | None:
    """The command named in ``argv`` (its first non-option word), if any."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The CLI parser; only the chosen command's module is imported to add its options."""
    parser = argparse.ArgumentParser(
        prog="tileproof", description="Evidence-tracking build and run orchestrator for cuTile lessons.")
    parser.add_argument("--version", action="version", version=f"tileproof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    name = chosen_command(argv)
    for command, (module, help_text) in COMMANDS.items():
        cmd_parser = sub.add_parser(command, help=help_text, description=help_text)
        if command == name:
            importlib.import_module(module).add_arguments(cmd_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            args = build_parser(argv).parse_args(argv)
        except BrokenPipeError:
            # ``--help`` or ``--version`` to a reader already gone: 0, as argparse answers where its writes ignore
            # the error (Python 3.11.7 and 3.12 on); older ones (3.10, Debian 12's 3.11.2) raise it here instead.
            _quiet_stdout()
            return 0
        module = importlib.import_module(COMMANDS[args.command][0])
        try:
            return int(module.run(args) or 0)
        except TileproofError as e:
            print(f"tileproof {args.command}: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"tileproof {args.command}: interrupted; records written so far are kept", file=sys.stderr)
            return 130
        finally:
            sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (``| head``)
        _quiet_stdout()
        return SIGPIPE_STATUS


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's final flush of what the gone reader never took stays silent."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
