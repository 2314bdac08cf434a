"""``tileproof diff BASE [HEAD] [--format text|markdown|json]``: what changed in the evidence between two trees.

BASE and HEAD name commits (a full id, an abbreviation of one commit, a branch, a tag, ``HEAD``:
``gather.snapshot.resolve``); HEAD left out is the working tree. Each side is read through ``gather.snapshot``
(a commit from a temporary checkout of it), compared by ``judge.diff.compare`` and printed by
``report.diff_render``. Exit 0 when nothing regressed beyond noise and no lesson turned false, 1 otherwise, 2 on
bad input (docs/reviewing-changes.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tileproof.commands import add_root
from tileproof.gather import snapshot
from tileproof.judge import diff
from tileproof.report import diff_render

FORMATS = ("text", "markdown", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE", help="the commit to compare from")
    parser.add_argument("head", nargs="?", metavar="HEAD", help="the commit to compare to (default: the working tree)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="text (default), markdown (a pull-request "
                        "comment) or json")
    parser.add_argument("--every", action="store_true", help="list every bench case, those within noise too")
    add_root(parser)


def render(result: diff.Diff, fmt: str, every: bool = False) -> str:
    if fmt == "json":
        # through pydantic's JSON (a non-finite band is null there, never a bare Infinity), then the verdict
        payload = json.loads(result.model_dump_json()) | {"exit_code": result.exit_code,
                                                           "summary": diff_render.summary(result)}
        return json.dumps(payload, indent=2, sort_keys=True)
    lines = diff_render.markdown(result, every) if fmt == "markdown" else diff_render.text(result, every)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    root = Path(args.root)
    base = snapshot.resolve(root, args.base)
    head = snapshot.resolve(root, args.head) if args.head is not None else None
    before = snapshot.at_commit(root, base)
    after = snapshot.at_commit(root, head) if head is not None else snapshot.read(root)
    result = diff.compare(before, after)
    print(render(result, args.format, args.every), file=sys.stdout)
    return result.exit_code
