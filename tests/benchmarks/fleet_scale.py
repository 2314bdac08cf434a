"""Benchmark the fleet at scale: 100,000 records from 50 simulated hosts, merged, audited, shown.

    python tests/benchmarks/fleet_scale.py [--hosts 50] [--per-host 2000] [--keep DIR]

The course (tests/data/audit/audit_tree.py's ``synthetic_tree`` with no records: 4 lessons, 12
programs) is committed first in a git checkout, and each simulated host's tree is written by
``synthetic_tree`` naming that commit (sealed records through ``tileproof.records.store``: run
sessions on H200/A100/T4 hosts, 3 transcripts per run and per session, a compile record per 50
sessions), two hosts at a time (one per core). Generation is not measured, so it writes without
fsync (``os.fsync`` is a no-op in the generating processes only). Then, each step in a fresh
interpreter, with its wall time, CPU and peak memory: ``ru_maxrss`` of the step's process, and the
peak of the proportional set size (PSS, ``/proc/PID/smaps_rollup``) of the step's process and every
process it started, summed, sampled every 0.2 s (the memory of the whole command: the audit's forked
byte helper runs beside it; ``ru_maxrss`` of the children is no measure of it, since every ``git``
it starts inherits the parent's resident size at fork):

1. ``fleet.merge.merge``: the 50 host trees into one tree, every file written once, one durable
   barrier, as ``tileproof fleet merge`` does; then the merged tree is committed (not measured:
   what CI checks out);
2. ``tileproof audit``, cold (no verified-file index: ``.tileproof-cache/`` deleted) and warm
   (expects 0 findings, history checked);
3. ``tileproof status``, cold and warm, then the audit on the index status made; every output
   (stdout, the audit's JSON summary) must be byte-identical to the cold one (the index deleted:
   identical output);
4. the audit after one record's byte and one transcript's byte are changed, warm and cold: it must
   find exactly those two (``record-seal``, ``evidence-digest``, and ``history-changed`` for each);
5. the changes restored, one more host's 8-record session merged, and ``tileproof audit --since
   HEAD`` (the merge's records and the lessons they touch; expects 0 findings).

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


def _generate(job: tuple[str, int, str]) -> int:
    os.fsync = lambda fd: None  # generation only: a synthetic tree needs no durability
    path, n, commit = job
    return _tree_module().synthetic_tree(Path(path), n, commit=commit)


def _git(root: Path, *argv: str) -> str:
    ident = ["-c", "user.email=bench@example.invalid", "-c", "user.name=bench", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", "-C", str(root), *ident, *argv], check=True, capture_output=True,
                          text=True).stdout.strip()


def commit_all(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "--no-verify", "-m", message)
    return _git(root, "rev-parse", "HEAD")


def _pss_kib(pid: int) -> int:
    """The proportional set size of one process (0 when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return next((int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("Pss:")), 0)


def _tree_pids(pid: int) -> list[int]:
    """``pid`` and every descendant (``/proc/PID/task/TID/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except OSError:
                continue
    return out


class TreeMemory:
    """The peak, over samples every ``every`` seconds, of the summed PSS of this process and its descendants."""

    def __init__(self, every: float = 0.2):
        import threading

        self.peak_kib, self.every = 0, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in _tree_pids(os.getpid())))
            self._stop.wait(self.every)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_kib / 1024


def step(name: str, root: Path, hosts: list[Path], out_file: Path | None, since: str | None) -> dict:
    """Run one measured step in this (fresh) process; return its numbers."""
    import contextlib
    import io

    from tileproof.__main__ import main

    memory = TreeMemory()
    w0, c0 = time.perf_counter(), time.process_time()
    out: dict = {}
    buf = io.StringIO()
    if name == "merge":
        from tileproof.fleet.merge import Source, merge

        done = merge(root, [Source(base=h) for h in hosts])
        out = {"written": len(done.writes), "same": done.same, "skipped": len(done.skipped)}
    elif name == "audit":
        summary = root.parent / "summary.json"  # one path: the audit's last line names what it wrote
        argv = ["audit", "--root", str(root), "--md", str(root.parent / "AUDIT.md"), "--json", str(summary)]
        argv += ["--since", since] if since else []
        with contextlib.redirect_stdout(buf):
            out = {"exit": main(argv)}
        if out_file is not None:
            shutil.copyfile(summary, out_file.with_suffix(".json"))
    elif name == "status":
        with contextlib.redirect_stdout(buf):
            out = {"exit": main(["status", "--root", str(root)])}
        out["lines"] = len(buf.getvalue().splitlines())
    if out_file is not None:
        out_file.write_text(buf.getvalue())
    self_, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out.update(wall_s=time.perf_counter() - w0, cpu_s=time.process_time() - c0 + kids.ru_utime + kids.ru_stime,
               maxrss_mib=self_.ru_maxrss / 1024, tree_pss_mib=memory.stop(),
               last_line=next((ln for ln in reversed(buf.getvalue().splitlines()) if ln.startswith("audit:")), ""))
    return out


def measured(name: str, root: Path, hosts: Path, out_file: Path | None = None, since: str | None = None,
             cold: bool = False) -> dict:
    if cold:
        shutil.rmtree(root / ".tileproof-cache", ignore_errors=True)
    argv = [sys.executable, __file__, "--step", name, "--root", str(root), "--hosts-dir", str(hosts)]
    argv += ["--out-file", str(out_file)] if out_file else []
    argv += ["--since", since] if since else []
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if proc.returncode != 0:
        raise SystemExit(f"step {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tamper(root: Path) -> tuple[str, str]:
    """Change one byte of one run record and one byte of one transcript (what the audit must catch)."""
    record = sorted((root / "runs").glob("*-run-*.json"))[len(list((root / "runs").glob("*"))) // 2]
    text = record.read_text()
    record.write_text(text.replace('"duration_s": 2.0', '"duration_s": 2.5', 1))
    transcripts = sorted((root / "evidence").glob("*-run-*/run.stdout.txt"))
    transcript = next(t for t in transcripts[min(1234, len(transcripts) // 2):]  # the same one at full size
                      if b"ok" in t.read_bytes())  # a passing run's (a failing one prints no "ok")
    transcript.write_bytes(transcript.read_bytes().replace(b"ok", b"OK", 1))
    return record.name, transcript.relative_to(root).as_posix()


def findings(root: Path) -> list[str]:
    """The rows of the audit report's Findings table (``--md`` beside the tree)."""
    text = (root.parent / "AUDIT.md").read_text()
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
    parser.add_argument("--out-file", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--since", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:
        hosts = sorted(p for p in args.hosts_dir.iterdir() if p.is_dir())
        print(json.dumps(step(args.step, args.root, hosts, args.out_file, args.since)))
        return 0

    tmp = tempfile.TemporaryDirectory(prefix="fleet-scale-") if args.keep is None else None
    work = Path(tmp.name) if tmp else args.keep
    hosts_dir, root, course, outs = work / "hosts", work / "merged", work / "course", work / "outputs"
    t0 = time.perf_counter()
    if not (course / ".git").is_dir():
        shutil.rmtree(course, ignore_errors=True)
        _tree_module().synthetic_tree(course, 0)  # the course alone: its commit is the one records name
        _git(course, "init", "-q", "-b", "main")
        commit_all(course, "the course")
    commit = _git(course, "rev-parse", "HEAD")
    if not hosts_dir.is_dir():
        hosts_dir.mkdir(parents=True)
        jobs = [(str(hosts_dir / f"host{h:02d}"), args.per_host, commit) for h in range(args.hosts)]
        with Pool(2) as pool:
            pool.map(_generate, jobs, chunksize=1)
    generated = time.perf_counter() - t0
    # The previous run's merged tree (--keep) is moved aside and deleted only after this run's merge: on ext4
    # without a journal the kernel passes over inodes freed in the last 60-300 s at every allocation, and a
    # merge right after millions of them were freed took 1.5-2.6 times as long (records/batch_write.py).
    old_root = work / f"merged.old-{os.getpid()}"
    if root.exists():
        root.rename(old_root)
    shutil.rmtree(outs, ignore_errors=True)
    outs.mkdir()
    subprocess.run(["git", "clone", "-q", str(course), str(root)], check=True)
    load0 = os.getloadavg()[0]
    merge = measured("merge", root, hosts_dir)
    t1 = time.perf_counter()
    merged_head = commit_all(root, "merge the fleet")
    committed = time.perf_counter() - t1
    for old in work.glob("merged.old-*"):  # a killed run's too
        shutil.rmtree(old, ignore_errors=True)
    audit_cold = measured("audit", root, hosts_dir, outs / "audit-cold.txt", cold=True)
    audit_findings = findings(root)
    audit_warm = measured("audit", root, hosts_dir, outs / "audit-warm.txt")
    status_cold = measured("status", root, hosts_dir, outs / "status-cold.txt", cold=True)
    status_warm = measured("status", root, hosts_dir, outs / "status-warm.txt")
    audit_warm2 = measured("audit", root, hosts_dir, outs / "audit-warm2.txt")  # the index status cold made afresh
    same = {
        "audit": (outs / "audit-cold.txt").read_text() == (outs / "audit-warm.txt").read_text()
        == (outs / "audit-warm2.txt").read_text(),
        "audit summary": (outs / "audit-cold.json").read_text() == (outs / "audit-warm.json").read_text()
        == (outs / "audit-warm2.json").read_text(),
        "status": (outs / "status-cold.txt").read_text() == (outs / "status-warm.txt").read_text(),
    }
    record, transcript = tamper(root)
    tampered_warm = measured("audit", root, hosts_dir, outs / "tampered-warm.txt")
    caught_warm = findings(root)
    tampered_cold = measured("audit", root, hosts_dir, outs / "tampered-cold.txt", cold=True)
    caught_cold = findings(root)
    _git(root, "checkout", "--", ".")  # the two changes undone
    extra = work / "one-session"
    shutil.rmtree(extra, ignore_errors=True)
    _generate((str(extra), 8, commit))
    measured("audit", root, hosts_dir)  # the index current again after the restore (not measured)
    from tileproof.fleet.merge import Source
    from tileproof.fleet.merge import merge as merge_trees

    added = len(merge_trees(root, [Source(base=extra)]).writes)
    since = measured("audit", root, hosts_dir, outs / "since.txt", since=merged_head)
    since_findings = findings(root)
    load1 = os.getloadavg()[0]
    n_records = len(list((root / "runs").glob("*.json")))
    n_evidence = sum(1 for p in (root / "evidence").rglob("*") if p.is_file())

    def row(name, r):
        return (f"{name}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, peak memory {r['tree_pss_mib']:.0f} MiB "
                f"(all its processes; its own maxrss {r['maxrss_mib']:.0f} MiB)")

    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}; load average {load0:.1f} before, {load1:.1f} after")
    print(f"hosts: {args.hosts} simulated hosts x {args.per_host} records (generated in {generated:.0f} s, "
          "not measured)")
    print(f"merged tree: {n_records} records in runs/, {n_evidence} evidence files; a git checkout (the merge "
          f"committed in {committed:.0f} s, not measured)")
    print(row(f"merge ({args.hosts} trees, every file written once, one durable barrier)", merge)
          + f"; {merge['written']} files written, {merge['same']} already there, {merge['skipped']} not merged")
    print(row("tileproof audit, cold (no index)", audit_cold)
          + f"; exit {audit_cold['exit']}, {len(audit_findings)} findings")
    print(f"  {audit_cold['last_line'].split('; wrote')[0]}")
    print(row("tileproof audit, warm", audit_warm) + f"; exit {audit_warm['exit']}")
    print(row("tileproof status, cold (no index)", status_cold)
          + f"; exit {status_cold['exit']}, {status_cold['lines']} lines")
    print(row("tileproof status, warm", status_warm) + f"; exit {status_warm['exit']}, {status_warm['lines']} lines")
    print(row("tileproof audit on the index status made (its records' facts only: every transcript hashed again)",
              audit_warm2) + f"; exit {audit_warm2['exit']}")
    print("identical output, index deleted vs warm: " + ", ".join(f"{k} {'yes' if v else 'NO'}"
                                                                  for k, v in same.items()))
    for label, r, caught in (("warm", tampered_warm, caught_warm), ("cold", tampered_cold, caught_cold)):
        print(row(f"tileproof audit after changing 1 record byte + 1 transcript byte, {label}", r)
              + f"; exit {r['exit']}, {len(caught)} findings")
        for line in caught:
            print(f"  {line[:160]}")
    print(row(f"tileproof audit --since HEAD after merging one {added}-file session", since)
          + f"; exit {since['exit']}, {len(since_findings)} findings")
    print(f"  {since['last_line'].split('; wrote')[0]}")

    def caught_both(caught):
        return (len(caught) == 4 and any(record in ln and "record-seal" in ln for ln in caught)
                and any(record in ln and "history-changed" in ln for ln in caught)
                and any(transcript in ln and "evidence-digest" in ln for ln in caught)
                and any(transcript in ln and "history-changed" in ln for ln in caught))

    ok = (audit_cold["exit"] == 0 and not audit_findings and all(same.values())
          and tampered_warm["exit"] != 0 and caught_both(caught_warm)
          and tampered_cold["exit"] != 0 and caught_both(caught_cold)
          and since["exit"] == 0 and not since_findings)
    print(f"audit correct at this scale (clean tree: 0 findings; tampered: exactly the 2 changes, warm and cold; "
          f"--since clean; outputs identical with the index deleted): {'yes' if ok else 'NO'}")
    steps = {"merge": merge, "audit cold": audit_cold, "audit warm": audit_warm, "status cold": status_cold,
             "status warm": status_warm, "audit warm (index from status)": audit_warm2,
             "tampered audit warm": tampered_warm, "tampered audit cold": tampered_cold, "audit --since": since}
    peak_name, peak = max(((k, max(r["maxrss_mib"], r["tree_pss_mib"])) for k, r in steps.items()),
                          key=lambda kv: kv[1])
    targets = [("status warm <= 5 s", status_warm["wall_s"], 5), ("status cold <= 60 s", status_cold["wall_s"], 60),
               ("full audit warm <= 20 s", audit_warm["wall_s"], 20), ("audit --since <= 3 s", since["wall_s"], 3),
               ("merge <= 60 s", merge["wall_s"], 60), (f"peak memory <= 1024 MiB ({peak_name})", peak, 1024)]
    print("fleet-scale targets, this run: " + "; ".join(f"{name}: {value:.1f}, {'met' if value <= limit else 'NOT met'}"
                                                     for name, value, limit in targets))
    if tmp is not None:
        tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
