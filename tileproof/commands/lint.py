"""``lint-kernels``: static checks for known cuTile mistakes, before anything compiles.

    python -m tileproof lint-kernels [--root DIR] [PATH ...]      (default: kernels)
    python -m tileproof lint-kernels --list-rules

One line per finding on stdout, ``path:line:col: RULE message (fix: ...)``, sorted, then
one summary line on stderr (``lint-kernels: N files, M findings``), also when clean. Exit
status 1 when there is any finding, 0 when clean, 2 for a path that does not exist.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tileproof.commands import add_root
from tileproof.lint.engine import RULES, lint_paths, python_files

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``lint-kernels`` command line."""
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("kernels")],
                        help="files or folders to check, under --root (default: kernels)")
    add_root(parser)
    parser.add_argument("--list-rules", action="store_true",
                        help="print every rule id, slug and description, and exit")


def run(args: argparse.Namespace) -> int:
    """Print the findings and a summary; 1 when there are any, 0 when clean, 2 for a missing path."""
    if args.list_rules:
        return _write([f"{rule}  {slug:<26} {description}" for rule, (slug, description) in RULES.items()]
                      + [f"lint-kernels: {len(RULES)} rules"])
    try:
        files = python_files([p if p.is_absolute() or args.root.resolve() == Path.cwd().resolve() else args.root / p
                              for p in args.paths])
    except FileNotFoundError as e:
        print(f"lint-kernels: {e} (fix: pass existing files or folders)", file=sys.stderr)
        return 2
    findings = lint_paths(files)
    with_findings = len({f.file for f in findings})
    _write([str(f) for f in findings])
    print(f"lint-kernels: {len(files)} files, {len(findings)} findings"
          + (f" in {with_findings} files" if findings else ""), file=sys.stderr)
    return 1 if findings else 0


def _write(lines: list[str]) -> int:
    """Print lines to stdout; a reader that closes the pipe early (``| head``) is not an error.

    On a closed pipe stdout is pointed at devnull, so the interpreter's final flush does not
    fail again (no traceback, no "Exception ignored" line); the reader chose to stop.
    """
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = open(os.devnull, "w")  # noqa: SIM115  (kept open until exit, as the docs advise)
        os.dup2(devnull.fileno(), sys.stdout.fileno())
    return 0
