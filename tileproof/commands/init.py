"""``tileproof init [DIR]``: make a git repository a working course (``authoring.init``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tileproof.authoring.init import init
from tileproof.commands import add_root
from tileproof.records.errors import TileproofError
from tileproof.records.trust import signing


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", nargs="?", type=Path, default=None,
                        help="the repository to make a course of, as --root (a folder outside git gets git init)")
    add_root(parser, help="the repository to make a course of (default: the current folder)")
    parser.set_defaults(root=None)  # to tell DIR and --root apart
    parser.add_argument("--key", type=Path, default=None,
                        help=f"the first signing key (default: ${signing.KEY_ENV}, else {signing.DEFAULT_KEY}); "
                             "made there when missing, never inside the repository")
    parser.add_argument("--owner", default=None, help="who holds the key, as the registry names it")


def run(args: argparse.Namespace) -> int:
    if args.dir is not None and args.root is not None:
        raise TileproofError("give the repository once, as DIR or as --root DIR")
    written = init(args.dir or args.root or Path.cwd(), args.key, args.owner)
    if written:
        print(f"init: wrote {len(written)} files; commit them: git add -A && git commit -m 'a tileproof course'")
    else:
        print("init: wrote nothing: the course has every file init writes")
    print("next: nox -s new-lesson -- my-lesson --python my_kernel; nox -s compile; nox -s tests")
    return 0
