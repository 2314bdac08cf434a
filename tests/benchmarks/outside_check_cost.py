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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tileproof.records.models import Check, CheckReport, RunRecord  # noqa: E402
from tileproof.records.store import load_records, new_run_id  # noqa: E402
from tileproof.runner import outside_check  # noqa: E402
from tileproof.runner.environment import child_env  # noqa: E402
from tileproof.runner.execute import run_program  # noqa: E402
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
        first: tuple[str, float] | None = None
        last = {}
        with outside_check.session(root) as checker:
            for _ in range(args.repeat + 1):  # the first round's first job starts the checker
                for name, extra in PROGRAMS:
                    starts = checker.starts
                    out = run_program(root, new_run_id("run"), name,
                                      [sys.executable, str(root / "kernels" / f"{name}.py"), *extra], env, 600.0,
                                      python=True, checker=checker)
                    assert out.outside is not None, out.reason
                    steps[name].append(out.step.duration_s)
                    if checker.starts > starts:
                        first = (name, out.outside.wall_s)
                    else:
                        jobs[name].append(out.outside.wall_s)
                    last[name] = out
            fixed_s = statistics.median([_tiny(root, checker) for _ in range(args.repeat)])
            assert checker.starts == 1, checker.starts
        fresh = []
        for _ in range(args.repeat):
            with outside_check.session(root) as alone:
                fresh.append(_tiny(root, alone))
        fresh_s = statistics.median(fresh)
        assert first is not None
        start_s = first[1] - statistics.median(jobs[first[0]])
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
        print(f"checker's start, once per session (walled process, numpy): {start_s:.2f} s "
              f"(the first job, {first[0]}, took {first[1]:.2f} s)")
        print(f"a job's fixed cost in a running checker (one 1-element check): {fixed_s:.3f} s")
        print(f"a fresh checker per check instead (start + the same job): {fresh_s:.2f} s")
        print(f"median share over the programs here, start not counted: {100 * statistics.median(shares):.1f}% "
              f"(median of {args.repeat} jobs each, all {len(PROGRAMS) * (args.repeat + 1)} in one checker)")
    steps_h200: dict[str, list[float]] = collections.defaultdict(list)
    for rec in load_records(ROOT):
        gpu = rec.environment.gpu if isinstance(rec, RunRecord) else None
        if isinstance(rec, RunRecord) and rec.verdict == "passed" and gpu and "H200" in gpu.name:
            steps_h200[rec.program].append(rec.step.duration_s)
    namesake = {"cpp/tile_matmul_softmax.cu": "tile_matmul_softmax"}
    share_of_start = start_s / max(1, len(steps_h200))
    print(f"against the committed H200 runs' steps (this machine's check times; the start shared by the "
          f"{len(steps_h200)} programs of a session: {share_of_start:.3f} s each):")
    for program, durations in sorted(steps_h200.items()):
        stem = Path(program).stem
        check = checker_s.get(stem) or checker_s.get(namesake.get(program, ""), fixed_s)
        cost = check + share_of_start
        step = statistics.median(durations)
        print(f"  {program:30} step {step:6.2f} s (median of {len(durations):2})  check {cost:6.3f} s  "
              f"share {100 * cost / (step + cost):5.1f}%  (a fresh checker: {100 * fresh_s / (step + fresh_s):5.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
