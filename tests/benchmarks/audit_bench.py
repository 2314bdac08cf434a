"""Benchmark ``nox -s audit`` on 10,000 synthetic records with their evidence.

    python tests/benchmarks/audit_bench.py [--records 10000] [--repeat 5] [--keep DIR]

Writes the records through ``tileproof.store`` (sealed; 3 transcripts per run,
3 per session) into a temporary tree, in a separate process, then times
``python -m tileproof audit`` there as ``nox -s audit`` runs it: a fresh
interpreter that audits, then writes evidence/AUDIT.md and evidence/audit.html.
The page cache is warm, as on a CI machine after checkout. Then, in this
process, ``audit()`` alone, split into its two processes' CPU, and the same
audit confined to one process. Target: <= 5 s on a 2-core machine without GPU.
The committed output is tests/benchmarks/audit_bench.txt.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tileproof.catalog import byte_pass as audit_scan  # noqa: E402
from tileproof.gather import audit  # noqa: E402

TARGET_S = 5.0


def generate(root: Path, records: int) -> None:
    spec = importlib.util.spec_from_file_location("audit_tree", ROOT / "tests" / "data" / "audit" / "audit_tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.synthetic_tree(root, records)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None, help="generate into (or reuse) this folder")
    parser.add_argument("--generate-only", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate_only:
        generate(args.generate_only, args.records)
        return 0

    tmp = tempfile.TemporaryDirectory(prefix="audit-bench-") if args.keep is None else None
    root = Path(tmp.name) if tmp else args.keep
    if not (root / "runs").is_dir():
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        # A separate process, so that this one's heap stays as small as the CLI's.
        subprocess.run([sys.executable, __file__, "--records", str(args.records), "--generate-only", str(root)],
                       check=True)
        generated = f"{time.perf_counter() - t0:.1f} s (not timed below)"
    else:
        generated = "reused"

    load0 = os.getloadavg()[0]
    cli, cli_cpu = [], []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(args.repeat):
        c0, w0 = children_cpu(), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "tileproof", "audit", "--allow-no-history", "--root", str(root),
                               "--update-committed-report"], env=env, capture_output=True, text=True)
        cli.append(time.perf_counter() - w0)
        cli_cpu.append(children_cpu() - c0)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]

    walls, main_cpu, helper_cpu = [], [], []
    for _ in range(args.repeat):
        c0, p0, w0 = children_cpu(), time.process_time(), time.perf_counter()
        result = audit.audit(root)
        walls.append(time.perf_counter() - w0)
        main_cpu.append(time.process_time() - p0)
        helper_cpu.append(children_cpu() - c0)
    audit_scan.PARALLEL_MIN_RECORDS, saved = 10**9, audit_scan.PARALLEL_MIN_RECORDS
    singles = []
    for _ in range(max(1, args.repeat // 2)):
        w0 = time.perf_counter()
        audit.audit(root)
        singles.append(time.perf_counter() - w0)
    audit_scan.PARALLEL_MIN_RECORDS = saved
    load1 = os.getloadavg()[0]

    size = sum(f.stat().st_size for f in (root / "evidence").rglob("*") if f.is_file())
    md = (root / "evidence" / audit.REPORT_MD).stat().st_size
    html = (root / "evidence" / audit.REPORT_HTML).stat().st_size
    best, i = min(cli), min(range(len(walls)), key=walls.__getitem__)

    def fmt(xs):
        return ", ".join(f"{x:.2f}" for x in xs)

    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
          f"no GPU used, python {platform.python_version()}; load average {load0:.1f} before, {load1:.1f} after")
    print(f"tree: {result.validated} records in runs/, {result.evidence_files} evidence files "
          f"({size / 1e6:.1f} MB), {len(result.lessons)} lessons; findings: {len(result.findings)}")
    print(f"generation: {generated}")
    print(f"python -m tileproof audit (fresh interpreter, audit + AUDIT.md {md / 1e3:.0f} kB + audit.html "
          f"{html / 1e3:.0f} kB), wall: best {best:.2f} s, median {statistics.median(cli):.2f} s of {args.repeat} "
          f"({fmt(cli)}); CPU of all its processes, median {statistics.median(cli_cpu):.2f} s")
    print(f"  its last line: {summary}")
    print(f"audit() in-process, wall: best {walls[i]:.2f} s, median {statistics.median(walls):.2f} s ({fmt(walls)}); "
          f"CPU of the best: main {main_cpu[i]:.2f} s, helper {helper_cpu[i]:.2f} s")
    print(f"  helper: {audit_scan.WORKERS_NOTE}")
    print(f"audit() confined to one process: best {min(singles):.2f} s ({fmt(singles)})")
    print(f"target <= {TARGET_S:.0f} s (best CLI wall): {'met' if best <= TARGET_S else 'MISSED'}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
