"""Experiment: the course's cuTile Python kernels exported ahead of time (no GPU) by each cuda-tile release, with a
tileiras inside the range that release declares and with tileiras 13.4 where 13.4 is outside it.

Each combination gets its own environment (uv, under ``--venvs``, default /tmp/rel; never in the repository):
that cuda-tile wheel alone (``--no-deps``), the tileiras/nvvm/nvcc/crt/runtime/cuobjdump packages of one CUDA
release, and tileproof's own dependencies; tileproof itself comes from this checkout through PYTHONPATH. In a
temporary copy of kernels/ it runs ``python -m tileproof compile --python-only --arch sm_90 --arch sm_80``, with
``--tileiras-outside-range`` exactly when tileproof's own range rule (``toolchain.cuda_tile``, reading the
installed release's metadata) says the tileiras is outside it, and reads the compile record it wrote: each
kernel and target's verdict, the export's exit code and the exception it raised (``BuildResult.failure``:
type and message, typed; the message's lines are shown joined by ``|``). Nothing is read from the printed text.

    python tests/benchmarks/release_matrix.py [--venvs /tmp/rel] [--python python3.12] \\
        > tests/benchmarks/release_matrix.txt
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tileproof.records.models import CompileRecord
from tileproof.records.store import load_records

REPO = Path(__file__).resolve().parents[2]
COMBOS = [("1.3.0", "13.2"), ("1.3.0", "13.4"), ("1.4.0", "13.2"), ("1.4.0", "13.3"), ("1.4.0", "13.4"),
          ("1.5.0", "13.2"), ("1.5.0", "13.3"), ("1.5.0", "13.4"), ("1.6.0", "13.4"), ("1.7.0", "13.4")]
"""(cuda-tile, CUDA release of the toolchain): every in-range tileiras the issue names, and 13.4 beside each."""
TOOLCHAIN = ["nvidia-cuda-tileiras", "nvidia-nvvm", "nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-cuda-runtime",
             "nvidia-cuda-cuobjdump"]
TILEPROOF_DEPS = ["pydantic", "pyyaml", "filelock", "cryptography", "packaging", "typing-extensions", "numpy"]
TARGETS = ["sm_90", "sm_80"]
IN_RANGE = ("import importlib.metadata as md; from tileproof.toolchain import cuda_tile; "
            "print(cuda_tile.release(md.version('nvidia-cuda-tileiras'), True).in_range)")


def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        sys.exit("uv is needed (pip install uv, or activate the nox tool environment)")
    return found


def environment(venvs: Path, python: str, cuda_tile: str, cuda: str) -> Path:
    """The combination's venv, made once (a ``.done`` stamp marks a complete one)."""
    venv = venvs / f"ct{cuda_tile}-tileiras{cuda}"
    if (venv / ".done").is_file():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([uv(), "venv", "-q", "-p", python, str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([uv(), "pip", "install", "-q", "--python", py, "--no-deps", f"cuda-tile=={cuda_tile}"], check=True)
    subprocess.run([uv(), "pip", "install", "-q", "--python", py, *TILEPROOF_DEPS,
                    *(f"{name}=={cuda}.*" for name in TOOLCHAIN)], check=True)
    (venv / ".done").write_text("")
    return venv


def exported(venv: Path) -> tuple[bool | None, float, int, CompileRecord | None, str]:
    """(in range, wall seconds, exit status, the compile record, tileproof's last line) of one combination."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("VIRTUAL_ENV", None)
    py = str(venv / "bin" / "python")
    fits = subprocess.run([py, "-c", IN_RANGE], env=env, capture_output=True, text=True, check=True).stdout.strip()
    in_range = {"True": True, "False": False}.get(fits)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "course"  # mode 755: a walled build step (another uid) reads it; the temp folder is 700
        root.mkdir()
        shutil.copytree(REPO / "kernels", root / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
        argv = [py, "-m", "tileproof", "compile", "--python-only", *(f"--arch={t}" for t in TARGETS)]
        argv += [] if in_range else ["--tileiras-outside-range"]
        t0 = time.perf_counter()
        done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        records = [r for r in load_records(root) if isinstance(r, CompileRecord)] if (root / "runs").is_dir() else []
        last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or [""])[-1]
        return in_range, wall, done.returncode, records[-1] if records else None, last


def lines_of(message: str, width: int = 150) -> str:
    text = " | ".join(ln.strip() for ln in message.splitlines() if ln.strip())
    return text if len(text) <= width else text[:width - 3] + "..."


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--venvs", type=Path, default=Path("/tmp/rel"))
    parser.add_argument("--python", default="python3.12", help="the interpreter of each environment (a GPU node's)")
    args = parser.parse_args()
    args.venvs.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average before: {os.getloadavg()[0]:.1f}; "
          f"kernels exported for {', '.join(TARGETS)} (no GPU), one environment per combination")
    summary = []
    for cuda_tile, cuda in COMBOS:
        venv = environment(args.venvs, args.python, cuda_tile, cuda)
        versions = json.loads(subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import importlib.metadata as m, json, sys; print(json.dumps("
             "[m.version('cuda-tile'), m.version('nvidia-cuda-tileiras'), sys.version.split()[0]]))"],
            capture_output=True, text=True, check=True).stdout)
        in_range, wall, code, record, last = exported(venv)
        where = "inside its range" if in_range else "OUTSIDE its range (--tileiras-outside-range)"
        print(f"\n== cuda-tile {versions[0]} + tileiras {versions[1]} (Python {versions[2]}): {where}; "
              f"compile exit {code}, {wall:.1f} s")
        if record is None:
            print(f"   no compile record: {last}")
            summary.append((cuda_tile, cuda, in_range, {t: "no record" for t in TARGETS}))
            continue
        assert record.cuda_tile is not None
        assert record.cuda_tile.version == versions[0]
        assert record.cuda_tile.in_range == in_range
        cells = {}
        for target in TARGETS:
            builds = sorted((b for b in record.builds if b.target == target), key=lambda b: (b.program, b.kernel))
            built = [b for b in builds if b.verdict == "built"]
            cells[target] = f"{len(built)}/{len(builds)} built"
            print(f"   {target}: {len(built)} of {len(builds)} kernels built")
            for b in builds:
                if b.verdict != "built":
                    step = b.step.exit_code if b.step else None
                    raised = f"{b.failure.type}: {lines_of(b.failure.message)}" if b.failure else "no exception"
                    print(f"     {b.verdict} {b.program}:{b.kernel} (exit {step}): {raised}")
        summary.append((cuda_tile, cuda, in_range, cells))
    print("\nsummary (cuda-tile x tileiras x target):")
    print(f"  {'cuda-tile':10} {'tileiras':9} {'range':8} " + " ".join(f"{t:12}" for t in TARGETS))
    for cuda_tile, cuda, in_range, cells in summary:
        print(f"  {cuda_tile:10} {cuda:9} {'inside' if in_range else 'OUTSIDE':8} "
              + " ".join(f"{cells[t]:12}" for t in TARGETS))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
