"""Building programs: the one nvcc command, AOT export, res-usage, API inventory.

Outputs go to ``build/<cache key>/`` (ignored by git). The key covers the
program's own inputs (``own_inputs``: the program, the helpers it includes or
imports, the tolerance entries it names: what its compile record attests), the
argv with paths abstracted, the target and the toolchain versions. A warm rerun
with no change makes no compiler call, and a new tolerance entry, helper or
program rebuilds only the programs that read it.

This module writes argv and reads output; it starts no process. ``execute``
takes a ``StepRunner`` (``runner.builds`` passes ``runner.step.run_step`` bound
to the run; tests may pass a fake), pypa/build's ``runner=`` style.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import ValidationError

from tileproof.records import store
from tileproof.records.capability import sm_of
from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    AS_READ,
    ApiInventory,
    ArtifactKind,
    BuildResult,
    BuildVerdict,
    Diagnosis,
    FileDigest,
    ProgramFailure,
    ProgramInputs,
    ResUsage,
    Step,
)
from tileproof.records.store import sha256_file
from tileproof.records.tolerances import HEADER_FILE, TABLE_FILE, TABLE_PATHS, Table, entry_digests, render_cpp_header
from tileproof.toolchain import aot
from tileproof.toolchain.diagnose import NO_TILE_CODE, diagnose
from tileproof.toolchain.find import Tools, read_build_json
from tileproof.toolchain.uses import program_uses

StepRunner = Callable[[str, list[str], tuple[Path, ...]], Step]
"""Runs one build step behind the wall: its name, argv, and the only folders it may write (its outputs')."""
"""Runs one named argv as a step of the current run (its streams kept as evidence)."""

TILE_TARGETS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121")
"""Targets nvcc builds tile code for (compute capability 8.0 and up)."""

BUILD_DIR = "build"
PROGRAM_DIRS = {"kernels": ".py", "cpp": ".cu"}
"""Folders of programs this module builds (cuTile Python by AOT export, C++ with nvcc)."""
JULIA = ".jl"
"""``kernels/*.jl``: cuTile.jl programs, compiled by cuTile.jl when julia runs them (``runner.julia``)."""
HELPER_SUFFIXES = {"kernels": (".py",), "cpp": (".h", ".cuh")}


def parse_target(value: str) -> str:
    """``sm_90`` (also ``90`` or ``9.0``) → ``sm_90``; refuse anything else in one line."""
    v = value.strip().lower()
    if re.fullmatch(r"\d{1,4}\.\d", v):  # a longer major is no capability (and past what int converts)
        v = sm_of(v)
    elif re.fullmatch(r"\d+", v):
        v = "sm_" + v
    if v in TILE_TARGETS:
        return v
    m = re.fullmatch(r"sm_(\d{1,6})", v)  # more digits is no target (and past what int converts)
    if m and int(m.group(1)) < 80:
        raise TileproofError(
            f"--arch {value}: below sm_80, nvcc builds with exit 0 but no tile code ({NO_TILE_CODE.fix})"
        )
    raise TileproofError(f"--arch {value}: unknown target; choose from {', '.join(TILE_TARGETS)}")


def _target_flags(targets: list[str]) -> list[str]:
    """``-arch=sm_XX`` for one target; for several, one ``-gencode`` each meaning the same (that target's
    code and its tile IR, as ``-arch=sm_XX`` embeds both)."""
    if len(targets) == 1:
        return [f"-arch={targets[0]}"]
    return [f for t in targets for f in ("-gencode", f"arch=compute_{t[3:]},code=[compute_{t[3:]},{t}]")]


def nvcc_argv(nvcc: Path, source: Path, target: str | Sequence[str], out: Path, tilefatbin: bool = False,
              keep_dir: Path | None = None) -> list[str]:
    """The nvcc command for a tile program: written here and nowhere else.

    ``target`` is one target or several, built in one call (the host side is compiled once, not once per
    target). ``keep_dir`` keeps nvcc's intermediate files there, among them ``<stem>.tile.fatbin``, byte
    for byte what ``--tilefatbin`` writes (so one call makes the executable and the tile fatbin).
    """
    targets = [target] if isinstance(target, str) else list(target)
    argv = [str(nvcc), "-std=c++20", "-O3", *_target_flags(targets), "-enable-tile"]
    if tilefatbin:
        argv.append("--tilefatbin")
    if keep_dir is not None:
        argv += ["-keep", "-keep-dir", str(keep_dir)]
    return [*argv, str(source), "-o", str(out)]


def export_argv(program: Path, exports: Sequence[tuple[str, str, Path]]) -> list[str]:
    """The AOT export of a cuTile Python program's (kernel, target, out) exports, in one process."""
    return [sys.executable, "-m", "tileproof.toolchain.aot", str(program),
            *(str(a) for export in exports for a in export)]


# --- discovering programs ----------------------------------------------------


def is_program(path: Path) -> bool:
    """A ``cpp/*.cu`` file, or a ``kernels/*.py`` file declaring AOT_SIGNATURES."""
    if path.suffix == ".cu":
        return True
    return path.suffix == ".py" and "AOT_SIGNATURES" in path.read_text(errors="replace")


def programs(root: Path, folder: str) -> list[Path]:
    d = root / folder
    if not d.is_dir():
        raise TileproofError(f"{d}: folder is missing (fix: run from the repository root, or create {folder}/)")
    return sorted(p for p in d.glob(f"*{PROGRAM_DIRS[folder]}") if is_program(p))


def julia_programs(root: Path) -> list[Path]:
    """Every ``kernels/*.jl`` program (cuTile.jl): nvcc builds none of them, julia compiles each at run time."""
    d = Path(root) / "kernels"
    return sorted(d.glob(f"*{JULIA}")) if d.is_dir() else []


def dependencies(program: Path) -> list[Path]:
    """The program and the helper files of its folder (headers, harness, tolerance table); a
    cuTile.jl program is its own file only (the Python harness is not what it runs). Builds are keyed
    on less (``own_inputs``)."""
    if program.suffix == JULIA:
        return [program]
    folder = program.parent
    helpers = [
        p for p in sorted(folder.iterdir())
        if p.suffix in HELPER_SUFFIXES.get(folder.name, ()) and p != program and not is_program(p)
    ]
    return [program, *helpers]


# --- jobs --------------------------------------------------------------------


@dataclass(frozen=True)
class Artifact:
    """One artifact a build step makes: of which program (and kernel, for an export), for which target, of which
    kind, under which cache key, at which path; ``name`` names its inspection's transcripts."""

    program: Path
    kernel: str | None
    target: str
    kind: ArtifactKind
    key: str
    out: Path
    name: str


@dataclass(frozen=True)
class Job:
    """The AOT export of one cuTile Python kernel for one target (a cubin)."""

    program: Path
    kernel: str | None
    target: str
    kind: ArtifactKind
    argv: tuple[str, ...]
    out: Path
    key: str

    @property
    def name(self) -> str:
        parts = [self.program.stem, *([self.kernel] if self.kernel else []), self.target, self.kind]
        return ".".join(parts)

    @property
    def artifact(self) -> Artifact:
        return Artifact(self.program, self.kernel, self.target, self.kind, self.key, self.out, self.name)


CPP_KINDS: tuple[ArtifactKind, ...] = ("executable", "tilefatbin")
"""What one nvcc call makes of a C++ program, for each of its targets."""


@dataclass(frozen=True)
class CppJob:
    """One nvcc call for a C++ program and its targets: the executable (code for every target) and,
    kept from the same call, the tile fatbin that ``cuobjdump -res-usage`` reads tile kernels from."""

    program: Path
    targets: tuple[str, ...]
    argv: tuple[str, ...]
    folder: Path
    """``build/<key>/``."""
    key: str
    own: OwnInputs
    """What the key covers of the program (a target built alone keys on the same)."""

    @property
    def name(self) -> str:
        return f"{self.program.stem}.{'+'.join(self.targets)}"

    @property
    def keep_dir(self) -> Path:
        return self.folder / "keep"

    def out(self, kind: ArtifactKind) -> Path:
        return self.folder / (self.program.stem + (".tilefatbin" if kind == "tilefatbin" else ""))


EXPORTER = Path(__file__).with_name("aot.py")
"""The program an export runs (``python -m tileproof.toolchain.aot``): part of a cubin's cache key."""


@dataclass(frozen=True)
class OwnInputs:
    """What one program's builds are made from, as its compile record attests it (``inputs``) and as its
    build cache key covers it."""

    inputs: ProgramInputs
    """The program, the helpers it reaches, the tolerance entries its files name."""
    files: dict[str, str]
    """Path → sha256 of each file of ``inputs.uses``, and of a table file that stands whole (below)."""


def own_inputs(root: Path, program: Path, table: Table | None) -> OwnInputs:
    """The program's own inputs (``toolchain.uses.program_uses``): the files it imports or includes and the
    entries of ``table`` (today's, None where the tree has none) its files name.

    The table and its generated header stand for those entries, never for themselves: an entry for another
    program changes none of this program's builds. Where the tree has no table, or the header is not what the
    table renders to (a hand edit ``compile`` did not rewrite), that file is keyed whole instead (fail closed:
    its bytes reach the compiler). Records attest ``inputs`` alone (``ProgramInputs`` never names a table file).
    """
    used = program_uses(root, program, table or {})
    own = [p for p in used.files if p not in TABLE_PATHS]
    files = {p: sha256_file(root / p) for p in own}
    for p in used.files:
        if p in TABLE_PATHS and not _stands_for_entries(root, p, table):
            files[p] = sha256_file(root / p)
    return OwnInputs(ProgramInputs(uses=own, tolerances=entry_digests(table or {}, used.names)), files)


def _stands_for_entries(root: Path, path: str, table: Table | None) -> bool:
    """Whether a table file reached by a program is what today's ``table`` says, so its entries stand for it."""
    if table is None:
        return False
    if path == TABLE_FILE.as_posix():
        return True
    try:
        return path == HEADER_FILE.as_posix() and (root / path).read_text(encoding="utf-8") == render_cpp_header(table)
    except (OSError, UnicodeDecodeError, TileproofError):
        return False


def cache_key(root: Path, own: OwnInputs, argv: list[str], target: str, kind: str, versions: dict) -> str:
    """sha256 over what decides the artifact: the program's own inputs (``own_inputs``), flags, target and
    toolchain versions, and for an export the exporter itself (a change to how tileproof exports, e.g. cuTile's
    disk cache off, builds again)."""
    flags = [a for a in argv[1:] if not a.startswith(("/", str(root)))]  # paths abstracted away
    python = Path(argv[0]).name.startswith("python")
    body = {
        "sources": own.files,
        "tolerances": own.inputs.tolerances,
        "tool": "python" if python else Path(argv[0]).name,
        "flags": flags,
        "target": target,
        "kind": kind,
        "toolchain": versions,
        **({"exporter": sha256_file(EXPORTER)} if python else {}),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _versions(tools: Tools) -> dict:
    return {t.name: t.version for t in tools.facts.tools} | {"packages": tools.facts.packages}


def cpp_job(root: Path, tools: Tools, src: Path, targets: Sequence[str], own: OwnInputs) -> CppJob:
    """The one nvcc call building ``src`` (whose own inputs are ``own``) for ``targets``, with its cache key."""
    placeholder = Path("/OUT")
    argv = nvcc_argv(tools.tool("nvcc"), src, targets, placeholder, keep_dir=placeholder)
    key = cache_key(root, own, argv[:-2], ",".join(targets), "+".join(CPP_KINDS), _versions(tools))
    job = CppJob(src, tuple(targets), (), root / BUILD_DIR / key, key, own)
    argv = nvcc_argv(tools.tool("nvcc"), src, targets, job.out("executable"), keep_dir=job.keep_dir)
    return replace(job, argv=tuple(argv))


def plan(root: Path, tools: Tools, targets: list[str], cpp: list[Path], py: dict[Path, list[str]],
         owns: dict[Path, OwnInputs]) -> tuple[list[CppJob], list[Job]]:
    """Every build to run: one nvcc call per C++ program (all targets), one export per Python kernel and
    target (``execute_exports`` runs a program's uncached ones in one call); each with its cache key, over
    the program's own inputs (``owns``, from ``own_inputs``)."""
    versions = _versions(tools)
    jobs = []
    for target in targets:
        for src, kernels in py.items():
            for kernel in kernels:
                argv = export_argv(src, [(kernel, target, Path("OUT"))])
                key = cache_key(root, owns[src], argv[:-1], target, "cubin", versions)
                out = root / BUILD_DIR / key / f"{src.stem}.{kernel}.cubin"
                jobs.append(Job(src, kernel, target, "cubin", tuple(argv[:-1] + [str(out)]), out, key))
    return [cpp_job(root, tools, src, targets, owns[src]) for src in cpp], jobs


# --- running and inspecting --------------------------------------------------


_FUNC = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_FIELD = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d{1,18})(?!\d)")
"""``REG:40``; a number of 19+ digits is no cuobjdump count (and past what ``int`` converts at 4,300)."""


def parse_res_usage(text: str) -> list[ResUsage]:
    """``cuobjdump -res-usage`` → one entry per function (REG, SHARED, ...)."""
    out, func = [], None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            func = m.group(1)
            continue
        if func and "REG:" in line:
            f = dict(_FIELD.findall(line))
            out.append(
                ResUsage(
                    function=func,
                    registers=int(f.get("REG", 0)),
                    shared_bytes=int(f.get("SHARED", 0)),
                    stack_bytes=int(f.get("STACK", 0)),
                    local_bytes=int(f.get("LOCAL", 0)),
                    constant_bytes=int(f.get("CONSTANT[0]", 0)),
                )
            )
            func = None
    return out


def has_tile_code(res_usage_text: str, kind: str) -> bool:
    """Whether an artifact holds compiled tile kernels (sm_75 builds do not)."""
    functions = bool(parse_res_usage(res_usage_text))
    if kind == "cubin":
        return functions
    return functions and "tile ir code" in res_usage_text


def _diagnosed(root: Path, step: Step) -> list[Diagnosis]:
    """The known failures the step's transcripts show (read once per step, whatever it built)."""
    text = (root / step.stdout.path).read_text(errors="replace") + (root / step.stderr.path).read_text(errors="replace")
    return diagnose(text, step.exit_code)


def _inspected(root: Path, made: Artifact, step: Step, diagnosed: list[Diagnosis], tools: Tools,
               run_step: StepRunner) -> BuildResult:
    """The result of one artifact of ``step``: inspected with ``cuobjdump -res-usage`` (for its target
    alone in a C++ build, which may hold several) when the step made it."""
    kind, target, out = made.kind, made.target, made.out
    diagnoses = list(diagnosed)
    res: list[ResUsage] = []
    inspect, artifact = None, None
    verdict: BuildVerdict = "failed"
    failure = export_failure(out) if kind == "cubin" and step.exit_code != 0 else None
    if step.exit_code == 0 and out.exists():
        only = [] if kind == "cubin" else ["-arch", target]
        inspect = run_step(f"{made.name}.res-usage", [str(tools.tool("cuobjdump")), *only, "-res-usage", str(out)], ())
        listing = (root / inspect.stdout.path).read_text(errors="replace")
        res = parse_res_usage(listing)
        artifact = FileDigest(path=out.relative_to(root).as_posix(), sha256=sha256_file(out))
        if inspect.exit_code == 0 and has_tile_code(listing, kind):
            verdict = "built"
        else:
            verdict = "refused"
            diagnoses.append(NO_TILE_CODE)
    return BuildResult(
        program=made.program.relative_to(root).as_posix(),
        kernel=made.kernel,
        target=target,
        artifact_kind=kind,
        key=made.key,
        reused_from=None,
        step=step,
        inspect=inspect,
        artifact=artifact,
        res_usage=res,
        diagnoses=diagnoses,
        verdict=verdict,
        failure=failure,
    )


def export_failure(out: Path) -> ProgramFailure | None:
    """The exception an export to ``out`` raised (``aot.failure_file``), None when it left none or what it left
    is not one (the step's exit code is the verdict either way)."""
    data = read_build_json(aot.failure_file(out))
    try:
        return ProgramFailure.model_validate(data) if isinstance(data, dict) else None
    except ValidationError:
        return None


def _exporting(jobs: Iterable[Job]) -> None:
    """Before an export step: each output's folder made, an earlier run's failure file gone."""
    for job in jobs:
        job.out.parent.mkdir(parents=True, exist_ok=True)
        aot.failure_file(job.out).unlink(missing_ok=True)


def _remember(folder: Path, run_id: str, results: list[BuildResult]) -> None:
    """``build/<key>/meta.json``: what a warm rerun reuses (only when every artifact of the key is built)."""
    if results and all(r.verdict == "built" for r in results):
        meta = {"run_id": run_id, "results": [r.model_dump(mode="json") for r in results]}
        store.write_atomic(folder / "meta.json", json.dumps(meta, indent=1))


def execute(root: Path, run_id: str, job: Job, tools: Tools, run_step: StepRunner) -> BuildResult:
    """Export one kernel, inspect it, and cache it under build/<key>/."""
    _exporting([job])
    step = run_step(job.name, list(job.argv), (job.out.parent,))
    result = _inspected(root, job.artifact, step, _diagnosed(root, step), tools, run_step)
    _remember(job.out.parent, run_id, [result])
    return result


def _each_alone(failed: Step, alone: Iterable[list[BuildResult]]) -> list[BuildResult]:
    """After ``failed``, the one call for several builds: the results of each build made on its own (``alone``,
    its own step, so its own verdict), ``failed`` kept as their ``all_targets_step``. The rule for C++ targets
    and Python exports alike."""
    return [r.model_copy(update={"all_targets_step": failed}) for results in alone for r in results]


def execute_exports(root: Path, run_id: str, jobs: Sequence[Job], tools: Tools,
                    run_step: StepRunner) -> list[BuildResult]:
    """Export one program's kernels for their targets in one process (the program imported once), inspect
    each cubin and cache it under its build/<key>/. When that call fails, each export runs alone (the
    failed call kept in ``all_targets_step``), so that each kernel and target has a verdict of its own."""
    if len(jobs) == 1:
        return [execute(root, run_id, jobs[0], tools, run_step)]
    program = jobs[0].program
    _exporting(jobs)
    step = run_step(f"{program.stem}.cubins", export_argv(program, [(j.kernel or "", j.target, j.out) for j in jobs]),
                    tuple(dict.fromkeys(j.out.parent for j in jobs)))
    if step.exit_code != 0:
        return _each_alone(step, ([execute(root, run_id, j, tools, run_step)] for j in jobs))
    diagnosed = _diagnosed(root, step)
    results = []
    for job in jobs:
        result = _inspected(root, job.artifact, step, diagnosed, tools, run_step)
        _remember(job.out.parent, run_id, [result])
        results.append(result)
    return results


def execute_cpp(root: Path, run_id: str, job: CppJob, tools: Tools, run_step: StepRunner) -> list[BuildResult]:
    """Build a C++ program for its targets in one nvcc call, inspect each artifact for each target, and
    cache them under build/<key>/. When that call fails for several targets, each target is built alone
    (the failed call kept in ``all_targets_step``), so that each target's verdict is its own."""
    job.keep_dir.mkdir(parents=True, exist_ok=True)
    step = run_step(job.name, list(job.argv), (job.folder,))
    kept = job.keep_dir / f"{job.program.stem}.tile.fatbin"
    if step.exit_code == 0 and kept.is_file():
        kept.replace(job.out("tilefatbin"))
    shutil.rmtree(job.keep_dir, ignore_errors=True)  # nvcc's intermediates: megabytes per target
    if step.exit_code != 0 and len(job.targets) > 1:
        singles = (cpp_job(root, tools, job.program, [target], job.own) for target in job.targets)
        return _each_alone(step, (cached_cpp(root, one) or execute_cpp(root, run_id, one, tools, run_step)
                                  for one in singles))
    diagnosed = _diagnosed(root, step)
    results = [
        _inspected(root, Artifact(job.program, None, target, kind, job.key, job.out(kind),
                                  f"{job.program.stem}.{target}.{kind}"), step, diagnosed, tools, run_step)
        for target in job.targets for kind in CPP_KINDS
    ]
    _remember(job.folder, run_id, results)
    return results


def _earlier(root: Path, folder: Path, outs: list[Path]) -> list[BuildResult] | None:
    """The results remembered in ``folder`` if every artifact is still intact and its record still exists."""
    meta_path = folder / "meta.json"
    if not (meta_path.is_file() and all(o.is_file() for o in outs)):
        return None
    try:
        meta = json.loads(meta_path.read_text())
        earlier = [BuildResult.model_validate(r, context=AS_READ) for r in meta["results"]]
    except (ValueError, KeyError, TypeError):
        return None
    digests = {o.relative_to(root).as_posix(): sha256_file(o) for o in outs}
    if not earlier or any(r.artifact is None or digests.get(r.artifact.path) != r.artifact.sha256 for r in earlier):
        return None
    if not (root / "runs" / f"{meta['run_id']}.json").is_file():
        return None  # the record attesting these artifacts is gone: build again
    return [r.model_copy(update={"reused_from": meta["run_id"], "step": None, "inspect": None}) for r in earlier]


def cached(root: Path, job: Job) -> BuildResult | None:
    """The earlier result for this export, if its artifact is still intact."""
    earlier = _earlier(root, job.out.parent, [job.out])
    return earlier[0] if earlier and len(earlier) == 1 else None


def cached_cpp(root: Path, job: CppJob) -> list[BuildResult] | None:
    """The earlier results for this nvcc call (every target, both artifacts), if all are still intact."""
    earlier = _earlier(root, job.folder, [job.out(k) for k in CPP_KINDS])
    if earlier is None or {(r.target, r.artifact_kind) for r in earlier} != {
            (t, k) for t in job.targets for k in CPP_KINDS}:
        return None
    return earlier


# --- the installed tile API --------------------------------------------------

_DECL = re.compile(r"__tile_builtin__\s+(?P<ret>[^;{}()]*?)\b(?P<name>[A-Za-z_]\w*)"
                   r"\s*\((?P<params>[^;]*?)\)\s*noexcept")


def header_path(tools: Tools) -> Path:
    return tools.bin.parent / "include" / "crt" / "cuda_tile.h"


def inventory(header: Path, toolkit_version: str | None) -> ApiInventory:
    """Classify every ``__tile_builtin__`` function of cuda_tile.h by its signature.

    Reductions return ``reduction_result_t`` (whatever their name: ``sum`` is
    one); scans take a ``scan_direction_constant``; matrix ops are constrained
    by ``mma_compatible``/``matmul_compatible``.
    """
    text = re.sub(r"//[^\n]*", "", header.read_text(errors="replace"))
    reductions, scans, matrix = set(), set(), set()
    for m in _DECL.finditer(text):
        name, ret, params = m.group("name"), m.group("ret"), m.group("params")
        preamble = text[max(0, m.start() - 400): m.start()]
        requires = preamble.rsplit(";", 1)[-1]
        if "reduction_result_t" in ret:
            reductions.add(name)
        elif "scan_direction_constant" in params:
            scans.add(name)
        elif re.search(r"\b(mma|matmul)_compatible\b", requires):
            matrix.add(name)
    return ApiInventory(
        header=str(header),
        header_sha256=sha256_file(header),
        toolkit_version=toolkit_version,
        reductions=sorted(reductions),
        scans=sorted(scans),
        matrix=sorted(matrix),
    )
