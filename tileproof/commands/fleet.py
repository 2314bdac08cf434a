"""``tileproof fleet``: a course's evidence over many GPU hosts, through Slurm or CI runners.

  submit  --cluster FILE [--lesson ID]... [--kind K]... [--wait]  one Slurm array per kind + the merge job
  task    --plan FILE --kind K --index N     (run by an array task) its lesson in its own worktree
  finish  --plan FILE                        (run by the merge job) merge, audit, write the matrix
  show    --plan FILE                        print the matrix the merge job wrote
  collect --out DIR                          copy this checkout's new records (a CI runner's artifact)
  merge   DIR...                             merge artifacts into runs/ and evidence/, audit, print the matrix

Logic lives in ``tileproof.fleet``; Slurm and git are reached through ``tileproof.runner``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tileproof.commands import add_root
from tileproof.fleet import jobs, sbatch, tasks
from tileproof.fleet import matrix as mx
from tileproof.fleet import plan as fplan
from tileproof.fleet.merge import Source, merge
from tileproof.records import lessons, store
from tileproof.records.cluster import load_cluster
from tileproof.records.errors import TileproofError
from tileproof.runner import children, worktree
from tileproof.runner.capture import git_state
from tileproof.runner.process import install_signal_handlers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = sub.add_parser("submit", help="one Slurm job array per GPU kind, one task per lesson, then the merge job")
    s.add_argument("--cluster", type=Path, required=True, help="cluster file (e.g. .ci/slurm-cluster.yaml)")
    s.add_argument("--lesson", action="append", default=[], metavar="LESSON",
                   help="lesson id (repeatable; default all)")
    s.add_argument("--kind", action="append", default=[], metavar="K", help="GPU kind (repeatable; default all)")
    s.add_argument("--out", type=Path, default=None, help="fleet folder (default build/fleet/<fleet id>)")
    s.add_argument("--wait", action="store_true", help="wait for the merge job and print the matrix")
    s.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="how long --wait waits")
    s.add_argument("--poll", type=float, default=2.0, metavar="S",
                   help="how often --wait asks Slurm for the merge job's state (default 2)")
    s.add_argument("--run-arg", action="append", default=[], metavar="ARG", help="passed to each task's run")
    s.add_argument("--dry-run", action="store_true", help="print the job scripts; submit nothing")
    t = sub.add_parser("task", help="(an array task) run one lesson in its own worktree")
    t.add_argument("--plan", type=Path, required=True)
    t.add_argument("--kind", required=True)
    t.add_argument("--index", type=int, required=True)
    for name in ("finish", "show"):
        f = sub.add_parser(name, help="merge + audit + matrix (the merge job)" if name == "finish" else "the matrix")
        f.add_argument("--plan", type=Path, required=True)
    c = sub.add_parser("collect", help="copy the records this checkout added into DIR (a CI artifact)")
    c.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("merge", help="merge record folders (CI artifacts) into runs/ and evidence/, then audit")
    m.add_argument("sources", nargs="+", type=Path, metavar="DIR", help="folders holding runs/ and evidence/")
    for p in (c, m):
        add_root(p)
    add_root(s)


def _with_programs(every: list[lessons.Lesson]) -> list[lessons.Lesson]:
    """The lessons a fleet runs by default (``submit`` without ``--lesson``, and the cells ``merge`` fills): those
    listing programs. A lesson without any (a note whose every number is a bench or claims record's) has no task
    and no cell; each is named in one line. Named with ``--lesson``, it is still refused (``plan.make_plan``)."""
    for ls in every:
        if not ls.front.programs:
            print(f"fleet: lessons/{ls.id}.md lists no programs: no task for it (its evidence is bench or claims "
                  "records)", file=sys.stderr)
    return [ls for ls in every if ls.front.programs]


def _submit(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    if not args.poll > 0:
        raise TileproofError(f"fleet submit: --poll {args.poll}: expected seconds > 0 (fix: e.g. --poll 2)")
    cluster = load_cluster(args.cluster)
    chosen = [lessons.load(root, i) for i in args.lesson] if args.lesson else _with_programs(lessons.load_all(root))
    fleet_id = store.new_run_id("fleet")
    git = worktree.head(root)
    if git_state(root).dirty:
        print("fleet: the working tree has uncommitted changes; tasks run the commit "
              f"{git[:12]}, not them", file=sys.stderr)
    folder = (args.out or root / "build" / "fleet" / fleet_id).resolve()
    plan = fplan.make_plan(cluster=cluster,
                           lesson_programs={ls.id: [p.path for p in ls.front.programs] for ls in chosen},
                           kinds=args.kind, source=fplan.Checkout(root, git, sys.executable), folder=folder,
                           fleet_id=fleet_id, run_args=args.run_arg)
    if args.dry_run:
        for array in plan.arrays:
            print(f"# {array.kind}: {', '.join(t.lesson for t in array.tasks)}\n{sbatch.array_script(plan, array)}")
        return 0
    launched = jobs.submit(plan)
    for a in launched.submitted.arrays:
        print(f"fleet: {a.kind}: " + (f"array job {a.job_id}" if a.job_id else f"REFUSED by sbatch: {a.refused}"))
    if launched.merge_job is None:
        print("fleet: sbatch refused every kind; nothing runs")
        return 1
    print(f"fleet: merge job {launched.merge_job} (afterany); folder {folder}")
    if not args.wait:
        return 0
    state = jobs.wait(launched.merge_job, args.timeout, poll_s=args.poll)
    return _show(folder / fplan.PLAN_FILE, f"merge job {launched.merge_job} ended {state}")


def _show(plan_file: Path, why: str = "") -> int:
    path = plan_file.parent / fplan.MATRIX_FILE
    if not path.is_file():
        raise TileproofError(f"{path}: no matrix ({why or 'the merge job has not run'}; "
                             f"fix: see {plan_file.parent / 'logs'})")
    result = tasks.read_model(path, mx.Matrix)
    print("\n".join(mx.render(result)))
    return 0 if result.passed() else 1


def _merge(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    programs = {ls.id: [p.path for p in ls.front.programs] for ls in _with_programs(lessons.load_all(root))}
    ids = list(programs)
    cells = []
    for src in args.sources:
        records, bad = mx.load_task_records(sorted((src / store.RUNS).glob("*.json")))
        cells += [mx.cell(lid, src.name, programs[lid], records, bad, None) for lid in ids]
    done = merge(root, [Source(base=s) for s in args.sources])
    for line in done.skipped:
        print(f"fleet merge: not merged: {line}")
    audit = children.tileproof(["audit", "--root", str(root)], cwd=root, deadline_s=children.AUDIT_DEADLINE_S)
    result = mx.Matrix(matrix_version=mx.MATRIX_VERSION, lessons=ids, kinds=[s.name for s in args.sources],
                       cells=cells, merged=len(done.writes), audit_exit=audit.status,
                       audit_line=audit.summary("audit: "))
    print(f"fleet merge: {len(done.writes)} files written, {done.same} already there")
    print("\n".join(mx.render(result)))
    return 0 if result.passed() else 1


def _collect(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    added = worktree.untracked(root, tasks.RECORD_FOLDERS)
    done = merge(args.out.resolve(), [Source(base=root, only=tuple(added))])
    print(f"fleet collect: {len(done.writes)} files into {args.out} ({len(done.skipped)} not record files)")
    return 0


def run(args: argparse.Namespace) -> int:
    install_signal_handlers()  # a task stopped by Slurm (scancel, its time limit) takes its run's tree with it
    if args.action == "submit":
        return _submit(args)
    if args.action == "task":
        return tasks.run_task(tasks.load_plan(args.plan), args.kind, args.index)
    if args.action == "finish":
        result = tasks.finish(tasks.load_plan(args.plan))
        print("\n".join(mx.render(result)))
        return 0 if result.passed() else 1
    if args.action == "show":
        return _show(args.plan)
    return _merge(args) if args.action == "merge" else _collect(args)
