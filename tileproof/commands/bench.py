"""``tileproof bench``: time the course kernels against cuBLAS/cupy on this GPU; bench records.

Thin: runs the chosen programs in one bench session (``bench.here``), prints one summary line.
"""

from __future__ import annotations

import argparse

from tileproof.bench import here
from tileproof.bench.core import BENCH_DIR, select
from tileproof.commands import add_root
from tileproof.records.errors import TileproofError
from tileproof.runner.process import add_output_cap, install_signal_handlers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--program", action="append", default=[], metavar="NAME",
                        help="a bench program under kernels/bench/ by path, file name or stem (repeatable)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: fewer sizes, tiles and repeats (not for claims)")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="per-program timeout in seconds (default 600)")
    add_output_cap(parser)
    add_root(parser)


def run(args: argparse.Namespace) -> int:
    install_signal_handlers()
    root = args.root.resolve()
    chosen = select(root, args.program)
    if not chosen:
        raise TileproofError(f"no bench programs under {BENCH_DIR.as_posix()}/ (fix: restore kernels/bench/)")
    records = here.bench(root, chosen, device=args.device, quick=args.quick, timeout=args.timeout,
                         cap=args.output_cap)
    verdicts = [r.verdict for r in records]
    passed = verdicts.count("passed")
    print(f"bench: {passed}/{len(verdicts)} programs passed")
    return 0 if passed == len(verdicts) else 1
