"""Compiling programs: the build plan run as steps, under one lock on build/, and its record.

``compile`` calls this, and so does ``run`` when a C++ program has no attested
binary yet (``runner.locate``). Library code, not a command: it prints one line
per artifact and one summary line, and returns the record.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from filelock import FileLock, Timeout

from tileproof.records import safe_read, store
from tileproof.records.errors import InputRefused, TileproofError, one_line
from tileproof.records.models import (
    COMPILE_VERSION,
    BuildResult,
    CompileRecord,
    CudaTileRelease,
    FileDigest,
    ProgramInputs,
    Step,
)
from tileproof.records.store import (
    digest,
    header,
    new_run_id,
    write_record,
)
from tileproof.records.tolerances import (
    HEADER_FILE,
    REGENERATE,
    TABLE_FILE,
    Table,
    cpp_header,
    has_header,
    load_table,
)
from tileproof.records.trust.signing import Signer
from tileproof.runner.capture import git_state, host_facts
from tileproof.runner.environment import child_env
from tileproof.runner.process import scratch_dir, start_and_wait
from tileproof.runner.step import run_step
from tileproof.runner.wall import Wall
from tileproof.toolchain.aot import KERNELS
from tileproof.toolchain.build import (
    BUILD_DIR,
    CPP_KINDS,
    CppJob,
    Job,
    OwnInputs,
    cached,
    cached_cpp,
    execute_cpp,
    execute_exports,
    header_path,
    inventory,
    own_inputs,
    plan,
)
from tileproof.toolchain.find import Tools, read_build_json

LOCK_NAME = ".lock"


@contextmanager
def build_lock(root: Path) -> Iterator[None]:
    """Hold ``build/.lock`` (filelock); say once when another tileproof holds it."""
    folder = root / BUILD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / LOCK_NAME))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"compile: waiting for {BUILD_DIR}/{LOCK_NAME} (another compile or run is building)", flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def line(result: BuildResult, state: str) -> str:
    what = result.program + (f":{result.kernel}" if result.kernel else "")
    seconds = f"{result.step.duration_s:6.1f}s" if result.step else "       "
    extra = "; ".join(f"{d.id}: {d.fix}" for d in result.diagnoses)
    tail = f"  [{extra}]" if extra else ""
    return f"  {state:8} {what:44} {result.target:7} {result.artifact_kind:10} {seconds}{tail}"


FIRST_LINES = 6
"""How many of the compiler's lines a failed build prints (the transcript keeps all)."""


def failure_lines(root: Path, result: BuildResult) -> list[str]:
    """What a failed or refused build prints under its line: the compiler's first error lines, the
    transcript's path and each known diagnosis."""
    if result.step is None:
        return []
    out: list[str] = []
    texts = []
    for t in (result.step.stderr, result.step.stdout):
        path = root / t.path
        texts.append((t.path, path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""))
    lines = [ln.rstrip() for _p, text in texts for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()] or lines
    out += [f"      raised {result.failure}"] if result.failure else []
    out += [f"      | {ln[:200]}" for ln in errors[:FIRST_LINES]]
    shown = next((p for p, text in texts if text.strip()), result.step.stderr.path)
    out.append(f"      transcript: {shown} (exit {result.step.exit_code})")
    out += [f"      diagnosis {d.id}: {d.title} (fix: {d.fix})" for d in result.diagnoses]
    return out


def make_header_current(root: Path) -> None:
    """Rewrite cpp/tolerances.h when it is stale (nvcc reads it: never build against a stale one), through
    the one writer of generated files; the ``compile`` command makes every generated file current first
    (``authoring.generated``)."""
    if has_header(root) and store.write_generated(root, HEADER_FILE, cpp_header(root)):
        print(f"compile: regenerated {HEADER_FILE.as_posix()} from {TABLE_FILE.as_posix()} "
              f"({REGENERATE} does the same)", flush=True)


@dataclass(frozen=True)
class RecordWith:
    """What a compile record is written with beyond its builds: the key that signs it (None: unsigned) and the
    cuda-tile release the Python kernels are exported with (named when it exports any)."""

    signer: Signer | None = None
    cuda_tile: CudaTileRelease | None = None


def compile_programs(root: Path, tools: Tools, targets: list[str], cpp: list[Path], py: dict[Path, list[str]],
                     workers: int, with_: RecordWith = RecordWith()) -> CompileRecord | None:
    """Build what is not cached, print one line per artifact, write the record (``with_``: its signer, and the
    cuda-tile release it names when it exports any Python kernel).

    Returns None when everything was cached (no compiler call, no record). Holds
    ``build/.lock`` throughout, so a second compile (or run building on demand)
    waits, then finds this one's artifacts cached: a record's digests always
    match the files under build/.
    """
    with build_lock(root):
        return _compile_locked(root, tools, targets, cpp, py, workers, with_)


def _compile_locked(root: Path, tools: Tools, targets: list[str], cpp: list[Path], py: dict[Path, list[str]],
                    workers: int, with_: RecordWith) -> CompileRecord | None:
    make_header_current(root)
    table = today_table(root)
    owns = {p: own_inputs(root, p, table) for p in dict.fromkeys([*cpp, *py])}
    cpp_jobs, py_jobs = plan(root, tools, targets, cpp, py, owns)
    run_id = new_run_id("compile")
    done, todo = _cached_and_todo(root, run_id, tools, cpp_jobs, py_jobs)
    for r in done:
        print(line(r, "reused"))
    total = len(cpp_jobs) * len(targets) * len(CPP_KINDS) + len(py_jobs)
    if not todo:
        print(f"compile: up to date: 0 built, {total} reused of {total} artifacts (0 compiler calls)")
        return None
    print(f"compile: {total - len(done)} of {total} artifacts to build in {len(todo)} compiler calls on "
          f"{workers} workers, {len(done)} reused (record {run_id})", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(build) for build in todo]
        for fut in as_completed(futures):
            for result in fut.result():
                done.append(result)
                print(line(result, result.verdict), flush=True)
                if result.verdict != "built":
                    print("\n".join(failure_lines(root, result)), flush=True)
    order = {t: i for i, t in enumerate(targets)}
    ordered = sorted(done, key=lambda r: (order.get(r.target, len(order)), r.program, r.kernel or "", r.artifact_kind))
    inputs, sources = program_inputs(root, owns)
    header_file = header_path(tools)
    record = CompileRecord(
        **header(run_id, git_state(root), host_facts()),
        kind="compile",
        compile_version=COMPILE_VERSION,
        toolchain=tools.facts,
        cuda_tile=with_.cuda_tile if py_jobs else None,
        targets=targets,
        sources=sources,
        builds=ordered,
        api=inventory(header_file, tools.facts.packages.get("nvidia-cuda-crt")) if header_file.is_file() else None,
        passed=all(r.verdict == "built" for r in ordered),
        inputs=inputs,
    )
    path = write_record(root, record, with_.signer)
    bad = [r for r in ordered if r.verdict != "built"]
    reused = sum(r.reused_from is not None for r in ordered)
    print(f"compile: {len(ordered) - len(bad) - reused} built, {reused} reused, {len(bad)} failed or refused "
          f"of {len(ordered)} artifacts; record {path.relative_to(root)}")
    return record


def _cached_and_todo(root: Path, run_id: str, tools: Tools, cpp_jobs: list[CppJob], py_jobs: list[Job]
                     ) -> tuple[list[BuildResult], list[Callable[[], list[BuildResult]]]]:
    """The builds found cached, and a call for each build (or set of exports) still to run, behind the wall."""
    env = child_env(path_dirs=tools.path_dirs())

    def step(name: str, argv: list[str], writes: tuple[Path, ...]) -> Step:
        return run_step(root, run_id, name, argv, env, wall=Wall(root, writes))

    done: list[BuildResult] = []
    todo: list[Callable[[], list[BuildResult]]] = []
    for cjob in cpp_jobs:
        earlier = cached_cpp(root, cjob)
        if earlier is None:
            todo.append(partial(execute_cpp, root, run_id, cjob, tools, step))
        else:
            done += earlier
    uncached: dict[Path, list[Job]] = {}
    for job in py_jobs:
        one = cached(root, job)
        if one is None:
            uncached.setdefault(job.program, []).append(job)
        else:
            done.append(one)
    todo += [partial(execute_exports, root, run_id, jobs, tools, step) for jobs in uncached.values()]
    return done, todo


def today_table(root: Path) -> Table | None:
    """The tree's tolerance table, None where it has none (``own_inputs`` then keys a header whole)."""
    return load_table(root) if (root / TABLE_FILE).is_file() else None


def program_inputs(root: Path, owns: dict[Path, OwnInputs]) -> tuple[dict[str, ProgramInputs], list[FileDigest]]:
    """What each program's builds were made from (``compile_version`` 4): its own inputs (``build.own_inputs``,
    what its builds' cache keys cover too), the files it reaches and the tolerance entries it names, and every
    such file's digest once. The table and its header stay out: the entries stand for them, so an entry for
    another check stales none of these builds."""
    inputs: dict[str, ProgramInputs] = {}
    files: dict[str, Path] = {}
    for own in owns.values():
        inputs[own.inputs.uses[0]] = own.inputs
        files.update((p, root / p) for p in own.inputs.uses)
    return inputs, [digest(root, files[p]) for p in sorted(files)]


KERNELS_TIMEOUT_S = 600.0
"""How long reading one program's declared kernels may take (an import of the program and of cuda.tile)."""


def declared_behind_wall(root: Path, program: Path) -> list[str]:
    """The kernels ``program`` declares (``aot.declared_kernels``), read by importing it in a process behind the
    wall (``python -m tileproof.toolchain.aot --kernels``), never in this one, which may hold a signing key.
    A declaration it refuses, or an import that fails, is one ``TileproofError`` line."""
    rel = program.relative_to(root).as_posix()
    with scratch_dir() as tmp:
        env = {**child_env(), "CUDA_TILE_CACHE_DIR": "off"}
        argv = [sys.executable, "-m", "tileproof.toolchain.aot", KERNELS, str(program), str(tmp / "kernels.json")]
        done = start_and_wait(argv, env=env, cwd=root, timeout=KERNELS_TIMEOUT_S, scratch=tmp,
                              wall=Wall(root, (tmp,)))
        said = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
        if done.exit_code == 2 and said:
            raise TileproofError(said[-1][:2000])
        if done.exit_code != 0:
            why = "timed out" if done.timed_out else f"exit {done.exit_code}"
            raise TileproofError(f"{rel}: importing it to read its kernels failed ({why}): "
                                 f"{said[-1][:500] if said else 'no message'} (fix: python {rel} shows the error)")
        try:
            names = json.loads(safe_read.read_bytes(tmp, "kernels.json", "build"))
        except (InputRefused, ValueError) as e:
            raise TileproofError(f"{rel}: its kernels could not be read back ({one_line(str(e))})") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TileproofError(f"{rel}: its kernels came back as something other than a list of names")
    return names


def kernel_index(root: Path, sources: list[Path]) -> dict[Path, list[str]]:
    """Kernel names each Python program declares, importing only changed programs.

    ``build/kernel-index.json`` maps a program to its own inputs (``build.own_inputs``: the files it
    imports, the tolerance entries it names) and its declared kernels; a warm rerun imports nothing, and a
    new entry or helper for another program imports none of the others.
    """
    index_path = root / BUILD_DIR / "kernel-index.json"
    index = read_build_json(index_path)
    if not isinstance(index, dict):
        index = {}
    table = today_table(root) if sources else None
    out, fresh = {}, {}
    for src in sources:
        rel = src.relative_to(root).as_posix()
        own = own_inputs(root, src, table)
        deps = {**own.files, **{f"tolerance:{n}": d for n, d in own.inputs.tolerances.items()}}
        entry = index.get(rel)
        if not isinstance(entry, dict) or entry.get("deps") != deps or not isinstance(entry.get("kernels"), list):
            entry = {"deps": deps, "kernels": declared_behind_wall(root, src)}
        fresh[rel] = entry
        out[src] = entry["kernels"]
    if fresh != index:
        # atomic (a unique temp file per writer): a second compile reads the old index or this one
        store.write_atomic(index_path, json.dumps(fresh, indent=1, sort_keys=True))
    return out
