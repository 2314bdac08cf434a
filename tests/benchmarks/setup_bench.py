"""Benchmark: the README's two commands and the contributor's loop, on fresh clones, warm package cache.

For each revision measured (this checkout's HEAD, and with ``--against REV`` that one as well, the two
in turn, ``--runs`` times: a paired comparison on the same machine under the same load), in a fresh
``git clone`` with uv's and pip's caches as they are (warm: what a returning user or CI with a cache has):

1. the README's Quick start setup line (nox with uv in ``.nox-tool/``), timed;
2. ``nox -s compile``, cold (an empty build cache): the toolchain environment made from uv's cache, then
   every program built for every default target;
3. ``nox -s tests``, cold (its first run in the clone: no bytecode cached), then again (warm), then the suite
   without its end-to-end tests (``QUICK``: pytest alone, every test not marked ``slow``);
4. ``nox -s tests -- tests/test_lock.py``: one test file, twice (the first run in the clone compiles the bytecode
   of what it imports; the second is what a contributor's rerun costs).

The machine's load average is printed before and after every command (``os.getloadavg``): on a shared
machine a number means little without it, and the paired revision says what the load did to both.

The Quick start lines are read from README.md (its first two ``sh`` blocks), so this measures what the
README says. Targets: the README's two commands (setup line + compile, and the full ``nox -s tests``)
<= 120 s together, cold; ``nox -s tests`` warm <= 90 s; one test file's rerun <= 3 s.

    python tests/benchmarks/setup_bench.py [--against REV] [--runs N] > tests/benchmarks/setup_bench.txt

``--no-suite`` leaves the two full ``nox -s tests`` runs out (a check that the script works, in minutes).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ONE_FILE = "tests/test_lock.py"
QUICK = "nox -s tests -- -m 'not slow'"
"""The contributor's quick tier (docs/commands.md): every test but those that say why they must be slow."""
TARGETS = {"readme": 120.0, "tests warm": 90.0, "one file again": 3.0}
"""Seconds: the README's two commands together (cold), ``nox -s tests`` warm, one test file (its rerun: the first
run in a clone also compiles the bytecode of everything it imports)."""


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


def quick_start(readme: Path) -> list[str]:
    """The command lines of README.md's Quick start ``sh`` blocks, in order."""
    section = readme.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)[:2]
    return [line.split("  #")[0].strip() for b in blocks for line in b.splitlines() if line.strip()]


def children_cpu() -> float:
    """CPU seconds (user + system) of every process this one has waited for, their own waited-for children included."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(cmd: str, cwd: Path, env: dict) -> tuple[float, float, int, str]:
    """Run ``cmd`` in bash; print it with its wall time, its CPU time (user + system, every process it waited
    for: what the load changes least), exit code, last line and the load around it."""
    before = load()
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    cpu = children_cpu() - cpu0
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    last = lines[-1] if lines else ""
    print(f"    {wall:7.1f} s  {cpu:7.1f} s CPU  exit {proc.returncode}  {cmd}   [{last[:100]}]  "
          f"({before} before, {load()} after)", flush=True)
    if proc.returncode != 0:
        print("\n".join(f"      | {ln}" for ln in lines[-15:]))
    return wall, cpu, proc.returncode, last


def one_pass(rev: str, tmp: Path, env: dict, suite: bool) -> dict[str, float]:
    """Every measured command in a fresh clone of ``rev``; wall seconds by step, and each step's CPU seconds under
    ``STEP cpu``."""
    root = tmp / f"clone-{rev}"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "advice.detachedHead=false", "checkout", "-q", rev], check=True)
    env = {**env, "PATH": f"{root / '.nox-tool' / 'bin'}:{env['PATH']}"}
    setup, compile_cmd, *rest = quick_start(root / "README.md")
    got: dict[str, float] = {}

    def step(name: str, cmd: str) -> None:
        got[name], got[f"{name} cpu"], _code, _last = timed(cmd, root, env)

    step("setup", setup)
    step("compile", compile_cmd)
    if suite:
        step("tests cold", "nox -s tests")
        step("tests warm", "nox -s tests")
        step("tests quick", QUICK)
    step("one file", f"nox -s tests -- {ONE_FILE}")
    step("one file again", f"nox -s tests -- {ONE_FILE}")
    if suite:
        got["readme"] = got["setup"] + got["compile"] + got["tests cold"]
        got["readme cpu"] = got["setup cpu"] + got["compile cpu"] + got["tests cold cpu"]
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", metavar="REV", help="also measure this revision, paired pass by pass")
    parser.add_argument("--runs", type=int, default=1, help="passes per revision (default 1)")
    parser.add_argument("--no-suite", action="store_true", help="leave the full nox -s tests runs out")
    args = parser.parse_args()

    def short(rev: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], capture_output=True,
                              text=True, check=True).stdout.strip()

    revs = [short("HEAD"), *([short(args.against)] if args.against else [])]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{load()} before; revisions {' and '.join(revs)} (paired, {args.runs} pass(es) each)")
    print("README Quick start: " + " | ".join(quick_start(REPO / "README.md")))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "/.venv/" not in p and "/.nox" not in p)
    results: dict[str, list[dict[str, float]]] = {r: [] for r in revs}
    with tempfile.TemporaryDirectory(prefix="setup-bench-") as t:
        for i in range(args.runs):
            for rev in revs:
                print(f"  pass {i + 1}, {rev}: fresh clone, warm package cache", flush=True)
                results[rev].append(one_pass(rev, Path(t), env, not args.no_suite))
    print(f"{load()} after")
    print("medians (s; 'cpu': user + system of the step's processes):")
    steps = list(results[revs[0]][0])
    print("  " + f"{'step':20}" + "".join(f"{r:>12}" for r in revs))
    for step in steps:
        print("  " + f"{step:20}" + "".join(f"{statistics.median(p[step] for p in results[r]):12.1f}" for r in revs))
    head = {s: statistics.median(p[s] for p in results[revs[0]]) for s in steps}
    print(f"targets ({revs[0]}):")
    for step, limit in TARGETS.items():
        if step in head:
            print(f"  {step} <= {limit:g} s: {'met' if head[step] <= limit else 'NOT met'} ({head[step]:.1f} s)")
        else:
            print(f"  {step} <= {limit:g} s: not measured (--no-suite)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
