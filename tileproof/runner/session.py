"""A run session (``tileproof run``): the programs chosen, one look at the GPU, the environment
captured once, one run record per program written as soon as it finishes, and the session
record that closes the session. A session without its session record was interrupted; the
records written so far stay as they are.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tileproof.records import lessons, tolerances
from tileproof.records.capability import cc_tuple, sm_of
from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    RUN_VERSION,
    CheckReport,
    CudaTileRelease,
    Environment,
    FileDigest,
    GitState,
    HostFacts,
    RunRecord,
    RunVerdict,
    SessionRecord,
    Step,
)
from tileproof.records.store import (
    EVIDENCE,
    digest,
    header,
    new_run_id,
    record_path,
    sha256_file,
    whole,
    write_record,
)
from tileproof.records.trust.signing import Signer, signer_from_env
from tileproof.runner import integrity, outside_check
from tileproof.runner.capture import (
    GpuProbe,
    GpuQuery,
    environment,
    git_state,
    gpu_query,
    host_facts,
    runtime_toolchain,
    session_start,
)
from tileproof.runner.environment import child_env
from tileproof.runner.execute import Outcome, RunOptions, run_program
from tileproof.runner.julia import Absent, run_julia_program
from tileproof.runner.locate import Binary, compile_records, find_binary
from tileproof.runner.process import output_cap
from tileproof.toolchain import cuda_tile
from tileproof.toolchain.build import TILE_TARGETS, julia_programs, programs
from tileproof.toolchain.uses import run_sources

SETUP_S = 1800.0
"""What a session may spend beside its programs' own timeouts: its captures and on-demand builds."""


def deadline(program_count: int, timeout: float) -> float:
    """How long a session of ``program_count`` programs may run (the deadline of one started as a child):
    each program's timeout, plus ``SETUP_S``."""
    return program_count * timeout + SETUP_S


@dataclass(frozen=True)
class Request:
    """What a session is asked to do: ``tileproof run``'s options."""

    root: Path
    lessons: tuple[str, ...]
    """Lesson ids whose programs run; empty: every program."""
    programs: tuple[str, ...]
    """Program paths, file names or stems (``--program``); empty: no narrowing."""
    device: int
    timeout: float
    """Seconds each program may run."""
    cap: int | None
    """Bytes kept per output stream (``--output-cap``); None: ``process.output_cap``'s default."""
    record_no_gpu: bool
    """Without a usable GPU, still run each program's gate and record it."""
    python_only: bool = False
    """Only the cuTile Python programs (``--python-only``: a cuda-tile release's share of the runs)."""
    outside_range: bool = False
    """``--tileiras-outside-range``: run the Python programs although tileiras is outside the range the installed
    cuda-tile release declares (each record says so)."""
    session_id: str | None = None
    """The session's id, given by whoever reads its records back (a ``--devices`` fan-out names each GPU's); None:
    a new one."""


SESSION_ID = re.compile(r"^\d{8}T\d{6}Z-session-[0-9a-f]{8}$")
"""What ``store.new_run_id("session")`` makes."""


def check_session_id(root: Path, session_id: str) -> None:
    """A given session id is one ``new_run_id`` could have made, and no record or evidence has it yet."""
    if not SESSION_ID.match(session_id):
        raise TileproofError(f"--session-id {session_id}: expected <UTC yyyymmddThhmmssZ>-session-<8 hex> "
                             "(fix: leave it out; tileproof run makes one)")
    if record_path(root, session_id).exists() or (root / EVIDENCE / session_id).exists():
        raise TileproofError(f"--session-id {session_id}: already used in {root} (fix: a new id, or leave it out)")


@dataclass(frozen=True)
class Selection:
    """The programs a session runs, and every lesson's front matter by id."""

    programs: tuple[Path, ...]
    lessons: dict[str, lessons.Lesson]

    def lessons_of(self, program: str) -> list[str]:
        """Ids of the lessons listing ``program`` (repository-relative)."""
        return [i for i, lesson in self.lessons.items() if any(p.path == program for p in lesson.front.programs)]


def select(root: Path, lesson_ids: tuple[str, ...], names: tuple[str, ...], python_only: bool = False) -> Selection:
    """The programs to run (``python_only``: the cuTile Python ones; none selected is an error), and every
    lesson's front matter keyed by id."""
    every = programs(root, "kernels") + julia_programs(root) + programs(root, "cpp")
    all_lessons = {lesson.id: lesson for lesson in lessons.load_all(root)}
    chosen = every
    if lesson_ids:
        wanted = {p.path for i in lesson_ids for p in lessons.load(root, i).front.programs}
        chosen = [p for p in every if p.relative_to(root).as_posix() in wanted]
    if names:
        def matches(p: Path) -> bool:
            return any(n in (p.relative_to(root).as_posix(), p.name, p.stem) for n in names)
        unknown = [n for n in names if not any(n in (p.relative_to(root).as_posix(), p.name, p.stem) for p in every)]
        if unknown:
            raise TileproofError(f"--program {unknown[0]}: no such program under kernels/ or cpp/ "
                                 f"(known: {', '.join(p.stem for p in every)})")
        chosen = [p for p in chosen if matches(p)]
    if python_only:
        chosen = [p for p in chosen if p.suffix == ".py"]
    if not chosen:
        raise TileproofError("no programs selected (fix: name a lesson with programs, or drop --program)")
    return Selection(tuple(chosen), all_lessons)


def checks_of(program: str, report: CheckReport | None, in_lessons: list[lessons.Lesson]) -> set[str]:
    """The check names a run used: its report's, and those its lessons list for the program."""
    names = {c.name for c in report.checks} if report is not None else set()
    return names | {c for lesson in in_lessons for p in lesson.front.programs if p.path == program for c in p.checks}


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
class ProgramRun:
    """One program's run, as its record says."""

    run_id: str
    program: str
    verdict: RunVerdict
    reason: str
    step: Step

    def line(self) -> str:
        return f"  {self.verdict:8} {self.program:36} {self.step.duration_s:7.1f}s  {self.reason}  [{self.run_id}]"


@dataclass(frozen=True)
class NoGpu:
    """The session did not start: there is no usable GPU and the gates were not asked for; nothing was
    written."""

    reason: str


@dataclass(frozen=True)
class Ended:
    """A session that ran every program and wrote its session record."""

    session_id: str
    runs: tuple[ProgramRun, ...]
    cap: int

    @property
    def passed(self) -> bool:
        return all(r.verdict == "passed" for r in self.runs)

    def summary(self) -> str:
        """``1 passed, 2 no-gpu; 1 transcript(s) cut at N bytes; session ID``."""
        counts = Counter(r.verdict for r in self.runs)
        cut = sum(bool(r.step.stdout_cut or r.step.stderr_cut) for r in self.runs)
        redacted = sum(sum(r.step.redactions.values()) for r in self.runs)
        return (", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
                + (f"; {cut} transcript(s) cut at {self.cap} bytes" if cut else "")
                + (f"; {redacted} credential(s) redacted" if redacted else "") + f"; session {self.session_id}")


@dataclass(frozen=True)
class _Session:
    """What every program of one run session shares."""

    root: Path
    session_id: str
    selection: Selection
    gpu: GpuProbe
    target: str
    binaries: dict[Path, Binary | None]
    environment: Environment
    git: GitState
    host: HostFacts
    table: tolerances.Table
    device: int
    timeout: float
    cap: int
    signer: Signer | None
    cuda_tile: CudaTileRelease | None = None
    """The cuda-tile release the Python programs import (``python_release``), None without one."""
    checker: outside_check.Checker | None = None
    """tileproof's own checker of the outputs the session's programs hand over: one worker for the session."""


def python_release(programs: tuple[Path, ...], outside: bool, versions: dict | None = None) -> CudaTileRelease | None:
    """The cuda-tile release the chosen Python programs will import, with the tileiras they will use; refused
    (``cuda_tile.OutsideRange``, one line, nothing written) when that tileiras is outside the release's range
    and ``outside`` (``--tileiras-outside-range``) was not given. None when no Python program is chosen.
    ``versions``: the session's tool versions read so far (``runtime_toolchain``'s cache)."""
    if not any(p.suffix == ".py" for p in programs):
        return None
    tileiras = next((t.version for t in runtime_toolchain(None, versions).tools if t.name == "tileiras"), None)
    return cuda_tile.release(tileiras, outside)


def _program_argv(s: _Session, program: Path) -> tuple[list[str], FileDigest | None]:
    """How to start a Python or C++ program, and the executable it attests (C++ only)."""
    if program.suffix != ".cu":
        return [sys.executable, str(program)], None
    found = s.binaries[program]
    if found is None:
        raise TileproofError(f"{program.relative_to(s.root).as_posix()}: no binary built for {s.target} from "
                             f"today's source (fix: nox -s compile -- --arch {s.target})")
    return [str(found.path)], FileDigest(path=found.path.relative_to(s.root).as_posix(),
                                         sha256=sha256_file(found.path))


def _start(s: _Session, run_id: str, program: Path, env: dict[str, str]) -> tuple[Outcome | Absent, FileDigest | None]:
    """Run one program (a cuTile.jl one through ``runner.julia``: ``Absent`` where julia with cuTile.jl
    is not found), and the executable it attests."""
    if program.suffix == ".jl":
        return run_julia_program(s.root, run_id, program, env, s.timeout, s.cap, s.checker), None
    argv, binary = _program_argv(s, program)
    return run_program(s.root, run_id, program.stem, argv, env, s.timeout,
                       RunOptions(s.cap, python=program.suffix == ".py", checker=s.checker)), binary


def _run_one(s: _Session, program: Path) -> ProgramRun:
    """Run one program and write its record."""
    rel = program.relative_to(s.root).as_posix()
    run_id = new_run_id("run")
    in_lessons = s.selection.lessons_of(rel)
    extra = [n for i in in_lessons for n in s.selection.lessons[i].front.env]
    outcome, binary = _start(s, run_id, program, child_env(extra=extra, device=s.device))
    verdict: RunVerdict = "toolchain-absent" if isinstance(outcome, Absent) else outcome.verdict
    reason = outcome.reason
    report, report_file = (None, None) if isinstance(outcome, Absent) else (outcome.report, outcome.report_file)
    gpu = s.gpu.gpu
    if gpu and gpu.runtime_compute_capability not in (None, gpu.compute_capability):
        verdict, reason = "error", (f"nvidia-smi says compute capability {gpu.compute_capability}, "
                                    f"the CUDA runtime says {gpu.runtime_compute_capability}")
    lesson_files = [s.root / "lessons" / f"{i}.md" for i in in_lessons]
    used = checks_of(rel, report, [s.selection.lessons[i] for i in in_lessons])
    write_record(s.root, RunRecord(
        **header(run_id, s.git, s.host), kind="run", run_version=RUN_VERSION,
        environment=s.environment, program=rel, lessons=in_lessons,
        lesson_programs={i: lessons.program_list_digest(s.selection.lessons[i].front) for i in in_lessons},
        sources=[digest(s.root, p) for p in [*run_sources(s.root, program), *lesson_files]],
        tolerances=tolerances.entry_digests(s.table, used), binary=binary,
        step=outcome.step, report=report, report_file=report_file, verdict=verdict, reason=reason,
        cuda_tile=s.cuda_tile if program.suffix == ".py" else None,
        failure=None if isinstance(outcome, Absent) else outcome.failure,
        release_folder=cuda_tile.unpacked_folder() if program.suffix == ".py" and s.cuda_tile is not None else None,
        outside=None if isinstance(outcome, Absent) else outcome.outside,
    ), s.signer)
    return ProgramRun(run_id, rel, verdict, reason, outcome.step)


def _open(request: Request, selection: Selection, query: GpuQuery | None, signer: Signer | None, cap: int,
          release: CudaTileRelease | None, versions: dict | None = None) -> _Session:
    """Capture what the session's programs share: the GPU, pip freeze, binaries, toolchain (``versions``: the tool
    versions the release check read already), git, host."""
    root = request.root
    session_id = request.session_id or new_run_id("session")
    probe, frozen = session_start(root, session_id, request.device, query)
    gpu = targetable(probe)
    target = sm_of(gpu.gpu.compute_capability) if gpu.gpu else TILE_TARGETS[0]
    records = compile_records(root)
    binaries = {p: find_binary(root, p, target, records) for p in selection.programs if p.suffix == ".cu"}
    nvcc_versions = {b.nvcc_version for b in binaries.values() if b and b.nvcc_version}
    toolchain = runtime_toolchain(next(iter(sorted(nvcc_versions)), None) if len(nvcc_versions) == 1 else None,
                                  versions)
    session_env = environment(root, session_id, gpu, frozen, toolchain, child_env(device=request.device))
    return _Session(root, session_id, selection, gpu, target, binaries, session_env, git_state(root), host_facts(),
                    tolerances.load_table(root), request.device, request.timeout, cap, signer, release)


def _say(line: str) -> None:
    print(line, flush=True)


def run(request: Request, say: Callable[[str], None] = _say) -> Ended | NoGpu:
    """Run every selected program on GPU ``request.device`` and record each; ``say`` gets one line per program
    as it finishes. Without a usable GPU (and without ``record_no_gpu``) nothing runs and nothing is
    written: ``NoGpu``."""
    signer = signer_from_env(request.root)  # before any work: a bad key must not leave runs without records
    if request.session_id is not None:
        check_session_id(request.root, request.session_id)
    cap = output_cap(request.cap)
    selection = select(request.root, request.lessons, request.programs, request.python_only)
    query = None
    if not request.record_no_gpu:
        query = gpu_query()
        absent = query.why_not(request.device)
        if absent:
            return NoGpu(absent)
    versions: dict = {}  # each tool's --version read once for the session: the release check, then the toolchain
    release = python_release(selection.programs, request.outside_range, versions)
    signer = integrity.start(request.root, signer, lambda line: say(f"run: {line}"))  # refused here, or guarded
    # a full disk: one line, and nothing of the session left behind; one checker of handed-over outputs for all
    with whole(request.root), outside_check.session(request.root, warm=True) as checker:
        s = dataclasses.replace(_open(request, selection, query, signer, cap, release, versions), checker=checker)
        if s.gpu.no_gpu:
            say(f"run: no usable GPU: {s.gpu.no_gpu}; each program's own gate is recorded and the run fails")
        done = []
        for program in selection.programs:
            one = _run_one(s, program)
            say(one.line())
            done.append(one)
        counts: Counter[str] = Counter(r.verdict for r in done)
        write_record(request.root, SessionRecord(**header(s.session_id, s.git, s.host), kind="session",
                                                 session_id=s.session_id, runs=[r.run_id for r in done],
                                                 verdict_counts=dict(counts)), s.signer)
    return Ended(s.session_id, tuple(done), cap)
