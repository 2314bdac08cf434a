"""``tileproof reproduce RUN_ID``: run that record's program here and compare (``judge.reproduce``).

The record (a run or bench record under runs/, one that counts) names its program: a run record's program runs
in a run session (``runner.session``, as ``tileproof run --program``), a bench record's in a bench session
(``bench.here``, as ``tileproof bench --program``); the new record is written under runs/ like any other, and
compared with the cited one by ``diff``'s rules. Exit 0 when it reproduces, 1 when it does not (or there is no
usable GPU here: nothing run), 2 on bad input (no such record, a record that does not count, another kind).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tileproof.bench import here
from tileproof.commands import add_root
from tileproof.gather.tree import Tree
from tileproof.judge import reproduce, trust
from tileproof.records import store
from tileproof.records.errors import TileproofError
from tileproof.records.models import BenchRecord, RunRecord
from tileproof.runner import session
from tileproof.runner.process import add_output_cap, install_signal_handlers


class NotReproducible(TileproofError):
    """A run id ``reproduce`` cannot take: no such record, one that does not count, or one of another kind."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="a run or bench record under runs/")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="S", help="the program's timeout in seconds")
    add_output_cap(parser)
    add_root(parser)


def cited(tree: Tree, run_id: str) -> RunRecord | BenchRecord:
    """The record ``run_id`` names, when it is a run or bench record that counts; one line otherwise."""
    found = [e for e in tree.records if e.record.run_id == run_id]
    path = store.record_path(tree.root, run_id)
    if not found and path.name == f"{run_id}.json" and path.is_file():  # a kind that is no evidence (a session)
        kind = store.load_record(path, tree.root).kind
        raise NotReproducible(f"{run_id}: a {kind} record; reproduce runs a run or bench record's program (fix: pick "
                              f"one of those)")
    if not found:
        raise NotReproducible(f"{run_id}: no record of that id under runs/ (fix: a run id from tileproof status, or "
                              f"ls runs/)")
    item = found[0]
    if not isinstance(item.record, (RunRecord, BenchRecord)):
        raise NotReproducible(f"{run_id}: a {item.record.kind} record; reproduce runs a run or bench record's "
                              f"program (fix: pick one of those)")
    why = trust.refusal(item)
    if why is not None:
        raise NotReproducible(f"{run_id}: it does not count ({why}), so there is nothing to reproduce (fix: pick a "
                              f"record that counts)")
    return item.record


def run_here(root: Path, rec: RunRecord | BenchRecord, args: argparse.Namespace) -> RunRecord | BenchRecord | str:
    """The program of ``rec`` run here: its new record, or why nothing ran (no usable GPU)."""
    if isinstance(rec, BenchRecord):
        return here.bench(root, [root / rec.program], device=args.device, timeout=args.timeout,
                          cap=args.output_cap)[0]
    ended = session.run(session.Request(root=root, lessons=(), programs=(rec.program,), device=args.device,
                                        timeout=args.timeout, cap=args.output_cap, record_no_gpu=False))
    if isinstance(ended, session.NoGpu):
        return ended.reason
    (one,) = ended.runs
    made = store.load_record(store.record_path(root, one.run_id), root)
    assert isinstance(made, RunRecord)
    return made


def run(args: argparse.Namespace) -> int:
    install_signal_handlers()
    root = args.root.resolve()
    rec = cited(Tree.load(root, every=True), args.run_id)
    fresh = run_here(root, rec, args)
    if isinstance(fresh, str):
        print(f"reproduce: no usable GPU: {fresh}; nothing run or recorded", file=sys.stdout)
        return 1
    result = reproduce.compare(rec, fresh)
    print("\n".join(reproduce.lines(result)), file=sys.stdout)
    return 0 if result.reproduced else 1
