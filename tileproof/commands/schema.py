"""``tileproof schema``: regenerate every derived file from its single source.

``schema/*.schema.json`` come from the pydantic models; ``cpp/tolerances.h``
from the tolerance table in ``kernels/tolerances.py``; the front-matter reference
in ``AUTHORING.md`` from ``LessonFront`` (all in ``authoring.generated``). A
test fails with "run nox -s schema" when the committed files differ from what this renders.
"""

from __future__ import annotations

import argparse

from tileproof.authoring.generated import make_current, rendered, stale
from tileproof.commands import add_root


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_root(parser)
    parser.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    total = len(rendered(root))
    if args.check:
        bad = stale(root)
        for p in bad:
            print(f"{p}: differs from its source (fix: nox -s schema)")
        print(f"schema: {len(bad)} stale, {total - len(bad)} up to date")
        return 1 if bad else 0
    written = make_current(root)
    for rel in written:
        print(f"wrote {rel}")
    print(f"schema: {len(written)} written, {total - len(written)} up to date")
    return 0
