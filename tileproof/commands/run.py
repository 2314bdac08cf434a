"""``tileproof run``: run lesson programs on this machine's GPU, record each run.

The environment is captured once per session (pip freeze, nvidia-smi, versions,
allowlisted variables); each program then gets its own run record, written as
soon as it finishes. A session record closes the session: one without it was
interrupted, and the records written so far stay as they are.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tileproof.fleet import devices
from tileproof.records import lessons
from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    Environment,
    FileDigest,
    GpuFacts,
    RunRecord,
    SessionRecord,
)
from tileproof.records.parsers import parse_gpu_query
from tileproof.records.store import (
    digest,
    header,
    new_run_id,
    sha256_file,
    write_evidence,
    write_record,
)
from tileproof.runner.capture import (
    GPU_QUERY_ARGV,
    env_allowlisted,
    git_state,
    host_facts,
    installed_packages,
    pip_freeze,
)
from tileproof.runner.execute import run_program
from tileproof.runner.locate import compile_records, find_binary
from tileproof.toolchain.build import DEFAULT_TARGETS, dependencies, programs
from tileproof.toolchain.find import HAZARD_VARS, runtime_tools


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help="lesson ids (default: every program)")
    parser.add_argument("--program", action="append", default=[], metavar="NAME",
                        help="a program path or file name (repeatable)")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--devices", default=None, metavar="all|N,M",
                        help="every listed GPU at once, one run session per GPU (tileproof.fleet.devices)")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="S", help="per-program timeout in seconds")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")


def select(root: Path, lesson_ids: list[str], names: list[str]) -> tuple[list[Path], dict[str, list]]:
    """Programs to run, and every lesson's front matter keyed by id."""
    every = programs(root, "kernels") + programs(root, "cpp")
    all_lessons = {l.id: l for l in lessons.load_all(root)}
    chosen = every
    if lesson_ids:
        wanted = {p.path for i in lesson_ids for p in lessons.load(root, i).front.programs}
        chosen = [p for p in every if p.relative_to(root).as_posix() in wanted]
    if names:
        def matches(p: Path) -> bool:
            rel = p.relative_to(root).as_posix()
            return any(n in (rel, p.name, p.stem) for n in names)
        unknown = [n for n in names if not any(n in (p.relative_to(root).as_posix(), p.name, p.stem) for p in every)]
        if unknown:
            raise TileproofError(f"--program {unknown[0]}: no such program under kernels/ or cpp/ "
                                 f"(known: {', '.join(p.stem for p in every)})")
        chosen = [p for p in chosen if matches(p)]
    return chosen, all_lessons


def gpu_facts(root: Path, session_id: str, device: int, env: dict[str, str]):
    """nvidia-smi raw + query transcripts, parsed; cupy's view of the capability."""
    if shutil.which("nvidia-smi", path=env.get("PATH")) is None:
        return None, None, None, "nvidia-smi not found: no NVIDIA driver on this machine"
    with ThreadPoolExecutor(max_workers=3) as pool:
        runtime = pool.submit(runtime_capability, device, env)
        raw_f = pool.submit(subprocess.run, ["nvidia-smi"], capture_output=True, env=env)
        query_f = pool.submit(subprocess.run, GPU_QUERY_ARGV, capture_output=True, env=env)
        raw, query, runtime_cc = raw_f.result(), query_f.result(), runtime.result()
    smi = write_evidence(root, session_id, "nvidia-smi.txt", raw.stdout + raw.stderr)
    smi_q = write_evidence(root, session_id, "nvidia-smi-query.csv", query.stdout + query.stderr)
    rows = parse_gpu_query(query.stdout.decode(errors="replace")) if query.returncode == 0 else []
    row = next((r for r in rows if r["index"] == device), None)
    if row is None:
        return None, smi, smi_q, f"nvidia-smi lists no GPU {device} (exit {query.returncode})"
    facts = GpuFacts(runtime_compute_capability=runtime_cc, **row)
    return facts, smi, smi_q, None


def runtime_capability(device: int, env: dict[str, str]) -> str | None:
    """Compute capability as the CUDA runtime (through cupy) reports it."""
    code = ("import cupy, sys; p = cupy.cuda.runtime.getDeviceProperties(int(sys.argv[1])); "
            "print(f\"{p['major']}.{p['minor']}\")")
    proc = subprocess.run([sys.executable, "-c", code, str(device)], capture_output=True, text=True, env=env)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def versions() -> dict[str, str | None]:
    pk = installed_packages()
    return {
        "cuda-tile": pk.get("cuda-tile"),
        "cupy": next((v for k, v in pk.items() if k.startswith("cupy")), None),
        "numpy": pk.get("numpy"),
        "python": platform.python_version(),
        "os": platform.platform(),
        "kernel": platform.release(),
    }


def child_env(device: int) -> dict[str, str]:
    """The programs' environment: hazard variables removed, one GPU visible."""
    env = {k: v for k, v in os.environ.items() if k not in HAZARD_VARS}
    env["CUDA_VISIBLE_DEVICES"] = str(device)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    if args.devices is not None:
        return devices.fan_out(args.devices, args.lessons, args.program, args.timeout, root)
    chosen, all_lessons = select(root, args.lessons, args.program)
    if not chosen:
        raise TileproofError("no programs selected (fix: name a lesson with programs, or drop --program)")
    session_id = new_run_id("session")
    env = child_env(args.device)
    with ThreadPoolExecutor(max_workers=2) as pool:  # pip freeze runs while the GPU is probed
        freeze = pool.submit(pip_freeze)
        gpu, smi, smi_q, no_gpu = gpu_facts(root, session_id, args.device, dict(os.environ))
        frozen = freeze.result()
    target = f"sm_{gpu.compute_capability.replace('.', '')}" if gpu else DEFAULT_TARGETS[0]
    if no_gpu:
        print(f"run: no usable GPU: {no_gpu}; each program's own gate is recorded and the run fails")
    pkgs = installed_packages()
    records = compile_records(root)
    binaries = {p: find_binary(root, p, target, records) for p in chosen if p.suffix == ".cu"}
    nvcc_versions = {b.nvcc_version for b in binaries.values() if b and b.nvcc_version}
    toolchain = runtime_tools(next(iter(sorted(nvcc_versions)), None) if len(nvcc_versions) == 1 else None)
    environment = Environment(
        session_id=session_id,
        gpu=gpu,
        toolchain=toolchain,
        toolchain_env="clean",
        versions=versions(),
        packages=pkgs,
        env=env_allowlisted(env),
        pip_freeze=write_evidence(root, session_id, "pip-freeze.txt", frozen),
        nvidia_smi=smi,
        nvidia_smi_query=smi_q,
    )
    git, host = git_state(root), host_facts()
    by_program: dict[str, list[str]] = {}
    for lesson in all_lessons.values():
        for p in lesson.front.programs:
            by_program.setdefault(p.path, []).append(lesson.id)
    run_ids, counts = [], Counter()
    for program in chosen:
        rel = program.relative_to(root).as_posix()
        run_id = new_run_id("run")
        binary: FileDigest | None = None
        if program.suffix == ".cu":
            found = binaries[program]
            if found is None:
                raise TileproofError(f"{rel}: no binary built for {target} from today's source "
                                     f"(fix: nox -s compile -- --arch {target})")
            argv = [str(found.path)]
            binary = FileDigest(path=found.path.relative_to(root).as_posix(), sha256=sha256_file(found.path))
        else:
            argv = [sys.executable, str(program)]
        outcome = run_program(root, run_id, program.stem, argv, env, args.timeout)
        verdict, reason = outcome.verdict, outcome.reason
        if gpu and gpu.runtime_compute_capability not in (None, gpu.compute_capability):
            verdict, reason = "error", (f"nvidia-smi says compute capability {gpu.compute_capability}, "
                                        f"the CUDA runtime says {gpu.runtime_compute_capability}")
        in_lessons = by_program.get(rel, [])
        lesson_files = [root / "lessons" / f"{i}.md" for i in in_lessons]
        record = RunRecord(
            **header(run_id, git, host),
            kind="run",
            environment=environment,
            program=rel,
            lessons=in_lessons,
            lesson_programs={i: lessons.program_list_digest(all_lessons[i].front) for i in in_lessons},
            sources=[digest(root, p) for p in [*dependencies(program), *lesson_files]],
            binary=binary,
            step=outcome.step,
            report=outcome.report,
            report_file=outcome.report_file,
            verdict=verdict,
            reason=reason,
        )
        write_record(root, record)
        run_ids.append(run_id)
        counts[verdict] += 1
        print(f"  {verdict:8} {rel:36} {outcome.step.duration_s:7.1f}s  {reason}  [{run_id}]", flush=True)
    session = SessionRecord(
        **header(session_id, git, host),
        kind="session",
        session_id=session_id,
        runs=run_ids,
        verdict_counts=dict(counts),
    )
    write_record(root, session)
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    print(f"run: {summary}; session {session_id}")
    return 0 if counts.get("passed", 0) == len(run_ids) else 1
