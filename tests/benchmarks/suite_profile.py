"""Benchmark: where the CPU time of ``nox -s tests`` goes, by the kind of process that spends it.

Runs ``nox -s tests`` (pytest arguments after ``--`` are handed on) in this checkout under ``perf record -a``
(every CPU sampled at ``--hz``, whatever process runs) and reads, around it, the kernel's counters of busy CPU
time and of processes started (``/proc/stat``). The samples are grouped by the name of the process (or thread)
that was on the CPU: Python (the pytest workers and every Python process a test or tileproof starts), the CUDA
compilers a compile runs, git, the package installers, the headless browser, the rest; for the whole suite, the
Python samples are split again by process: pytest-xdist's workers (the busiest Python processes, one per core plus
one), which run the tests' own code, and every other Python process. A suite whose wall time
on two cores is bounded by its CPU time shortens only by spending less of it, so this says where to look.

    python tests/benchmarks/suite_profile.py [--hz 49] [-- PYTEST ARGS] > tests/benchmarks/suite_profile.txt

Needs ``perf`` (Linux) and the permission to sample every CPU (root, or ``perf_event_paranoid`` <= -1).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KINDS = (
    ("CUDA compilers", re.compile(r"(nvcc|cicc|cc1plus|cc1|cudafe\+\+|tileiras|ptxas|ld|as|nvlink|fatbinary|"
                                  r"cuobjdump|gcc|g\+\+|collect2)")),
    ("git", re.compile(r"git.*")),
    ("package installers (pip, uv)", re.compile(r"(pip|uv|__pip-runner__)")),
    ("headless browser", re.compile(r"(chromium|chrome.*|Chrome_.*|ThreadPoolForeg|VizCompositorTh|headless.*)")),
    ("Python (pytest workers, tileproof, every Python a test starts)", re.compile(r"(python.*|pytest.*|nox|tileproof|"
                                                                                   r"main2)")),
    ("idle", re.compile(r"swapper")),
)
"""A process name (``comm``: 15 characters at most) to the kind it is counted under; the first that matches."""


def stat() -> tuple[float, int]:
    """Busy CPU seconds of every core since boot (user, nice, system, irq, softirq) and processes started."""
    busy, forks = 0.0, 0
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu "):
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in line.split()[1:8])
            busy = (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
        elif line.startswith("processes "):
            forks = int(line.split()[1])
    return busy, forks


def kind_of(comm: str) -> str:
    return next((name for name, pattern in KINDS if pattern.fullmatch(comm)), "other")


def samples_by_comm(data: Path) -> Counter[str]:
    """``perf report``'s sample count by process name."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "comm", "-n", "-q"],
                         capture_output=True, text=True, check=True).stdout
    counts: Counter[str] = Counter()
    for line in out.splitlines():
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(.+?)\s*$", line)
        if m:
            counts[m[2]] += int(m[1])
    return counts


def python_by_process(data: Path, workers: int) -> tuple[float, int, float]:
    """The Python samples split by process: those of the ``workers`` busiest Python processes (pytest-xdist's
    workers, which run the tests themselves), how many other Python processes were sampled, and theirs."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "pid", "-n", "-q"],
                         capture_output=True, text=True, check=True).stdout
    python = sorted((int(m[1]) for m in re.finditer(r"^\s*[\d.]+%\s+(\d+)\s+\d+:(\S.*?)\s*$", out, re.MULTILINE)
                     if kind_of(m[2]).startswith("Python")), reverse=True)
    return sum(python[:workers]), len(python[workers:]), sum(python[workers:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hz", type=int, default=49, help="samples per second on each CPU (default 49)")
    parser.add_argument("pytest_args", nargs="*", help="after --: handed to nox -s tests")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        print("suite_profile: perf is not installed (fix: apt-get install linux-perf)", file=sys.stderr)
        return 2
    if shutil.which("nox") is None:
        print("suite_profile: nox is not on PATH (fix: . .nox-tool/bin/activate, the README's Quick start)",
              file=sys.stderr)
        return 2
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, check=True).stdout.strip())
    cores = len(os.sched_getaffinity(0))
    one, five, _ = os.getloadavg()
    cmd = ["nox", "-s", "tests", *(["--", *args.pytest_args] if args.pytest_args else [])]
    print(f"machine: {platform.machine()}, {cores} cores, Python {platform.python_version()}, "
          f"load {one:.1f}/{five:.1f} before; revision {head}{' (dirty)' if dirty else ''}")
    print(f"command: {' '.join(cmd)}, under perf record -a -F {args.hz}")
    with tempfile.TemporaryDirectory(prefix="suite-profile-") as tmp:
        data = Path(tmp) / "perf.data"
        busy0, forks0 = stat()
        t0 = time.perf_counter()
        done = subprocess.run(["perf", "record", "-q", "-a", "-F", str(args.hz), "-o", str(data), "--", *cmd],
                              cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        busy1, forks1 = stat()
        counts = samples_by_comm(data)
        workers = cores + 1  # noxfile.pytest_parallel: a worker per core plus one
        in_workers, others, in_others = python_by_process(data, workers)
    lines = (done.stdout + done.stderr).strip().splitlines()
    summary = next((ln for ln in reversed(lines) if re.search(r"\d+ passed|\d+ failed", ln)), "")
    one, five, _ = os.getloadavg()
    print(f"exit {done.returncode}: {summary.strip('= ') or (lines[-1] if lines else '')}")
    for line in lines:
        if line.startswith(("FAILED ", "ERROR ")):
            print(f"  {line}")
    print(f"wall {wall:.1f} s; busy CPU of the machine {busy1 - busy0:.0f} s (of {wall * cores:.0f} s on {cores} "
          f"cores); {forks1 - forks0} processes started; load {one:.1f}/{five:.1f} after")
    total = sum(counts.values())
    by_kind: Counter[str] = Counter()
    names: dict[str, Counter[str]] = {}
    for comm, n in counts.items():
        by_kind[kind_of(comm)] += n
        names.setdefault(kind_of(comm), Counter())[comm] += n
    print(f"\nCPU by kind of process ({total} samples at {args.hz} Hz on every core; seconds = samples / {args.hz}):")
    for kind, n in by_kind.most_common():
        top = ", ".join(f"{c} {v / args.hz:.0f} s" for c, v in names[kind].most_common(6))
        print(f"  {n / args.hz:7.1f} s  {100 * n / total:5.1f}%  {kind}: {top}")
    if not args.pytest_args:  # a selection runs in other processes (one file: pytest itself, no workers)
        print(f"\nPython by process: the {workers} busiest (pytest-xdist's workers: the tests' own code) "
              f"{in_workers / args.hz:.1f} s; {others} other Python processes sampled (tileproof commands, "
              f"programs, helpers a test starts) {in_others / args.hz:.1f} s")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
