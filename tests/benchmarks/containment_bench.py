"""Benchmark: containment of runaway programs, no GPU needed.

For each containment that holds on this machine (``TILEPROOF_CONTAINMENT``; ``marker`` is the
older mechanism, unchanged) it reports:

* ``per child``: the cost of one contained start, ``start_and_wait`` of ``/bin/true`` and of
  ``python -c pass`` (a lesson program is a Python process) 40 times each: median and 90th
  percentile wall time, and the CPU time of tileproof plus its children per start (CPU time is
  the steadier number on a shared machine);
* ``hang``: ``python -m tileproof run --timeout 3`` on a fake program whose grandchildren call
  ``setsid sleep infinity`` (keeping the pipes open) and ``env -i setsid -f sleep`` (no marker, its
  parent gone at once): the command's wall time, the step's duration, the strays killed, and which
  grandchildren are left (target: step < 5 s, none left);

and once, for the default containment, ``flood``: a program printing 300 MB; tileproof's peak RSS
(``ru_maxrss`` of the command) and the size of the transcript kept (target: memory bounded by the
16 MiB cap, not 300 MB).

``wall``: the same per-child starts behind each wall that holds here (``TILEPROOF_ISOLATION``: ``separate-user``
as root, ``user-namespace``), as a program starts (``start_and_wait`` with a ``Wall`` reading a checkout and
writing a report folder), against today's start without one (the first containment that holds: a program before
the wall started so); target: at most 50 ms per step over it. The ``hang`` rows of the containments run with
``TILEPROOF_ISOLATION=none`` (a program behind the wall is always in a PID namespace); ``wall`` there is the
default, behind the wall.

    python tests/benchmarks/containment_bench.py > tests/benchmarks/containment_bench.txt
"""

from __future__ import annotations

import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tileproof.records.errors import TileproofError  # noqa: E402
from tileproof.records.store import load_record  # noqa: E402
from tileproof.runner import process  # noqa: E402
from tileproof.runner.environment import child_env  # noqa: E402
from tileproof.runner.wall import Wall  # noqa: E402

HANG = '''AOT_SIGNATURES = {}
import subprocess, sys, time
from pathlib import Path
names = Path(__file__).with_suffix(".names").read_text().split()
subprocess.Popen(["setsid", names[0], "infinity"])
subprocess.run(["env", "-i", "setsid", "-f", names[1], "infinity"])
subprocess.run(["sleep", "infinity"])
'''
FLOOD = '''AOT_SIGNATURES = {}
import sys
chunk = "z" * (1 << 20)
for _ in range(300):
    sys.stdout.write(chunk)
'''
STARTS = 40


def left(name: str) -> bool:
    """Whether a live process of that (fresh) name is left."""
    out = subprocess.run(["ps", "-e", "-o", "stat=,comm="], capture_output=True, text=True, timeout=30).stdout
    return any(line.split()[1:] == [name] and not line.startswith("Z") for line in out.splitlines())


def named_sleep(folder: Path) -> Path:
    link = folder / ("tp" + secrets.token_hex(6))
    link.symlink_to(shutil.which("sleep") or "/bin/sleep")
    return link


def command(root: Path, program: str, kind: str) -> tuple[float, int, dict, str]:
    """Wall seconds, the child's peak RSS in KiB, the run record and the command's last line. ``kind``: a
    containment (the program without a wall), or ``wall`` (behind the wall, as by default)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    bare = {process.CONTAIN_VAR: kind, process.ISOLATE_VAR: "none"} if kind != "wall" else {}
    env = {**os.environ, **bare}
    proc = subprocess.run([sys.executable, "-m", "tileproof", "run", "--program", program, "--timeout", "3",
                           "--record-no-gpu", "--root", str(root)], capture_output=True, text=True, cwd=REPO,
                          env=env)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    records = [load_record(p, root) for p in sorted((root / "runs").glob("*-run-*.json"))]  # signed or not
    runs = [r.model_dump(mode="json") for r in records if r.program == f"kernels/{program}.py"]
    if len(runs) <= command.seen.get(program, 0):  # type: ignore[attr-defined]
        raise SystemExit(f"{program} under {kind}: no new run record: {proc.stdout + proc.stderr}")
    command.seen[program] = len(runs)  # type: ignore[attr-defined]
    rec = runs[-1]
    return wall, max(rss, before), rec, (proc.stdout.strip().splitlines() or ["(no output)"])[-1]


command.seen = {}  # type: ignore[attr-defined]


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def per_child(argv: list[str], root: Path | None = None) -> str:
    """``STARTS`` starts of ``argv``; behind the wall when ``root`` (its checkout) is given."""
    def start() -> process.Finished:
        if root is None:
            return process.start_and_wait(argv, env=child_env(), timeout=60)
        with process.scratch_dir() as tmp:
            return process.start_and_wait(argv, env=child_env(), cwd=root, timeout=60, scratch=tmp,
                                          wall=Wall(root, (tmp,)))

    start()  # warm: the choice is made, the files cached
    walls = []
    cpu0 = cpu_s()
    for _ in range(STARTS):
        t0 = time.perf_counter()
        done = start()
        walls.append(time.perf_counter() - t0)
        assert done.exit_code == 0, done
    cpu = (cpu_s() - cpu0) / STARTS
    walls.sort()
    return (f"median {statistics.median(walls) * 1000:6.1f} ms, p90 {walls[int(len(walls) * 0.9)] * 1000:6.1f} ms, "
            f"cpu {cpu * 1000:5.1f} ms")


def main() -> int:
    kinds = []
    for kind in process.CONTAINMENTS:
        os.environ[process.CONTAIN_VAR] = kind
        process.containment.cache_clear()
        try:
            process.containment()
        except TileproofError as e:
            print(f"{kind}: does not hold here: {e}")
            continue
        kinds.append(kind)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"per child ({STARTS} starts each; marker: the older mechanism); {os.cpu_count()} CPUs, "
          f"load average {load}")
    for kind in kinds:
        os.environ[process.CONTAIN_VAR] = kind
        process.containment.cache_clear()
        print(f"  {kind:13} /bin/true:        {per_child([shutil.which('true') or '/bin/true'])}")
        print(f"  {kind:13} python -c pass:   {per_child([sys.executable, '-c', 'pass'])}")
    del os.environ[process.CONTAIN_VAR]
    process.containment.cache_clear()
    print(f"wall (per step, against today's start without one: {process.containment()}, above)")
    with tempfile.TemporaryDirectory() as checkout:
        os.chmod(checkout, 0o755)
        for level in [w for w in process.ISOLATIONS if w != "none"]:
            os.environ[process.ISOLATE_VAR] = level
            process.isolation.cache_clear()
            try:
                process.isolation()
            except TileproofError as e:
                print(f"  {level}: does not hold here: {e}")
                continue
            print(f"  {level:14} /bin/true:       {per_child([shutil.which('true') or '/bin/true'], Path(checkout))}")
            print(f"  {level:14} python -c pass:  {per_child([sys.executable, '-c', 'pass'], Path(checkout))}")
        del os.environ[process.ISOLATE_VAR]
        process.isolation.cache_clear()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        root.chmod(0o755)  # as a checkout is: a separate-user program reads it
        for folder in ("kernels", "lessons"):
            shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
        (root / "cpp").mkdir()
        (root / "kernels" / "hang.py").write_text(HANG)
        (root / "kernels" / "flood.py").write_text(FLOOD)

        print("hang: setsid sleep infinity and env -i setsid -f sleep grandchildren, --timeout 3")
        for kind in [*kinds, "wall"]:
            sleeps = [named_sleep(root), named_sleep(root)]
            (root / "kernels" / "hang.names").write_text(" ".join(str(s) for s in sleeps))
            wall, _, rec, _ = command(root, "hang", kind)
            time.sleep(0.5)
            got = [left(s.name) for s in sleeps]
            print(f"  {kind:13} command wall {wall:.2f} s; step {rec['step']['duration_s']:.2f} s; verdict "
                  f"{rec['verdict']}; recorded {rec['step'].get('containment')}, isolation "
                  f"{rec['step'].get('isolation')}; strays killed "
                  f"{rec['step']['strays_killed']}; left: setsid {got[0]}, env -i setsid -f {got[1]}")
            for s in sleeps:
                subprocess.run(["pkill", "-KILL", "-x", s.name], check=False, timeout=30)

        print("flood: 300 MB on stdout")
        wall, rss, rec, line = command(root, "flood", "wall")
        kept = rec["step"]["stdout"]["bytes"]
        cut = rec["step"]["stdout_cut"]
        print(f"  {rec['step']['containment']}, {rec['step']['isolation']}: command wall {wall:.2f} s; peak RSS of "
              f"the largest child {rss / 1024:.0f} MiB; transcript {kept / 2**20:.1f} MiB; cut {cut}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
