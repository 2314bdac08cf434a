"""Benchmark: containment of runaway programs (issue 15), no GPU needed.

In a temp copy of kernels/ and lessons/, runs ``python -m tileproof run`` on two fake
programs and reports:

* ``hang``: its grandchild calls ``setsid sleep infinity`` and keeps the pipes open;
  under ``--timeout 3`` the whole command's wall time, the step's duration, the strays
  killed, and whether any process of it is left (target: step < 5 s, none left);
* ``flood``: prints 300 MB; tileproof's peak RSS (``ru_maxrss`` of the command) and the
  size of the transcript kept (target: memory bounded by the 16 MiB cap, not 300 MB).

    python tests/benchmarks/containment_bench.py > tests/benchmarks/containment_bench.txt
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HANG = '''AOT_SIGNATURES = {}
import subprocess
from pathlib import Path
kid = subprocess.Popen(["setsid", "sleep", "infinity"])
Path(__file__).with_suffix(".pid").write_text(str(kid.pid))
subprocess.run(["sleep", "infinity"])
'''
FLOOD = '''AOT_SIGNATURES = {}
import sys
chunk = "z" * (1 << 20)
for _ in range(300):
    sys.stdout.write(chunk)
'''


def command(root: Path, program: str) -> tuple[float, int, dict]:
    """Wall seconds, the child's peak RSS in KiB, and the run record."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tileproof", "run", "--program", program, "--timeout", "3",
                           "--root", str(root)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    records = [json.loads(p.read_text()) for p in sorted((root / "runs").glob("*-run-*.json"))]
    rec = next(r for r in records if r["program"] == f"kernels/{program}.py")
    print(f"  output: {proc.stdout.strip().splitlines()[-1]}")
    return wall, max(rss, before), rec


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for folder in ("kernels", "lessons"):
            shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
        (root / "cpp").mkdir()
        (root / "kernels" / "hang.py").write_text(HANG)
        (root / "kernels" / "flood.py").write_text(FLOOD)

        print("hang: setsid sleep infinity grandchild, --timeout 3")
        wall, _, rec = command(root, "hang")
        pid = int((root / "kernels" / "hang.pid").read_text())
        left = Path(f"/proc/{pid}").exists()
        print(f"  command wall {wall:.2f} s; step {rec['step']['duration_s']:.2f} s; verdict {rec['verdict']}; "
              f"strays killed {rec['step']['strays_killed']}; grandchild left: {left}")

        print("flood: 300 MB on stdout")
        wall, rss, rec = command(root, "flood")
        kept = rec["step"]["stdout"]["bytes"]
        cut = rec["step"]["stdout_cut"]
        print(f"  command wall {wall:.2f} s; peak RSS of the largest child {rss / 1024:.0f} MiB; "
              f"transcript {kept / 2**20:.1f} MiB; cut {cut}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
