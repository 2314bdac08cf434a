"""Benchmark: two ``python -m tileproof compile`` started together on an empty build cache.

Real pip toolchain, no GPU. In a temp copy of cpp/, kernels/ and lessons/, starts two
compiles at once and reports each one's exit status and wall time, the compile records
written, and whether every artifact digest in them matches the file under build/
(target: both exit 0, no mismatch; the second waits for build/.lock and finds all cached).

    python tests/benchmarks/concurrent_compile.py > tests/benchmarks/concurrent_compile.txt
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tileproof.records.models import CompileRecord
from tileproof.records.store import load_records, sha256_file

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "course"  # mode 755: a walled build step (another uid) reads it; the temp folder is 700
        root.mkdir()
        for folder in ("cpp", "kernels", "lessons"):
            shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")  # the course's settings: its targets
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-m", "tileproof", "compile", "--root", str(root)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
        for i, proc in enumerate(procs, 1):
            out = proc.communicate()[0].strip().splitlines()
            print(f"compile {i}: exit {proc.returncode} after {time.perf_counter() - t0:.1f} s; "
                  f"last line: {out[-1] if out else '(none)'}")
            waited = [line for line in out if "waiting for build/.lock" in line]
            if waited:
                print(f"  {waited[0].strip()}")
        records = [r for r in load_records(root) if isinstance(r, CompileRecord)]
        builds = [(r.run_id, b) for r in records for b in r.builds if b.artifact]
        bad = [(run_id, b.artifact.path) for run_id, b in builds
               if sha256_file(root / b.artifact.path) != b.artifact.sha256]
        print(f"{len(records)} compile record(s), {len(builds)} attested artifacts, {len(bad)} digest mismatches")
        return 0 if all(p.returncode == 0 for p in procs) and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
