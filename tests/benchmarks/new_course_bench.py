"""A new course from an empty folder, timed step by step: the path tests/test_package.py checks, with a warm
package cache (pip's and uv's), as a new author takes it.

    python tests/benchmarks/new_course_bench.py [--out FILE]

Steps: a venv with nox[uv]; the wheel built from this checkout (``uv build``, what ``nox -s build`` runs) and
installed; ``git init``; ``tileproof init``; the first commit; ``nox -s new-lesson`` with both programs;
``nox -s compile -- --arch sm_90``; ``nox -s tests``; ``tileproof audit``. Each line: wall seconds, CPU seconds
of the step's processes (user + sys, children included), exit status and the load average before it; the
machine may be shared, so the CPU time is the number to compare.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "author", "GIT_AUTHOR_EMAIL": "author@example.org", "GIT_COMMITTER_NAME": "author",
           "GIT_COMMITTER_EMAIL": "author@example.org"}


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args()
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tileproof-new-course-") as tmp:
        work = Path(tmp)
        tool, course, dist = work / "tool", work / "course", work / "dist"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "NOX", "TILEPROOF"))}
        env |= GIT_ENV | {"PATH": f"{tool / 'bin'}{os.pathsep}{env['PATH']}",
                          "TILEPROOF_SIGNING_KEY": str(work / "keys" / "signing-key.pem")}
        steps = [
            (work, [sys.executable, "-m", "venv", str(tool)]),
            (work, [str(tool / "bin" / "pip"), "install", "-q", "nox[uv]"]),
            (work, [str(tool / "bin" / "uv"), "build", "-q", "--wheel", "-o", str(dist), str(REPO)]),
            (work, ["sh", "-c", f"{tool / 'bin' / 'pip'} install -q {dist}/tileproof-*.whl"]),
            (work, ["mkdir", str(course)]),
            (course, ["git", "init", "-q"]),
            (course, ["tileproof", "init"]),
            (course, ["sh", "-c", "git add -A && git commit -qm 'a tileproof course'"]),
            (course, ["nox", "-s", "new-lesson", "--", "first-lesson", "--python", "first_kernel", "--cpp",
                      "first_host"]),
            (course, ["sh", "-c", "git add -A && git commit -qm 'first lesson'"]),
            (course, ["nox", "-s", "compile", "--", "--arch", "sm_90"]),
            (course, ["nox", "-s", "tests"]),
            (course, ["tileproof", "audit"]),
        ]
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        lines.append(f"new course from an empty folder, warm pip and uv caches; {os.cpu_count()} cores; "
                     f"tileproof at {head}")
        wall0, cpu0, failed = time.monotonic(), cpu(), False
        for cwd, argv in steps:
            load = os.getloadavg()[0]
            w, c = time.monotonic(), cpu()
            done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
            shown = " ".join(a.replace(str(work), "$WORK").replace(str(REPO), "$REPO") for a in argv)
            lines.append(f"{time.monotonic() - w:7.1f} s wall {cpu() - c:6.1f} s cpu  exit {done.returncode}  "
                         f"load {load:4.1f}  {shown}")
            if done.returncode != 0:
                lines.append((done.stdout + done.stderr)[-2000:])
                failed = True
                break
            last = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
            if argv[0] == "tileproof" and argv[1] == "audit" and last:
                lines.append(f"        {last[-1][:160]}")
        lines.append(f"{time.monotonic() - wall0:7.1f} s wall {cpu() - cpu0:6.1f} s cpu  in all (target: 300 s)")
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.out:
        args.out.write_text(report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
