"""Benchmark: the property-based parser tests at 10,000 examples per target.

Runs every target of ``tests/test_fuzz_parsers.py`` (the suite runs them at a
small fixed budget) with a random seed, and reports per target the examples it
ran, the failures found (any exception that is not a one-line ``TileproofError``)
and the time taken. Target: 0 failures.

    python tests/benchmarks/fuzz_parsers.py [--examples 10000] > tests/benchmarks/fuzz_parsers.txt
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="examples per target (default 10000)")
    parser.add_argument("--only", action="append", default=[], help="run only targets whose name contains this")
    args = parser.parse_args()
    os.environ["TILEPROOF_FUZZ_EXAMPLES"] = str(args.examples)  # read when the module is imported
    sys.path.insert(0, str(TESTS))
    import hypothesis
    import test_fuzz_parsers as fuzz

    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}, hypothesis {hypothesis.__version__}; "
          f"load average {os.getloadavg()[0]:.1f} before")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=TESTS, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "tileproof", "tests"], cwd=TESTS,
                           capture_output=True, text=True).stdout.strip()
    print(f"code: commit {commit.stdout.strip() or '?'}{' with uncommitted changes' if dirty else ''}")
    print(f"budget: max_examples={args.examples} per target, random seed, no example database")
    total_failures, start = 0, time.perf_counter()
    for target in fuzz.TARGETS:
        name = target.__name__.removeprefix("test_")
        if args.only and not any(o in name for o in args.only):
            continue
        fuzz.EXAMPLES_RUN.clear()
        t0 = time.perf_counter()
        try:
            target()
            failure = ""
        except Exception as e:  # report the failure, keep fuzzing the others
            failure = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        seconds = time.perf_counter() - t0
        ran = sum(fuzz.EXAMPLES_RUN.values())
        total_failures += bool(failure)
        print(f"{name:24} examples {ran:6}  failures {int(bool(failure))}  {seconds:7.1f} s"
              + (f"  {failure}" if failure else ""), flush=True)
    print(f"total: {total_failures} failures, {time.perf_counter() - start:.0f} s; "
          f"load average {os.getloadavg()[0]:.1f} after")
    print(f"target 0 failures: {'met' if total_failures == 0 else 'NOT met'}")
    return 1 if total_failures else 0


if __name__ == "__main__":
    sys.exit(main())
