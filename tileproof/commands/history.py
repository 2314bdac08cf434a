"""``tileproof history PROGRAM[:CASE] [--gpu CLASS]``: a bench case's rate or a check's error across records.

For a bench program, every case key's series (or CASE's: a case key, or ``name/variant/shape/*`` for the fastest
tile kernel of that computation, variant and shape in each record), the fastest-of-shape series first; for a run
program, every check's largest absolute error (or CASE's: a check name). Each with the steps found in it
(``judge.history``: binary segmentation, the noise rule as its threshold). Reads the tree through
``gather.tree.Tree`` (every record, examined once); exit 0, or 2 (one line) when the program has no counted record
or CASE names nothing of it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tileproof.commands import add_root
from tileproof.gather.tree import Tree
from tileproof.judge import history
from tileproof.records.errors import TileproofError
from tileproof.report import history_render


class NoSeries(TileproofError):
    """Nothing to follow: no counted record of the program, or no case or check of that name."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", metavar="PROGRAM[:CASE]",
                        help="a program (kernels/bench/NAME_bench.py), optionally :CASE (a case key, "
                             "name/variant/shape/* or a check name)")
    parser.add_argument("--gpu", metavar="CLASS", help="only records of this GPU (\"NVIDIA H200\", or \"NVIDIA H200, "
                                                       "cc 9.0\")")
    add_root(parser)


def series(tree: Tree, what: str, gpu: str | None) -> list[history.Series]:
    program, _sep, case = what.partition(":")
    found = [*history.bench_series(tree.records, program, gpu, case or None),
             *history.check_series(tree.records, program, gpu, case or None)]
    if not found:
        where = f" on {gpu}" if gpu else ""
        named = f" with a case or check {case!r}" if case else ""
        raise NoSeries(f"{what}: no counted record of {program}{named}{where} (fix: name a program under kernels/ or "
                       f"cpp/ that runs/ holds records of; tileproof status lists them)")
    return found


def run(args: argparse.Namespace) -> int:
    tree = Tree.load(Path(args.root), every=True)
    print("\n".join(history_render.text(series(tree, args.what, args.gpu))), file=sys.stdout)
    return 0
