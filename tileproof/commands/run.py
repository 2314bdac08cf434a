"""``tileproof run``: run lesson programs on this machine's GPU, record each run.

The environment is captured once per session (pip freeze, nvidia-smi, versions,
allowlisted variables); each program then gets its own run record, written as
soon as it finishes. A session record closes the session: one without it was
interrupted, and the records written so far stay as they are.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tileproof.fleet import devices
from tileproof.records import lessons, tolerances
from tileproof.records.capability import cc_tuple, sm_of
from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    RUN_VERSION,
    FileDigest,
    RunRecord,
    RunVerdict,
    SessionRecord,
    Step,
)
from tileproof.records.parsers import parse_gpu_query
from tileproof.records.signing import signer_from_env
from tileproof.records.store import (
    digest,
    header,
    new_run_id,
    sha256_file,
    write_record,
)
from tileproof.runner.capture import (
    GPU_QUERY_ARGV,
    GpuProbe,
    environment,
    git_state,
    host_facts,
    probe,
    runtime_toolchain,
    session_start,
)
from tileproof.runner.environment import child_env
from tileproof.runner.execute import Outcome, run_program
from tileproof.runner.julia import Absent, run_julia_program
from tileproof.runner.locate import compile_records, find_binary
from tileproof.runner.process import add_output_cap, install_signal_handlers, output_cap
from tileproof.toolchain import cuda_tile
from tileproof.toolchain.build import DEFAULT_TARGETS, julia_programs, programs
from tileproof.toolchain.uses import run_sources


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help="lesson ids (default: every program)")
    parser.add_argument("--program", action="append", default=[], metavar="NAME",
                        help="a program path or file name (repeatable)")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--devices", default=None, metavar="all|N,M",
                        help="every listed GPU at once, one run session per GPU (tileproof.fleet.devices)")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="S", help="per-program timeout in seconds")
    add_output_cap(parser)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")
    parser.add_argument("--record-no-gpu", action="store_true",
                        help="without a usable GPU, still run each program's gate and record the no-gpu runs "
                             "(default: say so in one line, exit 1, write nothing)")
    parser.add_argument("--python-only", action="store_true",
                        help="only the cuTile Python programs (kernels/*.py): a cuda-tile release's share of the "
                             "runs (nox -s run-gpu-release)")
    parser.add_argument(cuda_tile.OUTSIDE_FLAG, action="store_true",
                        help="run the Python programs although tileiras is outside the range the installed "
                             "cuda-tile release declares; each record says so (default: refuse, write nothing)")


def no_gpu_reason(device: int) -> str | None:
    """Why GPU ``device`` is not usable here, or None; writes nothing (a quick look before a session)."""
    if shutil.which("nvidia-smi") is None:
        return "nvidia-smi not found: no NVIDIA driver on this machine"
    query = probe(GPU_QUERY_ARGV, timeout=60)
    rows = parse_gpu_query(query.stdout.decode(errors="replace")) if query.exit_code == 0 else []
    if not any(r["index"] == device for r in rows):
        return f"nvidia-smi lists no GPU {device} (exit {query.exit_code})"
    return None


def select(root: Path, lesson_ids: list[str], names: list[str]) -> tuple[list[Path], dict[str, lessons.Lesson]]:
    """Programs to run, and every lesson's front matter keyed by id."""
    every = programs(root, "kernels") + julia_programs(root) + programs(root, "cpp")
    all_lessons = {lesson.id: lesson for lesson in lessons.load_all(root)}
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


def lessons_of(all_lessons: dict[str, lessons.Lesson]) -> dict[str, list[str]]:
    """Program path -> ids of the lessons listing it."""
    by_program: dict[str, list[str]] = {}
    for lesson in all_lessons.values():
        for p in lesson.front.programs:
            by_program.setdefault(p.path, []).append(lesson.id)
    return by_program


def checks_of(program: str, report, in_lessons: list[lessons.Lesson]) -> set[str]:
    """The check names a run used: its report's, and those its lessons list for the program."""
    names = {c.name for c in report.checks} if report is not None else set()
    return names | {c for lesson in in_lessons for p in lesson.front.programs if p.path == program for c in p.checks}


def program_argv(root: Path, program: Path, binaries: dict, target: str) -> tuple[list[str], FileDigest | None]:
    """How to start a program, and the executable it attests (C++ only)."""
    if program.suffix != ".cu":  # (a .jl program is started by runner.julia, never from here)
        return [sys.executable, str(program)], None
    found = binaries[program]
    if found is None:
        raise TileproofError(f"{program.relative_to(root).as_posix()}: no binary built for {target} from today's "
                             f"source (fix: nox -s compile -- --arch {target})")
    return [str(found.path)], FileDigest(path=found.path.relative_to(root).as_posix(), sha256=sha256_file(found.path))


def start(root: Path, run_id: str, program: Path, binaries: dict, target: str, env: dict[str, str], timeout: float,
          cap: int | None) -> tuple[Outcome | Absent, FileDigest | None]:
    """Run one program (a cuTile.jl one through ``runner.julia``: ``Absent`` where julia with cuTile.jl
    is not found), and the executable it attests."""
    if program.suffix == ".jl":
        return run_julia_program(root, run_id, program, env, timeout, cap), None
    argv, binary = program_argv(root, program, binaries, target)
    return run_program(root, run_id, program.stem, argv, env, timeout, cap, python=program.suffix == ".py"), binary


def targetable(gpu: GpuProbe) -> GpuProbe:
    """The probe, or, when nvidia-smi gave a compute capability that is not ``major.minor`` (``N/A``,
    empty), the same probe without a usable GPU: nothing can be built or judged for it, so each
    program's gate is recorded and the run fails, with the reason in one line (never a traceback)."""
    if gpu.gpu is None or cc_tuple(gpu.gpu.compute_capability) is not None:
        return gpu
    return dataclasses.replace(gpu, gpu=None, no_gpu=(
        f"nvidia-smi reports compute capability {gpu.gpu.compute_capability!r} for GPU {gpu.gpu.index} "
        f"({gpu.gpu.name}), not major.minor"))


@dataclass(frozen=True)
class _Session:
    """What every program of one run session shares."""

    root: Path
    session_id: str
    gpu: Any
    target: str
    binaries: dict
    environment: Any
    git: Any
    host: Any
    all_lessons: dict
    by_program: dict[str, list[str]]
    table: Any
    device: int
    timeout: float
    cap: int
    signer: Any
    cuda_tile: Any = None
    """The cuda-tile release the Python programs import (``toolchain.cuda_tile.release``), None without one."""


def _run_one(s: _Session, program: Path) -> tuple[str, RunVerdict, Step]:
    """Run one program, write its record; (run id, verdict, step)."""
    rel = program.relative_to(s.root).as_posix()
    run_id = new_run_id("run")
    in_lessons = s.by_program.get(rel, [])
    extra = [n for i in in_lessons for n in s.all_lessons[i].front.env]
    penv = child_env(extra=extra, device=s.device)
    outcome, binary = start(s.root, run_id, program, s.binaries, s.target, penv, s.timeout, s.cap)
    verdict: RunVerdict = "toolchain-absent" if isinstance(outcome, Absent) else outcome.verdict
    reason = outcome.reason
    report, report_file = (None, None) if isinstance(outcome, Absent) else (outcome.report, outcome.report_file)
    gpu = s.gpu.gpu
    if gpu and gpu.runtime_compute_capability not in (None, gpu.compute_capability):
        verdict, reason = "error", (f"nvidia-smi says compute capability {gpu.compute_capability}, "
                                    f"the CUDA runtime says {gpu.runtime_compute_capability}")
    lesson_files = [s.root / "lessons" / f"{i}.md" for i in in_lessons]
    used = checks_of(rel, report, [s.all_lessons[i] for i in in_lessons])
    write_record(s.root, RunRecord(
        **header(run_id, s.git, s.host), kind="run", run_version=RUN_VERSION,
        environment=s.environment, program=rel, lessons=in_lessons,
        lesson_programs={i: lessons.program_list_digest(s.all_lessons[i].front) for i in in_lessons},
        sources=[digest(s.root, p) for p in [*run_sources(s.root, program), *lesson_files]],
        tolerances=tolerances.entry_digests(s.table, used), binary=binary,
        step=outcome.step, report=report, report_file=report_file, verdict=verdict, reason=reason,
        cuda_tile=s.cuda_tile if program.suffix == ".py" else None,
        failure=None if isinstance(outcome, Absent) else outcome.failure,
    ), s.signer)
    print(f"  {verdict:8} {rel:36} {outcome.step.duration_s:7.1f}s  {reason}  [{run_id}]", flush=True)
    return run_id, verdict, outcome.step


def python_release(chosen: list[Path], outside: bool):
    """The cuda-tile release the chosen Python programs will import, with the tileiras they will use; refused
    (``cuda_tile.OutsideRange``, one line, nothing written) when that tileiras is outside the release's range
    and ``outside`` (``--tileiras-outside-range``) was not given. None when no Python program is chosen."""
    if not any(p.suffix == ".py" for p in chosen):
        return None
    tileiras = next((t.version for t in runtime_toolchain(None).tools if t.name == "tileiras"), None)
    return cuda_tile.release(tileiras, outside)


def run(args: argparse.Namespace) -> int:
    install_signal_handlers()
    root = args.root.resolve()
    if getattr(args, "devices", None) is not None:  # a Namespace built by hand (tests) has no --devices
        passed_on = [flag for flag, on in (("--record-no-gpu", getattr(args, "record_no_gpu", False)),
                                           ("--python-only", getattr(args, "python_only", False)),
                                           (cuda_tile.OUTSIDE_FLAG, getattr(args, "tileiras_outside_range", False)))
                     if on]
        return devices.fan_out(args.devices, args.lessons, args.program, args.timeout, root, passed_on)
    signer = signer_from_env(root)  # before any work: a bad key must not leave runs without records
    cap = output_cap(args.output_cap)
    chosen, all_lessons = select(root, args.lessons, args.program)
    if getattr(args, "python_only", False):
        chosen = [p for p in chosen if p.suffix == ".py"]
    if not chosen:
        raise TileproofError("no programs selected (fix: name a lesson with programs, or drop --program)")
    if not args.record_no_gpu:
        absent = no_gpu_reason(args.device)
        if absent:
            print(f"run: no usable GPU: {absent}; nothing run or recorded (--record-no-gpu records the gates)")
            return 1
    release = python_release(chosen, getattr(args, "tileiras_outside_range", False))
    session_id = new_run_id("session")
    gpu, frozen = session_start(root, session_id, args.device)
    gpu = targetable(gpu)
    target = sm_of(gpu.gpu.compute_capability) if gpu.gpu else DEFAULT_TARGETS[0]
    if gpu.no_gpu:
        print(f"run: no usable GPU: {gpu.no_gpu}; each program's own gate is recorded and the run fails")
    records = compile_records(root)
    binaries = {p: find_binary(root, p, target, records) for p in chosen if p.suffix == ".cu"}
    nvcc_versions = {b.nvcc_version for b in binaries.values() if b and b.nvcc_version}
    toolchain = runtime_toolchain(next(iter(sorted(nvcc_versions)), None) if len(nvcc_versions) == 1 else None)
    session_env = environment(root, session_id, gpu, frozen, toolchain, child_env(device=args.device))
    git, host = git_state(root), host_facts()
    s = _Session(root, session_id, gpu, target, binaries, session_env, git, host, all_lessons,
                 lessons_of(all_lessons), tolerances.load_table(root), args.device, args.timeout, cap, signer,
                 release)
    done = [_run_one(s, program) for program in chosen]
    counts: Counter[str] = Counter(verdict for _, verdict, _ in done)
    write_record(root, SessionRecord(**header(session_id, git, host), kind="session", session_id=session_id,
                                     runs=[run_id for run_id, _, _ in done], verdict_counts=dict(counts)), signer)
    cut = sum(bool(step.stdout_cut or step.stderr_cut) for _, _, step in done)
    redacted = sum(sum(step.redactions.values()) for _, _, step in done)
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    extras = (f"; {cut} transcript(s) cut at {cap} bytes" if cut else "") + \
        (f"; {redacted} credential(s) redacted" if redacted else "")
    print(f"run: {summary}{extras}; session {session_id}")
    return 0 if counts.get("passed", 0) == len(done) else 1
