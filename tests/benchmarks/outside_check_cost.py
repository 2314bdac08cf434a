"""What tileproof's own check of the handed-over outputs costs per run, against the run's wall time.

    python tests/benchmarks/outside_check_cost.py [--repeat 3]

Runs each course Python program the way ``tileproof run`` does (``runner.execute.run_program``: the launcher,
the report, the handover, then ``runner.outside_check``) in a copy of kernels/ and lessons/, under the fake GPU
of tests/data/fake_gpu_site (numpy stands in for cupy and for each kernel launch), and prints per program the
program's step (s), the checker's process (s, ``OutsideVerdict.wall_s``) and the checker's share of the two.
online_softmax runs at 512 x 100,000 (its output, 195 MiB, is above the 64 MiB cap: a row sample is handed
over and checked). Also the checker's fixed cost (its process on one 1-element check: start, containment,
numpy, the reference table) and, since the fake GPU's runs are far shorter than real ones (no JIT, no device),
the share the checker times measured here would take of the committed H200 runs' steps (runs/: the median
step of each course program's passing H200 records; a C++ program's checks are those of its Python namesake,
tile_spike's the fixed cost). Target: <= 10% of the run's wall time. The committed output is
tests/benchmarks/outside_check_cost.txt.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}, fake GPU (tests/data/fake_gpu_site)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        for folder in ("kernels", "lessons"):
            shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
        os.environ["PYTHONPATH"] = str(ROOT / "tests" / "data" / "fake_gpu_site")
        env = child_env()
        print(f"{'program':22} {'verdict':9} {'step s':>8} {'checker s':>10} {'share':>7}  checks")
        shares = []
        checker: dict[str, float] = {}
        for name, extra in PROGRAMS:
            steps, checks = [], []
            for _ in range(args.repeat):
                out = run_program(root, new_run_id("run"), name, [sys.executable, str(root / "kernels" / f"{name}.py"),
                                                                  *extra], env, 600.0, python=True)
                assert out.outside is not None, out.reason
                steps.append(out.step.duration_s)
                checks.append(out.outside.wall_s)
            step, check = statistics.median(steps), statistics.median(checks)
            checker[name] = check
            share = check / (step + check)
            shares.append(share)
            what = ", ".join(f"{c.name} {c.status}" + (f" (every {c.sampled_stride}th row)" if c.sampled_stride else "")
                             for c in out.outside.checks)
            print(f"{name:22} {out.verdict:9} {step:8.2f} {check:10.2f} {100 * share:6.1f}%  {what}")
        fixed = []
        one = Check(name="vector_add", shape=[1], dtype="float32", rtol=0.0, atol=0.0, checked=1, mismatches=0,
                    max_abs_err=0.0, max_rel_err=0.0, first_failure=None, passed=True)
        tiny = CheckReport(report_version=1, program="kernels/x.py", seed=1, device=None, gate="ok", gate_message="",
                           checks=[one], passed=True)
        for _ in range(args.repeat):
            with scratch_dir() as folder:
                for key in ("output", "a", "b"):
                    np.save(folder / f"vector_add.{key}.npy", np.zeros(1, np.float32), allow_pickle=False)
                entry = '{"file": "vector_add.%s.npy", "dtype": "<f4", "shape": [1]}'
                (folder / "handover.json").write_text(
                    '{"handover_version": 1, "program": "kernels/x.py", "checks": [{"name": "vector_add", '
                    f'"output": {entry % "output"}, "inputs": {{"a": {entry % "a"}, "b": {entry % "b"}}}}}]}}')
                t0 = time.perf_counter()
                verdict = outside_check.check(root, new_run_id("run"), folder, tiny, 600.0)
                fixed.append(time.perf_counter() - t0)
                assert verdict.checks[0].status == "passed", verdict
        fixed_s = statistics.median(fixed)
        print(f"checker's fixed cost (its process on one 1-element check): {fixed_s:.2f} s")
        print(f"median share over the programs here: {100 * statistics.median(shares):.1f}% "
              f"(target <= 10%; median of {args.repeat} runs each)")
    steps_h200: dict[str, list[float]] = collections.defaultdict(list)
    for rec in load_records(ROOT):
        gpu = rec.environment.gpu if isinstance(rec, RunRecord) else None
        if isinstance(rec, RunRecord) and rec.verdict == "passed" and gpu and "H200" in gpu.name:
            steps_h200[rec.program].append(rec.step.duration_s)
    namesake = {"cpp/tile_matmul_softmax.cu": "tile_matmul_softmax"}
    print("against the committed H200 runs' steps (this machine's checker times):")
    for program, durations in sorted(steps_h200.items()):
        stem = Path(program).stem
        check = checker.get(stem) or checker.get(namesake.get(program, ""), fixed_s)
        step = statistics.median(durations)
        print(f"  {program:30} step {step:6.2f} s (median of {len(durations)})  checker {check:5.2f} s  "
              f"share {100 * check / (step + check):5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
