"""Benchmark: ``tileproof check`` over this repository's course, cold, warm and with the index off.

For each revision measured (this checkout's HEAD, and with ``--against REV`` that one as well, pass by pass in
turn under the same load), in a temporary copy of the revision's course (``git archive``: its lessons, programs,
records and every transcript under evidence/, with no verified-file index yet):

1. cold: ``python -m tileproof check`` (the index made, each transcript read and its redaction counts kept);
2. warm: the same again, three times (what an author's rerun costs);
3. ``TILEPROOF_INDEX=off``: three times (every transcript read: what a reviewer's from-scratch run costs).

Each line gives the wall time, the CPU time of the process (user + system) and the load average before and after.
``--against`` runs the other revision's tileproof (``PYTHONPATH`` at its copy) on that revision's course.

    python tests/benchmarks/check_bench.py [--against REV] [--runs N] > tests/benchmarks/check_bench.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from compile_bench import (  # the same helpers, beside this script
    checkout,
    children_cpu,
    load,
    machine,
    paired,
    paired_arguments,
    revisions,
)

REPO = Path(__file__).resolve().parents[2]


def check_once(label: str, root: Path, index: str | None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "TILEPROOF_INDEX"} | {"PYTHONPATH": str(root)}
    if index is not None:
        env["TILEPROOF_INDEX"] = index
    was, cpu0, t0 = load(), children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tileproof", "check"], cwd=root, env=env, capture_output=True,
                          text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if done.returncode != 0:
        sys.exit(f"check failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    last = done.stdout.strip().splitlines()[-1]
    print(f"    {label:22} {wall:6.2f} s {cpu:6.2f} s CPU  [{last}]  ({was} before, {load()} after)", flush=True)
    return {"wall": wall, "cpu": cpu}


def one_pass(rev: str, tmp: Path) -> dict[str, list[dict[str, float]]]:
    root = tmp / f"pass-{rev}"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    checkout(rev, root)
    return {"cold": [check_once("cold", root, None)],
            "warm": [check_once(f"warm {i + 1}", root, None) for i in range(3)],
            "index off": [check_once(f"index off {i + 1}", root, "off") for i in range(3)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    paired_arguments(parser)
    args = parser.parse_args()
    revs = revisions(args.against)
    files = sum(1 for p in (REPO / "evidence").rglob("*") if p.is_file())
    print(f"{machine(revs, args.runs)}; {files} files under evidence/ in this checkout")
    results = paired(revs, args.runs, "check-bench-", one_pass)
    print("medians (s)")
    print("  " + f"{'step':16}" + "".join(f"{r + ' wall':>14}{r + ' cpu':>14}" for r in revs))
    for step in ("cold", "warm", "index off"):
        cells = []
        for r in revs:
            runs = [m for p in results[r] for m in p[step]]
            cells.append(f"{statistics.median(m['wall'] for m in runs):14.2f}"
                         f"{statistics.median(m['cpu'] for m in runs):14.2f}")
        print("  " + f"{step:16}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
