"""Benchmark: the check a signing session makes before each signature (``runner/integrity.py``), pass by pass.

For each revision measured (this checkout's HEAD, and with ``--against REV`` that one as well, in turn under the
same load), a process running that revision's tileproof (``PYTHONPATH`` at a ``git archive`` copy of it) takes the
snapshot of the copy (``Snapshot.take``, what a session does as it starts) and checks it three times
(``Snapshot.changed``, what it does before each signature), printing the files watched, how many of them lie in the
interpreter's ``site-packages`` folders, and each pass's CPU time (``time.process_time``). The interpreter is this
one: its environment and its base installation are the machine's.

    python tests/benchmarks/integrity_bench.py [--against REV] [--runs N] > tests/benchmarks/integrity_bench.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from compile_bench import (  # the same helpers, beside this script
    checkout,
    load,
    machine,
    paired,
    paired_arguments,
    revisions,
)

PASS = """
import json, sys, time
from pathlib import Path
from tileproof.runner import integrity
root = Path(sys.argv[1])
t = time.process_time()
snapshot = integrity.Snapshot.take(root)
take = time.process_time() - t
checks = []
for _ in range(3):
    t = time.process_time()
    assert snapshot.changed() is None
    checks.append(time.process_time() - t)
folders = integrity.environments()
inside = sum(1 for p in snapshot.files if any(p.startswith(f + "/") for f in folders))
print(json.dumps({"files": len(snapshot.files), "in_site": inside, "folders": folders, "take": take,
                  "checks": checks}))
"""


def one_pass(rev: str, tmp: Path) -> dict:
    code = tmp / f"code-{rev}"
    if not code.is_dir():
        checkout(rev, code)
    was = load()
    done = subprocess.run([sys.executable, "-c", PASS, str(code)], env={**os.environ, "PYTHONPATH": str(code)},
                          capture_output=True, text=True, cwd=code)
    if done.returncode != 0:
        sys.exit(f"{rev}: {done.stderr[-3000:]}")
    got = json.loads(done.stdout)
    checks = ", ".join(f"{c:.3f}" for c in got["checks"])
    print(f"    {got['files']:6} files watched, {got['in_site']:6} in site-packages ({', '.join(got['folders'])}); "
          f"snapshot {got['take']:.3f} s, checks {checks} s CPU  ({was} before, {load()} after)", flush=True)
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    paired_arguments(parser, runs=3)
    args = parser.parse_args()
    revs = revisions(args.against)
    print(f"{machine(revs, args.runs)}; the interpreter {sys.prefix} (base {sys.base_prefix})")
    results = paired(revs, args.runs, "integrity-bench-", one_pass)
    print("medians")
    print("  " + f"{'':22}" + "".join(f"{r:>12}" for r in revs))
    rows = {"files watched": (lambda p: p["files"], "12.0f"), "snapshot (s of CPU)": (lambda p: p["take"], "12.3f"),
            "a check (s of CPU)": (lambda p: statistics.median(p["checks"]), "12.3f")}
    for name, (of, shape) in rows.items():
        print("  " + f"{name:22}" + "".join(format(statistics.median(of(p) for p in results[r]), shape) for r in revs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
