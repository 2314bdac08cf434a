"""``tileproof badge [LESSON ...] [--out PATH]``: the course's evidence coverage as a shields.io endpoint badge.

The message is read from the same verdicts ``status``, ``publish`` and the audit print (``gather.tree.Tree.verdict``):
the required results rows whose evidence counts, out of all required rows, then the GPU classes and the cuda-tile
releases of the records that decide those rows, e.g. ``5/5 rows · H200 cc 9.0 · cuda-tile 1.7.0``. Coverage only,
never a speed. The JSON is shields.io's endpoint schema (https://shields.io/badges/endpoint-badge): publish the file
where shields.io can fetch it and point ``https://img.shields.io/endpoint?url=...`` at it. Exit 0; a malformed input
is one line, exit 2, as everywhere.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict

from tileproof.commands import add_lesson, add_root
from tileproof.gather.audit_scan import paused_gc
from tileproof.gather.tree import Tree
from tileproof.records import lessons
from tileproof.records.errors import TileproofError

Color = Literal["brightgreen", "yellow", "red", "lightgrey"]


class Endpoint(BaseModel):
    """shields.io's endpoint badge: what ``https://img.shields.io/endpoint?url=...`` reads."""

    model_config = ConfigDict(extra="forbid")

    schemaVersion: Literal[1] = 1  # noqa: N815 (shields.io's key)
    label: str
    message: str
    color: Color


LABEL = "evidence"
REFUTING = ("failed", "forged-cc", "incoherent-toolchain", "out-of-bounds")
"""Row outcomes that make the badge red: the evidence says the row is wrong (missing or stale evidence is yellow)."""


def _gpu_class(name: str, cc: str) -> str:
    return f"{name.removeprefix('NVIDIA ').strip()} cc {cc}"


def coverage(tree: Tree, chosen: list[lessons.Lesson]) -> Endpoint:
    """The badge for ``chosen``, from each lesson's one verdict. A row counts when its verdict is ``passed`` and
    nothing about the tree (a refused input, the trust root, git history) keeps every lesson from being ready;
    green when every required row counts, red when a row's evidence refutes it (``REFUTING``), a published lesson
    differs from its records or the tree has a problem, yellow otherwise."""
    total = counted = 0
    gpus: dict[str, None] = {}
    releases: dict[str, None] = {}
    bad = False
    for lesson in chosen:
        judged = tree.verdict(lesson)
        bad = bad or bool(judged.tree_problems) or (judged.published and not judged.valid)
        for r in judged.decision.rows:
            if r.row.optional:
                continue
            total += 1
            bad = bad or r.outcome in REFUTING
            if r.outcome != "passed" or judged.tree_problems or r.record is None:
                continue
            counted += 1
            gpu = r.record.environment.gpu
            if gpu is not None:
                gpus[_gpu_class(gpu.name, gpu.compute_capability)] = None
            if r.record.cuda_tile is not None:
                releases[r.record.cuda_tile.version] = None
    if not total:
        return Endpoint(label=LABEL, message="no rows", color="lightgrey")
    parts = [f"{counted}/{total} rows", *sorted(gpus)]
    if releases:
        parts.append("cuda-tile " + ", ".join(sorted(releases, key=_release_key)))
    color: Color = "red" if bad else "brightgreen" if counted == total else "yellow"
    return Endpoint(label=LABEL, message=" · ".join(parts), color=color)


def _release_key(version: str) -> tuple:
    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lesson(parser, many=True, help="the lessons the badge covers: lessons/LESSON.md (default: all)")
    parser.add_argument("--out", type=Path, default=None, metavar="PATH",
                        help="write the endpoint JSON here (default: print it)")
    add_root(parser)
    parser.add_argument("--trust-root", default=None, metavar="COMMIT|file:PATH",
                        help="the trust root the records are judged by, as for audit")


def run(args: argparse.Namespace) -> int:
    with paused_gc():
        tree = Tree.load(Path(args.root), trust_root=args.trust_root)
        chosen = [lessons.load(args.root, i) for i in args.lessons] if args.lessons else lessons.load_all(args.root)
        endpoint = coverage(tree, chosen)
    text = endpoint.model_dump_json(indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise TileproofError(f"{args.out}: cannot write the badge ({e.strerror}) (fix: choose a writable --out)") \
            from None
    print(f"badge: {endpoint.message} ({endpoint.color}); wrote {args.out}", file=sys.stderr)
    return 0
