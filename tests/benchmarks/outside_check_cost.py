"""What tileproof's own check of the handed-over outputs costs per run, against the run's wall time.

    python tests/benchmarks/outside_check_cost.py [--repeat 3]

Runs each course Python program the way ``tileproof run`` does (``runner.execute.run_program`` with the session's
``outside_check.Checker``: the launcher, the report, the handover, then one job for the session's one walled
checker process) in a copy of kernels/ and lessons/, under the fake GPU of tests/data/fake_gpu_site (numpy stands
in for cupy and for each kernel launch), ``--repeat`` rounds over the programs in one session, and prints per
program the program's step (s), its check's time (s, ``OutsideVerdict.wall_s`` of the jobs that did not start the
checker) and the check's share of the two. online_softmax runs at 512 x 100,000 (its output, 195 MiB, is above the
64 MiB cap: a row sample is handed over and checked). Also the checker's start (the first job's time less a later
job's of the same program: walled start and numpy, once per session), a job's fixed cost (a 1-element check in a
running checker) and, for comparison, a fresh checker per check (start plus job: what one process per program
cost). Since the fake GPU's runs are far shorter than real ones (no JIT, no device), it then prints the share that
the check times measured here take of the committed H200 runs' steps (runs/: the median step of each course
program's passing H200 records), with the start shared by the programs of one such session (a C++ program's
checks are those of its Python namesake, tile_spike's a 1-element job's). Target: <= 10% of the run's wall time.
The committed output is tests/benchmarks/outside_check_cost.txt.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tileproof.records.models import BenchRecord, Check, CheckReport, RunRecord, SessionRecord  # noqa: E402
from tileproof.records.models.run import SESSION_CHECKER_RUN_VERSION  # noqa: E402
from tileproof.records.store import load_records, new_run_id  # noqa: E402
from tileproof.runner import outside_check  # noqa: E402
from tileproof.runner.environment import child_env  # noqa: E402
from tileproof.runner.execute import RunOptions, run_program  # noqa: E402
from tileproof.runner.process import scratch_dir  # noqa: E402

PROGRAMS = [("vector_add", []), ("tile_matmul_softmax", []), ("fused", []),
            ("online_softmax", ["--rows", "512", "--cols", "100000"])]


def _tiny(root: Path, checker: outside_check.Checker) -> float:
    """One 1-element vector_add check through ``checker``: its ``wall_s``."""
    one = Check(name="vector_add", shape=[1], dtype="float32", rtol=0.0, atol=0.0, checked=1, mismatches=0,
                max_abs_err=0.0, max_rel_err=0.0, first_failure=None, passed=True)
    tiny = CheckReport(report_version=1, program="kernels/x.py", seed=1, device=None, gate="ok", gate_message="",
                       checks=[one], passed=True)
    with scratch_dir(checker.handovers) as folder:
        folder.chmod(0o755)  # as a walled program's folder is to the checker
        for key in ("output", "a", "b"):
            np.save(folder / f"vector_add.{key}.npy", np.zeros(1, np.float32), allow_pickle=False)
        entry = '{"file": "vector_add.%s.npy", "dtype": "<f4", "shape": [1]}'
        (folder / "handover.json").write_text(
            '{"handover_version": 1, "program": "kernels/x.py", "checks": [{"name": "vector_add", '
            f'"output": {entry % "output"}, "inputs": {{"a": {entry % "a"}, "b": {entry % "b"}}}}}]}}')
        verdict = outside_check.check(checker, new_run_id("run"), folder, tiny, 600.0)
    assert verdict.checks[0].status == "passed", verdict
    return verdict.wall_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}, fake GPU (tests/data/fake_gpu_site), "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        for folder in ("kernels", "lessons"):
            shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
        os.environ["PYTHONPATH"] = str(ROOT / "tests" / "data" / "fake_gpu_site")
        env = child_env()
        steps: dict[str, list[float]] = collections.defaultdict(list)
        jobs: dict[str, list[float]] = collections.defaultdict(list)
        last = {}
        first_s = 0.0
        with outside_check.session(root, warm=True) as checker:  # as tileproof run opens it
            for round_ in range(args.repeat + 1):  # the first round's first job may wait for the checker's start
                for name, extra in PROGRAMS:
                    out = run_program(root, new_run_id("run"), name,
                                      [sys.executable, str(root / "kernels" / f"{name}.py"), *extra], env, 600.0,
                                      RunOptions(python=True, checker=checker))
                    assert out.outside is not None, out.reason
                    steps[name].append(out.step.duration_s)
                    if round_ or name != PROGRAMS[0][0]:
                        jobs[name].append(out.outside.wall_s)
                    else:
                        first_s = out.outside.wall_s
                    last[name] = out
            fixed_s = statistics.median([_tiny(root, checker) for _ in range(args.repeat)])
            assert checker.starts == 1, checker.starts
        fresh = []
        for _ in range(args.repeat):
            with outside_check.session(root) as alone:  # started at its one job: start + job
                fresh.append(_tiny(root, alone))
        start_s = statistics.median(fresh) - fixed_s
        print(f"{'program':22} {'verdict':9} {'step s':>8} {'check s':>8} {'share':>7}  checks")
        checker_s: dict[str, float] = {}
        shares = []
        for name, _ in PROGRAMS:
            step, check = statistics.median(steps[name]), statistics.median(jobs[name])
            checker_s[name] = check
            share = check / (step + check)
            shares.append(share)
            out = last[name]
            assert out.outside is not None
            what = ", ".join(f"{c.name} {c.status}" + (f" (every {c.sampled_stride}th row)" if c.sampled_stride else "")
                             for c in out.outside.checks)
            print(f"{name:22} {out.verdict:9} {step:8.2f} {check:8.3f} {100 * share:6.1f}%  {what}")
        print(f"the session's first job ({PROGRAMS[0][0]}, the checker started beside its step): {first_s:.3f} s")
        print(f"a job's fixed cost in a running checker (one 1-element check): {fixed_s:.3f} s")
        print(f"the checker's start (a fresh checker's 1-element check less the fixed cost): {start_s:.2f} s, "
              "once per session, beside the first program's step")
        print(f"median share over the programs here: {100 * statistics.median(shares):.1f}% of step + check "
              f"(median of {args.repeat} jobs each, all {len(PROGRAMS) * (args.repeat + 1)} in one checker)")
    # Each course program's run in the committed H200 sessions that checked outputs (one checker process per
    # program then): the step, that checker's time, and the run's wall time in tileproof run (from its step's start
    # to the next program's); the last program of a session has no next one: its step and check only.
    records = {r.run_id: r for r in load_records(ROOT)}
    seen: dict[str, list[tuple[float, float, float | None]]] = collections.defaultdict(list)
    for rec in records.values():
        if not isinstance(rec, SessionRecord):
            continue
        runs = [records.get(i) for i in rec.runs]
        ok = [r for r in runs if isinstance(r, RunRecord)]
        gpu = ok[0].environment.gpu if ok else None
        if len(ok) != len(runs) or not gpu or "H200" not in gpu.name or any(r.outside is None for r in ok):
            continue
        for this, after in zip(ok, [*ok[1:], None], strict=True):
            assert this.outside is not None
            span = (after.step.started - this.step.started).total_seconds() if after is not None else None
            if this.verdict == "passed":
                seen[this.program].append((this.step.duration_s, this.outside.wall_s, span))
    namesake = {"cpp/tile_matmul_softmax.cu": "tile_matmul_softmax"}
    print("against the committed H200 sessions (this machine's job times; old: their own checker process per program):")
    print(f"  {'program':30} {'step s':>6} {'old chk':>7} {'run s':>6} {'new chk':>7} {'new run':>7} "
          f"{'share':>6} {'of step':>7}")
    for program, rows in sorted(seen.items()):
        stem = Path(program).stem
        new = checker_s.get(stem) or checker_s.get(namesake.get(program, ""), fixed_s)
        step = statistics.median(r[0] for r in rows)
        old = statistics.median(r[1] for r in rows)
        spans = [r[2] for r in rows if r[2] is not None]
        span = statistics.median(spans) if spans else step + old
        run = span - old + new
        print(f"  {program:30} {step:6.2f} {old:7.3f} {span:6.2f} {new:7.3f} {run:7.2f} {100 * new / run:5.1f}% "
              f"{100 * new / step:6.1f}%  ({len(rows)} runs)")
    measured_on_h200(records.values())
    return 0


def measured_on_h200(records) -> None:
    """Each passing H200 run record checked by its session's one checker (``run_version`` >= 6) and bench record
    checked by tileproof (``outside`` set): its step and the check's own time (``OutsideVerdict.wall_s``, as the
    record states it), and the check's share of the two."""
    print("measured on the H200 (the records' own times: each run checked by its session's one checker):")
    print(f"  {'record':36} {'program':32} {'step s':>7} {'check s':>7} {'share':>6}")
    for rec in sorted(records, key=lambda r: r.run_id):
        checked = (isinstance(rec, RunRecord) and rec.run_version >= SESSION_CHECKER_RUN_VERSION) or \
            isinstance(rec, BenchRecord)
        if not checked or rec.outside is None:
            continue
        gpu = rec.environment.gpu
        if gpu is None or "H200" not in gpu.name or rec.verdict != "passed":
            continue
        step, check = rec.step.duration_s, rec.outside.wall_s
        print(f"  {rec.run_id:36} {rec.program:32} {step:7.2f} {check:7.3f} {100 * check / (step + check):5.1f}%")


if __name__ == "__main__":
    sys.exit(main())
