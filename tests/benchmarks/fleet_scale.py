"""Benchmark the fleet at scale: 100,000 records from 50 simulated hosts, merged, audited, shown.

    python tests/benchmarks/fleet_scale.py [--hosts 50] [--per-host 2000] [--keep DIR]

Each simulated host's tree is written by tests/data/audit/audit_tree.py's
``synthetic_tree`` (sealed records through ``tileproof.records.store``: run
sessions on H200/A100/T4 hosts, 3 transcripts per run and per session, a compile
record per 50 sessions), two hosts at a time (one per core). Generation is not
measured, so it writes without fsync (``os.fsync`` is a no-op in the generating
processes only). Then, each step in a fresh interpreter, with its wall time, CPU
and peak memory (``ru_maxrss`` of the step and of the processes it started):

1. ``fleet.merge.merge``: the 50 host trees into one tree, every file written
   once with fsync, as ``tileproof fleet merge`` does;
2. ``tileproof audit`` over the merged tree (expects 0 findings);
3. ``tileproof status`` over it;
4. the audit again after one record's byte and one transcript's byte are
   changed: it must find exactly those two (``record-seal``, ``evidence-digest``).

The committed output is tests/benchmarks/fleet_scale.txt.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _tree_module():
    spec = importlib.util.spec_from_file_location("audit_tree", ROOT / "tests" / "data" / "audit" / "audit_tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generate(job: tuple[str, int]) -> int:
    os.fsync = lambda fd: None  # generation only: a synthetic tree needs no durability
    path, n = job
    return _tree_module().synthetic_tree(Path(path), n)


def step(name: str, root: Path, hosts: list[Path]) -> dict:
    """Run one measured step in this (fresh) process; return its numbers."""
    from tileproof.__main__ import main

    w0, c0 = time.perf_counter(), time.process_time()
    out: dict = {}
    if name == "merge":
        from tileproof.fleet.merge import Source, merge

        done = merge(root, [Source(base=h) for h in hosts])
        out = {"written": len(done.writes), "same": done.same, "skipped": len(done.skipped)}
    elif name in ("audit", "audit-tampered"):
        out = {"exit": main(["audit", "--root", str(root)])}
    elif name == "status":
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            out = {"exit": main(["status", "--root", str(root)])}
        out["lines"] = len(buf.getvalue().splitlines())
    self_, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out.update(wall_s=time.perf_counter() - w0, cpu_s=time.process_time() - c0 + kids.ru_utime + kids.ru_stime,
               maxrss_mib=self_.ru_maxrss / 1024, children_maxrss_mib=kids.ru_maxrss / 1024)
    return out


def measured(name: str, root: Path, hosts: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--step", name, "--root", str(root), "--hosts-dir", str(hosts)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if proc.returncode != 0:
        raise SystemExit(f"step {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    result["last_line"] = next((ln for ln in reversed(lines[:-1]) if ln.startswith("audit:")), "")
    return result


def tamper(root: Path) -> tuple[str, str]:
    """Change one byte of one run record and one byte of one transcript (what the audit must catch)."""
    record = sorted((root / "runs").glob("*-run-*.json"))[len(list((root / "runs").glob("*"))) // 2]
    text = record.read_text()
    record.write_text(text.replace('"duration_s": 2.0', '"duration_s": 2.5', 1))
    transcript = sorted((root / "evidence").glob("*-run-*/run.stdout.txt"))[1234]
    transcript.write_bytes(transcript.read_bytes().replace(b"ok", b"OK", 1))
    return record.name, transcript.relative_to(root).as_posix()


def findings(root: Path) -> list[str]:
    """The rows of AUDIT.md's Findings table."""
    text = (root / "evidence" / "AUDIT.md").read_text()
    section = text.split("\n## Findings\n", 1)[1].split("\n## ", 1)[0] if "\n## Findings\n" in text else ""
    return [ln for ln in section.splitlines() if ln.startswith("| `")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--per-host", type=int, default=2000)
    parser.add_argument("--keep", type=Path, default=None, help="work in (or reuse) this folder")
    parser.add_argument("--step", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--hosts-dir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:
        hosts = sorted(p for p in args.hosts_dir.iterdir() if p.is_dir())
        print(json.dumps(step(args.step, args.root, hosts)))
        return 0

    tmp = tempfile.TemporaryDirectory(prefix="fleet-scale-") if args.keep is None else None
    work = Path(tmp.name) if tmp else args.keep
    hosts_dir, root = work / "hosts", work / "merged"
    t0 = time.perf_counter()
    if not hosts_dir.is_dir():
        hosts_dir.mkdir(parents=True)
        jobs = [(str(hosts_dir / f"host{h:02d}"), args.per_host) for h in range(args.hosts)]
        with Pool(2) as pool:
            pool.map(_generate, jobs, chunksize=1)
    generated = time.perf_counter() - t0
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for folder in ("lessons", "kernels"):  # the course itself (identical in every host's tree)
        shutil.copytree(hosts_dir / "host00" / folder, root / folder)
    load0 = os.getloadavg()[0]
    merge = measured("merge", root, hosts_dir)
    audit = measured("audit", root, hosts_dir)
    audit_findings = findings(root)
    status = measured("status", root, hosts_dir)
    record, transcript = tamper(root)
    tampered = measured("audit-tampered", root, hosts_dir)
    caught = findings(root)
    load1 = os.getloadavg()[0]
    n_records = len(list((root / "runs").glob("*.json")))
    n_evidence = sum(1 for p in (root / "evidence").rglob("*") if p.is_file())

    def row(name, r):
        return (f"{name}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, peak memory {r['maxrss_mib']:.0f} MiB "
                f"(its child processes: {r['children_maxrss_mib']:.0f} MiB)")

    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}; load average {load0:.1f} before, {load1:.1f} after")
    print(f"hosts: {args.hosts} simulated hosts x {args.per_host} records (generated in {generated:.0f} s, "
          "not measured)")
    print(f"merged tree: {n_records} records in runs/, {n_evidence} evidence files")
    print(row("merge (50 trees, every file written once, fsync, 16 writers)", merge)
          + f"; {merge['written']} files written, {merge['same']} already there, {merge['skipped']} not merged")
    print(row("tileproof audit", audit) + f"; exit {audit['exit']}, {len(audit_findings)} findings")
    print(f"  {audit['last_line'].split('; wrote')[0]}")
    print(row("tileproof status", status) + f"; exit {status['exit']}, {status['lines']} lines")
    print(row("tileproof audit after changing 1 record byte + 1 transcript byte", tampered)
          + f"; exit {tampered['exit']}, {len(caught)} findings")
    for line in caught:
        print(f"  {line[:160]}")
    ok = (audit["exit"] == 0 and not audit_findings and tampered["exit"] != 0 and len(caught) == 2
          and any(record in ln and "record-seal" in ln for ln in caught)
          and any(transcript in ln and "evidence-digest" in ln for ln in caught))
    print(f"audit correct at this scale (clean tree: 0 findings; tampered: exactly the 2 changes): "
          f"{'yes' if ok else 'NO'}")
    if tmp is not None:
        tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
