"""Benchmark: a new user's setup, as the README says it, on fresh clones of this repository.

1. cold: ``git clone`` of HEAD into a temporary folder, empty package caches
   (a temporary ``UV_CACHE_DIR`` and ``PIP_CACHE_DIR``: everything is downloaded
   from PyPI), then the README's Quick start commands, each timed: the setup line,
   ``nox -s compile``, ``nox -s tests``;
2. warm: a fresh clone with the caches that step 1 filled, the same commands; three times, each in a new
   clone (``WARM_RUNS``), every pass printed and the target judged on their median;
3. in the warm clone, each light session once (its first run) and then three
   reruns, plus ``nox -R`` reruns; ``run-gpu`` without a GPU (refused before any
   install), ``run-gpu -- --record-no-gpu``, ``claims``, ``bench``: every session
   has run once. Then the size of ``.nox/``, ``.nox-tool/`` and both caches
   together (one ``du``, so the hard links from uv's cache count once);
4. cold ``compile`` of every default target in a third clone, timing the
   ``python -m tileproof compile`` process alone (the install is done first):
   tileproof's own time, as ``compile_bench.py`` measures it.

The Quick start commands are read from README.md (its first two ``sh`` blocks), so
this measures what the README says. Targets (issue 17): a rerun of any light
session <= 3 s; the README's two commands (compile, tests) <= 60 s together with a
warm package cache; ``.nox/`` plus caches <= 1 GB; cold compile <= 40 s.

    python tests/benchmarks/setup_bench.py > tests/benchmarks/setup_bench.txt
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WARM_RUNS = 3
"""Warm passes of the README's commands: on this shared 2-core machine one pass of the same work varied from
57 to 62 s, so the target is judged on the median of three fresh clones, and every pass is printed."""
LIGHT = {
    "status": [],
    "lint-kernels": [],
    "schema": [],
    "audit": [],
    "publish": ["--", "day79-cutile", "--dry-run"],
}


def quick_start() -> list[str]:
    """The command lines of README.md's Quick start ``sh`` blocks, in order."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)[:2]
    return [line.split("  #")[0].strip() for b in blocks for line in b.splitlines() if line.strip()]


def timed(cmd: str, cwd: Path, env: dict, check: bool = True) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if check and proc.returncode != 0:
        sys.exit(f"{cmd!r} failed ({proc.returncode}) in {cwd}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return wall, proc.returncode, lines[-1] if lines else ""


def clone(tmp: Path, name: str) -> Path:
    dest = tmp / name
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True)
    return dest


def readme_commands(root: Path, env: dict, label: str) -> float:
    """Run the Quick start lines in ``root``; print each; return compile + tests seconds."""
    env = {**env, "PATH": f"{root / '.nox-tool' / 'bin'}:{env['PATH']}"}
    total = 0.0
    for cmd in quick_start():
        wall, rc, last = timed(cmd, root, env, check=not cmd.startswith("nox -s tests"))
        if cmd.startswith("nox "):
            total += wall
        print(f"  {label:5} {wall:7.1f} s  exit {rc}  {cmd}   [{last[:110]}]", flush=True)
    return total


def du(paths: list[Path]) -> int:
    """Bytes on disk under ``paths``, one ``du`` so a hard-linked file counts once."""
    proc = subprocess.run(["du", "-skc", *map(str, paths)], capture_output=True, text=True)
    if proc.stderr.strip():
        print(f"  (du: {proc.stderr.strip().splitlines()[0]})")
    return int(proc.stdout.strip().splitlines()[-1].split()[0]) * 1024


def main() -> int:
    load = os.getloadavg()[0]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {load:.1f} before; HEAD {head}")
    print("README Quick start: " + " | ".join(quick_start()))
    with tempfile.TemporaryDirectory(prefix="setup-bench-") as t:
        tmp = Path(t)
        caches = {"UV_CACHE_DIR": tmp / "uv-cache", "PIP_CACHE_DIR": tmp / "pip-cache"}
        env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_CACHE_DIR", "PIP_CACHE_DIR")},
               **{k: str(v) for k, v in caches.items()}}
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "/.venv/" not in p)

        print("1. fresh clone, empty package caches (downloads from PyPI):")
        cold = readme_commands(clone(tmp, "cold"), env, "cold")
        print(f"   (load average {os.getloadavg()[0]:.1f})")
        print(f"2. fresh clone, warm package caches, {WARM_RUNS} times (a new clone each; the target: their median):")
        shutil.rmtree(tmp / "cold")
        warms, warm_root = [], tmp / "warm"
        for i in range(WARM_RUNS):
            shutil.rmtree(warm_root, ignore_errors=True)
            warm_root = clone(tmp, "warm")
            warms.append(readme_commands(warm_root, env, f"warm{i + 1}"))
        warm = statistics.median(warms)

        print(f"   (load average {os.getloadavg()[0]:.1f})")
        print("3. light sessions in the warm clone: first run, then 3 reruns (and 3 with -R)")
        wenv = {**env, "PATH": f"{warm_root / '.nox-tool' / 'bin'}:{env['PATH']}"}
        worst = 0.0
        for name, extra in LIGHT.items():
            first, rc, _last = timed(f"nox -s {name} {' '.join(extra)}", warm_root, wenv, check=False)
            reruns = [timed(f"nox -s {name} {' '.join(extra)}", warm_root, wenv, check=False)[0] for _ in range(3)]
            fast = [timed(f"nox -R -s {name} {' '.join(extra)}", warm_root, wenv, check=False)[0] for _ in range(3)]
            worst = max(worst, *reruns)
            print(f"  {name:13} exit {rc}; first {first:5.2f} s; rerun {' '.join(f'{r:.2f}' for r in reruns)} s "
                  f"(median {statistics.median(reruns):.2f}); -R {' '.join(f'{r:.2f}' for r in fast)} s")
        for cmd, check in (("nox -s compile", True), ("nox -s run-gpu", False)):
            wall, rc, last = timed(cmd, warm_root, wenv, check=check)
            print(f"  {cmd:28} {wall:6.2f} s, exit {rc}  [{last[:110]}]")
        for cmd in ("nox -s run-gpu -- --record-no-gpu", "nox -s bench", "nox -s claims", "nox -s lock"):
            wall, rc, last = timed(cmd, warm_root, wenv, check=False)
            print(f"  {cmd:34} {wall:6.1f} s, exit {rc}  [{last[:100]}]")
        size = du([warm_root / ".nox", warm_root / ".nox-tool", *caches.values()])
        nox_only = du([warm_root / ".nox"])
        print(f"  size after every session ran once: .nox/ + .nox-tool/ + uv cache + pip cache = "
              f"{size / 2**30:.2f} GiB (.nox/ alone, its hard links to the cache counted: {nox_only / 2**30:.2f} GiB)")

        print(f"   (load average {os.getloadavg()[0]:.1f})")
        print("4. cold compile of every default target in a fresh clone (tileproof's process alone):")
        third = clone(tmp, "compile")
        timed("nox --install-only -s compile", third, wenv)
        wall, _rc, last = timed(".nox/toolchain/bin/python -m tileproof compile", third, wenv)
        print(f"  cold compile: {wall:.1f} s  [{last[:140]}]")
    print(f"load average {os.getloadavg()[0]:.1f} after")
    print("targets:")
    print(f"  rerun of any light session <= 3 s: {'met' if worst <= 3 else 'NOT met'} (worst rerun {worst:.2f} s)")
    print(f"  README's two commands (compile + tests) <= 60 s with a warm cache: "
          f"{'met' if warm <= 60 else 'NOT met'} (median {warm:.1f} s of {', '.join(f'{w:.1f}' for w in warms)}; "
          f"cold caches {cold:.1f} s)")
    print(f"  .nox/ plus caches <= 1 GB: {'met' if size <= 1e9 else 'NOT met'} ({size / 1e9:.2f} GB)")
    print(f"  cold compile <= 40 s of tileproof's time: {'met' if wall <= 40 else 'NOT met'} ({wall:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
