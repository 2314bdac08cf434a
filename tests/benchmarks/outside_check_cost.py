"""What tileproof's own check of the handed-over outputs costs per run, against the run's wall time.

    python tests/benchmarks/outside_check_cost.py [--repeat 3]

Runs each course Python program the way ``tileproof run`` does (``runner.execute.run_program``: the launcher,
the report, the handover, then ``runner.outside_check``) in a copy of kernels/ and lessons/, under the fake GPU
of tests/data/fake_gpu_site (numpy stands in for cupy and for each kernel launch), and prints per program the
program's step (s), the checker's process (s, ``OutsideVerdict.wall_s``) and the checker's share of the two.
online_softmax runs at 512 x 100,000 (its output, 195 MiB, is above the 64 MiB cap: a row sample is handed
over and checked). Also the checker's fixed cost: its process on a folder with nothing handed over.
Target: <= 10% of the run's wall time. The committed output is tests/benchmarks/outside_check_cost.txt.
"""

from __future__ import annotations

import argparse
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

from tileproof.records.models import CheckReport  # noqa: E402
from tileproof.records.store import new_run_id  # noqa: E402
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
        for name, extra in PROGRAMS:
            steps, checks = [], []
            for _ in range(args.repeat):
                out = run_program(root, new_run_id("run"), name, [sys.executable, str(root / "kernels" / f"{name}.py"),
                                                                  *extra], env, 600.0, python=True)
                assert out.outside is not None, out.reason
                steps.append(out.step.duration_s)
                checks.append(out.outside.wall_s)
            step, check = statistics.median(steps), statistics.median(checks)
            share = check / (step + check)
            shares.append(share)
            what = ", ".join(f"{c.name} {c.status}" + (f" (every {c.sampled_stride}th row)" if c.sampled_stride else "")
                             for c in out.outside.checks)
            print(f"{name:22} {out.verdict:9} {step:8.2f} {check:10.2f} {100 * share:6.1f}%  {what}")
        fixed = []
        empty = CheckReport(report_version=1, program="kernels/x.py", seed=1, device=None, gate="ok", gate_message="",
                            checks=[], passed=False)
        for _ in range(args.repeat):
            with scratch_dir() as folder:
                t0 = time.perf_counter()
                outside_check.check(root, new_run_id("run"), folder, empty, 600.0)
                fixed.append(time.perf_counter() - t0)
        print(f"checker's fixed cost (its process, nothing handed over): {statistics.median(fixed):.2f} s")
        print(f"median share over the programs: {100 * statistics.median(shares):.1f}% "
              f"(target <= 10%; median of {args.repeat} runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
