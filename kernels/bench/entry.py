"""A bench program's command line: the bench itself, or one of its compile workers.

Every bench program ends with ``sys.exit(entry.main(__file__, body, warm_body, ...))``:
``PROGRAM --jit-warm SPEC`` makes it a compile worker (kernels/bench/jit.py), anything
else runs ``body`` through the course harness (gate, check report, exit code = verdict)
with the bench options ``--quick``, ``--sweep`` and ``--results``. ``PROGRAM --export DIR
[--arch sm_90] [--sweep]`` compiles every configuration of the plan for one target without
a GPU (``export_main``; one ``--jit-export`` worker each) and prints what each costs.

Three paces (``Pace``), one per kind of run:

* the bench (no option): the program's ``bench`` plan -- the course kernels as written,
  each teaching step, and the configurations an earlier sweep found fastest -- with
  enough samples for a record that a lesson's claims can rest on;
* ``--quick``: a smoke run of the same program at small sizes;
* ``--sweep``: the program's ``sweep`` plan, every configuration worth trying, with
  fewer samples each, so that one GPU call can rank them all. A config whose check
  fails is left out of the timing and listed (the exit code is still 1: a failed check
  is never hidden); ``tileproof bench`` never passes ``--sweep``, so no bench record
  rests on a sweep.

Standard library and kernels/harness.py only.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable

import harness
import jit
from tolerances import TOLERANCES


@dataclass(frozen=True)
class Pace:
    """How a run samples: which plan, and how many samples of each case."""

    plan: str           # "bench" | "sweep": which configurations the program builds
    rounds: int         # interleaved rounds (timing.interleave)
    launches: int       # timed launches per case per round
    warmup_ms: float    # untimed GPU time of a case before each of its batches
    cycles: int         # head-to-head cycles (timing.alternate)


def pace(args: Any, bench: Pace, quick: Pace, sweep: Pace) -> Pace:
    """The pace the command line asked for (``--quick`` and ``--sweep`` exclude each other)."""
    if args.quick and args.sweep:
        raise SystemExit("--quick and --sweep exclude each other: a sweep runs at full size")
    return sweep if args.sweep else quick if args.quick else bench


def check(s: harness.Session, name: str, got: Any, want: Any, inputs: harness.InputSet) -> bool:
    """``s.check``, except that in a sweep a failed check drops its config instead of the run:
    False then (the report keeps the failed check, so the program still exits 1). ``inputs``: the
    shape's input set (``s.inputs``), handed over once for all its configs, so that tileproof
    recomputes every config's reference itself."""
    if not s.args.sweep:
        s.check(name, got, want, inputs)
        return True
    try:
        s.check(name, got, want, inputs)
    except harness.CheckFailed as failed:
        print(f"sweep: left out of the timing: {failed.result.summary()}", flush=True)
        return False
    return True


EXPORT_TIMEOUT_S = 300.0
"""One export worker (a 256x256 matmul tile takes tileiras tens of seconds on a slow core)."""


def export_main(program_file: str, argv: list[str],
                export_specs: Callable[[str], dict[str, dict[str, Any]]]) -> int:
    """``--export DIR [--arch ARCH] [--sweep]``: export every config of the plan; exit 1 if one fails."""
    parser = argparse.ArgumentParser(description="compile every kernel config of this bench for one target")
    parser.add_argument("--export", required=True, metavar="DIR", help="write the cubins here")
    parser.add_argument("--arch", default="sm_90", help="target (default sm_90)")
    parser.add_argument("--sweep", action="store_true", help="the sweep plan instead of the bench plan")
    args = parser.parse_args(argv)
    answers = jit.export_all(program_file, export_specs("sweep" if args.sweep else "bench"), args.export,
                             args.arch, EXPORT_TIMEOUT_S)
    failed = 0
    print(f"{'config':52} {'s':>5} {'REG':>4} {'LOCAL':>5} {'SHARED':>7} {'THREADS':>7}")
    for key, a in answers.items():
        if a["error"]:
            failed += 1
            print(f"{key:52} FAILED {a['error']}")
            continue
        res = (a.get("resources") or [{}])[0]
        if "registers" in res:
            print(f"{key:52} {a['compile_s']:5.1f} {res['registers']:4} {res['local_bytes']:5} "
                  f"{res['shared_bytes']:7} {res.get('max_threads_per_block', '?'):>7}")
        else:
            print(f"{key:52} {a['compile_s']:5.1f} ({res.get('error', 'no resources')})")
    print(f"{len(answers) - failed}/{len(answers)} configs compiled for {args.arch}")
    return 1 if failed else 0


def finish(s: harness.Session) -> None:
    """End a body: in a sweep that left configs out, fail the run here, after the results file
    was written (the harness then exits 1 and says which check failed first)."""
    failed = [c for c in s.report.checks if not c.passed]
    if failed:
        print(f"sweep: {len(failed)} config(s) left out after a failed check; the run fails", flush=True)
        raise harness.CheckFailed(failed[0])


def main(program_file: str, body: Callable[[harness.Session], None],
         warm_body: Callable[[dict[str, Any]], dict[str, Any]], description: str,
         quick_help: str, argv: list[str] | None = None, *,
         export_specs: Callable[[str], dict[str, dict[str, Any]]] | None = None,
         export_body: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [jit.WARM_FLAG]:
        return jit.worker_main(argv[1], warm_body)
    if argv[:1] == [jit.EXPORT_FLAG] and export_body is not None:
        return jit.worker_main(argv[1], export_body)
    if "--export" in argv and export_specs is not None:
        return export_main(program_file, argv, export_specs)

    def add_arguments(parser) -> None:
        parser.add_argument("--quick", action="store_true", help=quick_help)
        parser.add_argument("--sweep", action="store_true",
                            help="every configuration worth trying, fewer samples each (ranks them; no record)")
        parser.add_argument("--results", default=None, help="write the timing results JSON here")

    return harness.run_program(program_file, body, argv=argv, tolerances=TOLERANCES,
                               add_arguments=add_arguments, description=description)


def print_repeats(sweep: list, repeats: list, width: int) -> None:
    """The same case measured twice in this run: both medians and how far apart."""
    print("\nrepeat (same case measured twice in this run):", flush=True)
    first = {c.key: c for c in sweep}
    for c in repeats:
        m1, m2 = first[c.key].median_ms, c.median_ms
        print(f"  {c.key:{width}} {m1:.4f} ms then {m2:.4f} ms: {100 * abs(m2 - m1) / m1:.2f}%", flush=True)
