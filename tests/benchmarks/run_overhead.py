"""Benchmark: tileproof's own time per run beyond the program's (capture + writing).

Runs ``python -m tileproof run --program NAME`` several times in the current
repository (on a GPU node) and compares each process's wall time with the
program's own step duration from the records it wrote. Target: <= 2 s per run.

    python tests/benchmarks/run_overhead.py [--program vector_add] [--times 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tileproof.records.store import load_record  # noqa: E402


def once(program: str) -> tuple[float, float, str]:
    before = set((ROOT / "runs").glob("*-run-*.json"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tileproof", "run", "--program", program],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    new = sorted(set((ROOT / "runs").glob("*-run-*.json")) - before)
    if len(new) != 1:
        sys.exit(f"expected one run record, found {len(new)}:\n{proc.stdout}{proc.stderr}")
    rec = load_record(new[0], ROOT)  # signed (TILEPROOF_SIGNING_KEY set) or not
    return wall, rec.step.duration_s, rec.verdict


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--program", default="vector_add")
    parser.add_argument("--times", type=int, default=3)
    args = parser.parse_args()
    rows = [once(args.program) for _ in range(args.times)]
    for wall, prog, verdict in rows:
        print(f"{args.program}: {verdict}, process {wall:6.2f} s, program {prog:6.2f} s, "
              f"tileproof {wall - prog:5.2f} s")
    overhead = statistics.median(w - p for w, p, _ in rows)
    met = "met" if overhead <= 2 else "NOT met"
    print(f"median tileproof overhead per run: {overhead:.2f} s (target <= 2 s: {met})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
