"""Running one claim probe and judging what it showed.

Every probe runs as a subprocess through ``runner.step.run_step``, so its transcript is
evidence a reviewer can rerun:

- ``compile``: C++ with THE nvcc command (``build.nvcc_argv``; a wrong-flag claim
  changes exactly the flags it names, ``varied_nvcc_argv``), Python by AOT export
  (``build.export_argv``). Neither needs a GPU.
- ``header``: ``python -m tileproof.claims.checks declared HEADER`` lists every
  ``__tile_builtin__`` the header declares (with its line and class); an
  ``identifier`` lookup is ``grep -nwE``.
- ``api``: ``python -m tileproof.claims.checks api cuda.tile.NAME`` prints the
  Python API's signature as JSON.
- ``res-usage``: build, then ``cuobjdump -res-usage`` (``build.parse_res_usage``).
- ``gpu``: a self-checking program; exit 0 = the stated result was observed,
  1 = not observed, its last stdout line a JSON ``{"observed": ..., "detail": ...}``.

Each probe ends in one outcome: ``as-stated``, ``contradicts``, ``unverifiable``
(this machine lacks what it needs) or ``error`` (it could not run).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import inspect
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tileproof.claims.outcomes import ProbeOutcome, ProbeResult
from tileproof.claims.spec import Check, Expected, FlagChange
from tileproof.records import store
from tileproof.records.capability import cc_tuple, sm_of
from tileproof.records.errors import NotKept, TileproofError, ToolchainError
from tileproof.records.models import GpuFacts, ProbeRole, Step, Toolchain, Transcript
from tileproof.records.safe_read import decode, parse_json, read_bytes, read_evidence
from tileproof.records.store import sha256_file
from tileproof.runner.capture import gpu_facts, runtime_toolchain
from tileproof.runner.capture import tools as find_tools
from tileproof.runner.environment import child_env
from tileproof.runner.process import scratch_dir
from tileproof.runner.step import Limits, run_step
from tileproof.runner.wall import Wall
from tileproof.toolchain.build import (
    _DECL,
    export_argv,
    header_path,
    inventory,
    nvcc_argv,
    parse_res_usage,
)
from tileproof.toolchain.diagnose import diagnose
from tileproof.toolchain.find import Tools

ENV_DIAGNOSES = {"nvcc-symlink", "tileiras-missing", "cuda-home-old", "mixed-packages"}
"""Diagnoses that mean the toolchain is broken here: the probe errored, it showed nothing."""
PREBUILT = Path("build") / "claims"
"""C++ GPU programs built where nvcc exists, for a GPU node without it (carry this folder)."""


@dataclass
class Here:
    """What this machine can check with, found once per run."""

    root: Path
    run_id: str
    tools: Tools | None
    no_nvcc: str | None
    header: Path | None
    versions: dict[str, str | None]
    toolchain: Toolchain
    gpu: GpuFacts | None
    no_gpu: str | None
    env: dict[str, str]
    gpu_env: dict[str, str]
    gpu_arch: str
    timeout: float
    smi: Transcript | None = None
    smi_query: Transcript | None = None
    _notes: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        lines = [f"nvcc: {self.versions.get('nvcc') or 'none (' + (self.no_nvcc or '?') + ')'}; "
                 f"tileiras {self.versions.get('tileiras') or 'none'}; "
                 f"cuda-tile {self.versions.get('cuda-tile') or 'none'}"]
        if self.gpu:
            lines.append(f"GPU: {self.gpu.name}, compute capability {self.gpu.compute_capability}, "
                         f"driver {self.gpu.driver_version}")
        elif self.no_gpu:
            lines.append(f"no GPU: {self.no_gpu}")
        return lines + self._notes

    def python_chain(self) -> str:
        return f"cuda-tile {self.versions.get('cuda-tile')}, tileiras {self.versions.get('tileiras')}"

    def nvcc_chain(self) -> str:
        return f"nvcc {self.versions.get('nvcc')}"

    def gpu_chain(self) -> str:
        g = self.gpu
        where = f"{g.name} cc {g.compute_capability}, driver {g.driver_version}" if g else "no GPU"
        return f"{self.python_chain()}, {where}"


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def survey(root: Path, run_id: str, device: int = 0, need_gpu: bool = True, gpu_arch: str = "sm_90",
           timeout: float = 300.0) -> Here:
    """Find nvcc (the pip toolchain, as ``compile`` does), tileiras, cuda-tile and the GPU."""
    try:
        tools, no_nvcc = find_tools(), None
    except ToolchainError as e:
        tools, no_nvcc = None, "no nvcc on this machine"
        detail = str(e)
    header: Path | None
    if tools is not None:
        header = header_path(tools)
        toolchain = tools.facts
        env = child_env(path_dirs=tools.path_dirs())
    else:
        header = _pip_header()
        toolchain = runtime_toolchain(None)
        env = child_env()
    by_tool = {t.name: t.version for t in toolchain.tools}
    versions = {
        "nvcc": by_tool.get("nvcc"),
        "tileiras": by_tool.get("tileiras"),
        "cuda-tile": _version("cuda-tile"),
        "nvidia-cuda-crt": _version("nvidia-cuda-crt"),
    }
    no_gpu: str | None
    gpu, smi, smi_q, no_gpu = None, None, None, "no GPU probe selected"
    if need_gpu:
        probe = gpu_facts(root, run_id, device)
        gpu, smi, smi_q, no_gpu = probe.gpu, probe.smi, probe.smi_query, probe.no_gpu
    env = with_tileproof(env)
    gpu_env = dict(env, CUDA_VISIBLE_DEVICES=str(device), PYTHONUNBUFFERED="1")
    here = Here(root=root, run_id=run_id, tools=tools, no_nvcc=no_nvcc,
                header=header if header and header.is_file() else None, versions=versions, toolchain=toolchain,
                gpu=gpu, no_gpu=no_gpu, smi=smi, smi_query=smi_q, env=env, gpu_env=gpu_env,
                gpu_arch=gpu_arch, timeout=timeout)
    if tools is None:
        here._notes.append(f"C++ compile, header and res-usage checks are unverifiable here ({detail})")
    return here


def with_tileproof(env: dict[str, str]) -> dict[str, str]:
    """Children (``python -m tileproof.aot``, ``... claim_checks``) import this same tileproof,
    installed or not (a GPU node runs it from a checkout)."""
    here = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(env, PYTHONPATH=os.pathsep.join([here, *[p for p in paths if p != here]]))


def _pip_header() -> Path | None:
    """``nvidia/cu13/include/crt/cuda_tile.h`` where the crt package is installed without nvcc."""
    spec = importlib.util.find_spec("nvidia")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        cand = Path(loc) / "cu13" / "include" / "crt" / "cuda_tile.h"
        if cand.is_file():
            return cand
    return None


# --- the nvcc command, varied -------------------------------------------------------------


def varied_nvcc_argv(nvcc: Path, source: Path, target: str, out: Path, tilefatbin: bool = False,
                     change: FlagChange | None = None) -> list[str]:
    """THE nvcc command (``build.nvcc_argv``) with the one change a wrong-flag claim is about.

    Dropped and replaced flags must be in the command: a claim cannot vary a flag the
    project does not use.
    """
    argv = nvcc_argv(nvcc, source, target, out, tilefatbin=tilefatbin)
    if change is None:
        return argv
    for flag in [*change.drop, *change.replace]:
        if flag not in argv:
            raise TileproofError(f"flag {flag} is not in the nvcc command ({' '.join(argv[1:])}); "
                                 "a claim can only drop or replace a flag build.nvcc_argv writes")
    argv = [change.replace.get(a, a) for a in argv if a not in change.drop]
    at = argv.index(str(source))
    return argv[:at] + list(change.add) + argv[at:]


# --- judging transcripts ----------------------------------------------------------------------


def _transcript(root: Path, t: Transcript, strict: bool = False) -> str:
    """A transcript this run wrote, read back through ``safe_read.read_evidence`` (a plain file
    under evidence/, never a link). ``strict``: UTF-8 or one line (our own helpers' output); else
    undecodable bytes are replaced (a compiler's output is judged, not trusted)."""
    data = read_evidence(root, t.path)
    return decode(data, t.path) if strict else data.decode("utf-8", "replace")


def _text(root: Path, step: Step) -> str:
    return _transcript(root, step.stdout) + "\n" + _transcript(root, step.stderr)


def _short(line: str, width: int = 170) -> str:
    line = re.sub(r"\S*/(include/)?(crt/)?(?=[\w.-]+\.(h|cu|py)\b)", "", line.strip())  # drop directories
    return line if len(line) <= width else line[: width - 3] + "..."


_PY_ERROR = re.compile(r"^cuda\.tile\._exception\.(\w+): (.*)$", re.M)


def first_error(text: str, lang: str) -> str:
    """The line a reader needs: the compiler's first error (Python: the cuTile exception)."""
    if lang == "python":
        m = _PY_ERROR.search(text)
        if m:
            msg = f"{m.group(1)}: {m.group(2)}"
            if m.group(1) == "CompilerExecutionError":  # tileiras rejected it: its first message
                detail = next((ln for ln in text[m.end():].splitlines() if ln.strip()), "")
                msg += f": {detail.strip()}"
            return _short(msg)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return _short(lines[-1]) if lines else "no output"
    for ln in text.splitlines():
        if re.search(r"\berror\b|#error", ln):
            return _short(ln)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return _short(lines[-1]) if lines else "no output"


def _matching_line(text: str, pattern: str) -> str:
    m = re.search(pattern, text, re.M)
    if not m:
        return ""
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return _short(text[start: end if end != -1 else None])


_TOOL_FATAL = re.compile(r"^(nvcc|ptxas|nvlink|fatbinary)\b[^\n]*?\bfatal\s*:\s*(.+)$", re.M)
"""nvcc or a tool it drives giving up for its own reasons: ``nvcc fatal : Unknown option '-enable-tile'``
(a release before tile code), ``ptxas ... fatal : Unsupported .version 9.5`` (a ptxas of another release)."""
_NO_FILE = re.compile(r"fatal error: (\S+): No such file or directory"
                      r"|catastrophic error: cannot open source file \"([^\"]+)\"")
"""A header or source the compiler could not open (13.2's ``cuda_tile.h`` includes a ``crt/cuda_tile.h`` it lacks)."""
_DIAGNOSTIC = re.compile(r"\berror\b|#error")
"""A line in which a compiler reports a problem with what it compiled (``first_error`` shows it)."""


def _ran(step: Step, text: str, nvcc: bool = False) -> str | None:
    """Why a step showed nothing about the claim (timeout, missing tool, broken toolchain), else None.

    ``nvcc``: the step is an nvcc build, which also fails for its own reasons: an option this
    release does not know, a header it cannot open, or a failing exit with no diagnostic at all.
    Each of those is the tool's failure (the probe errors), never a finding about the claim.
    """
    if step.timed_out:
        return f"{step.name}: timed out after {step.duration_s:.0f}s"
    if step.exit_code == 127:
        return f"{step.name}: {first_error(text, 'cpp')}"
    env = [d for d in diagnose(text, step.exit_code) if d.id in ENV_DIAGNOSES]
    if env:
        return f"{env[0].title} (fix: {env[0].fix})"
    if not nvcc or step.exit_code == 0:
        return None
    fatal = _TOOL_FATAL.search(text)
    if fatal:
        return (f"{step.name}: {fatal.group(1)} failed for its own reasons ({_short(fatal.group(2))}): "
                f"the check could not run with this toolchain")
    missing = _NO_FILE.search(text)
    if missing:
        return (f"{step.name}: the compiler could not open {missing.group(1) or missing.group(2)} "
                f"(a header this toolchain lacks): the check could not run")
    if not _DIAGNOSTIC.search(text):
        return f"{step.name}: nvcc exited {step.exit_code} with no diagnostic: {first_error(text, 'cpp')}"
    return None


def judge_compile(step: Step, text: str, expected: Expected, lang: str) -> tuple[ProbeOutcome, str]:
    """A compile step against what the document says it does; a tool that failed for its own
    reasons (``_ran``) makes the probe an ``error``, never a confirmation or a refutation."""
    broken = _ran(step, text, nvcc=lang == "cpp")
    if broken:
        return "error", broken
    rejected = step.exit_code != 0
    if lang == "python" and rejected and not _PY_ERROR.search(text):
        return "error", f"the export failed outside the compiler: {first_error(text, lang)}"
    for pattern in expected.absent:
        line = _matching_line(text, pattern)
        if line:
            return "contradicts", f"prints /{pattern}/: {line}"
    if expected.outcome == "compiles":
        if rejected:
            return "contradicts", f"does not compile: {first_error(text, lang)}"
        missing = [p for p in expected.pattern if not re.search(p, text, re.M)]
        if missing:
            return "contradicts", f"compiles, but does not print /{missing[0]}/"
        return "as-stated", "compiles (exit 0)"
    if not rejected:
        return "contradicts", "compiles (exit 0)"
    missing = [p for p in expected.pattern if not re.search(p, text, re.M)]
    if missing:
        return "contradicts", f"fails, but not with /{missing[0]}/: {first_error(text, lang)}"
    shown = first_error(text, lang)
    if expected.pattern and not re.search(expected.pattern[0], shown):
        shown = _matching_line(text, expected.pattern[0])
    extra = f" (absent: /{'/, /'.join(expected.absent)}/)" if expected.absent else ""
    return "as-stated", f"fails (exit {step.exit_code}): {shown}{extra}"


def within(value: int, bound: tuple[int, int] | None) -> bool:
    return bound is None or bound[0] <= value <= bound[1]


def find_function(entries, kernel: str):
    """A res-usage entry by source name: plain (C, Python) or Itanium-mangled (``_Z15tile_max_nativePKfPf``)."""
    mangled = re.compile(rf"_Z{len(kernel)}{re.escape(kernel)}(?![A-Za-z_0-9]*{len(kernel)}{re.escape(kernel)})")
    for e in entries:
        if e.function == kernel or mangled.match(e.function):
            return e
    return None


# --- the probes -------------------------------------------------------------------------------


def run_probe(here: Here, name: str, role: ProbeRole, check: Check, expected: Expected | None,
              folder: Path) -> ProbeResult:
    """Run one probe; any ``TileproofError`` inside becomes an ``error`` outcome, not a crash."""
    runner = {
        "compile": _compile, "header": _header, "api": _api, "res-usage": _res_usage,
        "gpu": _gpu, "not-checkable": _not_checkable,
    }[check.kind]
    try:
        outcome, why, steps, chain = runner(here, name, check, expected, folder)
    except NotKept:
        raise  # a full disk ends the claims run (store.whole), never one probe's error
    except TileproofError as e:
        outcome, why, steps, chain = "error", str(e), [], None
    return ProbeResult(role=role, kind=check.kind, outcome=outcome, why=why, steps=tuple(steps), toolchain=chain)


def _not_checkable(here, name, check, expected, folder):
    return "unverifiable", f"not checkable by a program: {check.reason}", [], None


def _step(here: Here, name: str, argv: list[str], env: dict[str, str] | None = None,
          timeout: float | None = None, writes: tuple[Path, ...] = ()) -> tuple[Step, str]:
    """One probe, behind the wall (a claims file's snippet is a program like any other), writing only
    ``writes``."""
    step = run_step(here.root, here.run_id, name, argv, env or here.env, Limits(timeout or here.timeout),
                    wall=Wall(here.root, writes))
    return step, _text(here.root, step)


def _compile(here: Here, name, check, expected, folder):
    src = folder / check.snippet
    if src.suffix == ".py":
        if not check.kernel:
            raise TileproofError(f"{check.snippet}: a Python compile check needs kernel:")
        with scratch_dir() as tmp:
            argv = export_argv(src, [(check.kernel, check.target, tmp / "k.cubin")])
            step, text = _step(here, f"{name}.aot", argv, writes=(tmp,))
        outcome, why = judge_compile(step, text, expected, "python")
        return outcome, why, [step], here.python_chain()
    if here.tools is None:
        return "unverifiable", here.no_nvcc or "no nvcc on this machine", [], None
    with scratch_dir() as tmp:
        out = tmp / (src.stem + (".tilefatbin" if check.tilefatbin else ""))
        argv = varied_nvcc_argv(here.tools.tool("nvcc"), src, check.target, out, check.tilefatbin, check.flags)
        step, text = _step(here, f"{name}.nvcc", argv, writes=(tmp,))
    outcome, why = judge_compile(step, text, expected, "cpp")
    return outcome, why, [step], here.nvcc_chain()


def _header(here: Here, name, check, expected, folder):
    if here.header is None:
        return "unverifiable", "no cuda_tile.h on this machine (no tile toolchain installed)", [], None
    chain = f"cuda_tile.h of CUDA {here.versions.get('nvidia-cuda-crt') or here.versions.get('nvcc')}"
    if check.match == "declaration":
        step, text = _step(here, f"{name}.declared",
                           [sys.executable, "-m", "tileproof.claims.checks", "declared", str(here.header)])
        if step.exit_code != 0:
            return "error", f"listing declarations failed: {first_error(text, 'python')}", [step], chain
        lines: dict[str, list[str]] = {}
        kinds: dict[str, str] = {}
        for ln in _transcript(here.root, step.stdout, strict=True).splitlines():
            parts = ln.split()
            if len(parts) >= 2:
                lines.setdefault(parts[1], []).append(parts[0])
                kinds[parts[1]] = parts[2] if len(parts) > 2 else "other"
        found = {s: lines[s] for s in check.symbols if s in lines}
    else:
        pattern = "|".join(re.escape(s) for s in check.symbols)
        step, text = _step(here, f"{name}.grep", ["grep", "-nwE", pattern, str(here.header)])
        if step.exit_code not in (0, 1):
            return "error", f"grep failed: {first_error(text, 'cpp')}", [step], chain
        found = {}
        for ln in _transcript(here.root, step.stdout, strict=True).splitlines():
            for s in check.symbols:
                if re.search(rf"\b{re.escape(s)}\b", ln):
                    found.setdefault(s, []).append(ln.split(":", 1)[0])
        kinds = {}
    what = "declares" if check.match == "declaration" else "mentions"
    missing = [s for s in check.symbols if s not in found]
    shown = ", ".join(f"{s} ({kinds[s] + '; ' if s in kinds else ''}line{'s' if len(v) > 1 else ''} "
                      f"{', '.join(v[:3])}{', ...' if len(v) > 3 else ''})" for s, v in found.items())
    if expected.outcome == "declares":
        if missing:
            return "contradicts", f"cuda_tile.h {what} no {', '.join(missing)}", [step], chain
        return "as-stated", f"cuda_tile.h {what} {shown}", [step], chain
    if found:
        return "contradicts", f"cuda_tile.h {what} {shown}", [step], chain
    return "as-stated", f"cuda_tile.h {what} none of {', '.join(check.symbols)}", [step], chain


def _api(here: Here, name, check, expected, folder):
    step, text = _step(here, f"{name}.api", [sys.executable, "-m", "tileproof.claims.checks", "api", check.symbol])
    broken = _ran(step, text)
    if broken or step.exit_code != 0:
        return "error", broken or f"API lookup failed: {first_error(text, 'python')}", [step], None
    info = parse_json(_transcript(here.root, step.stdout, strict=True), step.stdout.path)
    chain = f"{info.get('distribution') or check.symbol.split('.')[0]} {info.get('version')}"
    if not info["found"]:
        has, what = False, f"{check.symbol} does not exist"
    elif check.parameter is None:
        has, what = True, f"{check.symbol}{info.get('signature') or ''}"
    elif check.parameter not in info["parameters"]:
        has, what = False, f"{check.symbol}{info['signature']} has no parameter {check.parameter}"
    else:
        default = info["parameters"][check.parameter]
        has = check.default is None or default == check.default
        what = f"{check.symbol}: {check.parameter}" + (f" defaults to {default}" if default is not None
                                                        else " has no default")
    ok = has if expected.outcome == "declares" else not has
    return ("as-stated" if ok else "contradicts"), what, [step], chain


def _res_usage(here: Here, name, check, expected, folder):
    if here.tools is None:
        return "unverifiable", here.no_nvcc or "no nvcc on this machine", [], None
    src = folder / check.snippet
    with scratch_dir() as tmp:
        out = tmp / (src.stem + (".tilefatbin" if check.tilefatbin else ".out"))
        argv = varied_nvcc_argv(here.tools.tool("nvcc"), src, check.target, out, check.tilefatbin, check.flags)
        build, text = _step(here, f"{name}.nvcc", argv, writes=(tmp,))
        if build.exit_code != 0 or not out.exists():
            why = _ran(build, text, nvcc=True) or f"the build failed: {first_error(text, 'cpp')}"
            return "error", why, [build], here.nvcc_chain()
        inspect_step, listing = _step(here, f"{name}.res-usage",
                                      [str(here.tools.tool("cuobjdump")), "-res-usage", str(out)])
    steps = [build, inspect_step]
    if inspect_step.exit_code != 0:
        return "error", f"cuobjdump failed: {first_error(listing, 'cpp')}", steps, here.nvcc_chain()
    chain = f"{here.nvcc_chain()} ({check.target}{', --tilefatbin' if check.tilefatbin else ''})"
    entry = find_function(parse_res_usage(listing), check.kernel)
    if expected.outcome == "absent":
        if entry is None:
            common = _matching_line(listing, r"GLOBAL:\d+") or "no function entries"
            return "as-stated", f"no res-usage entry for {check.kernel} ({common})", steps, chain
        return "contradicts", f"{check.kernel}: REG {entry.registers}, SHARED {entry.shared_bytes} B", steps, chain
    if entry is None:
        return ("contradicts", f"no res-usage entry for {check.kernel}: the build holds no tile code for it",
                steps, chain)
    b = check.bounds
    parts = [f"REG {entry.registers}" + (f" (claim {b.registers[0]}..{b.registers[1]})" if b.registers else ""),
             f"SHARED {entry.shared_bytes} B"
             + (f" (claim {b.shared_bytes[0]}..{b.shared_bytes[1]} B)" if b.shared_bytes else "")]
    ok = within(entry.registers, b.registers) and within(entry.shared_bytes, b.shared_bytes)
    return ("as-stated" if ok else "contradicts"), f"{check.kernel}: {', '.join(parts)}", steps, chain


def _gpu_ready(here: Here, needs: str) -> str | None:
    """Why this machine cannot run a GPU probe (None when it can)."""
    if here.gpu is None:
        return f"needs a GPU ({here.no_gpu})"
    cc = cc_tuple(here.gpu.compute_capability)
    if cc is None:  # nvidia-smi's 'N/A': nothing can be targeted or compared (sm_of would raise)
        return (f"nvidia-smi reports compute capability {here.gpu.compute_capability!r} for {here.gpu.name}, "
                "not major.minor")
    major, minor = cc
    if needs == "cc>=8.0" and (major, minor) < (8, 0):
        return f"needs compute capability >= 8.0; {here.gpu.name} is {here.gpu.compute_capability}"
    if needs == "cc<8.0" and (major, minor) >= (8, 0):
        return f"needs a GPU below compute capability 8.0; {here.gpu.name} is {here.gpu.compute_capability}"
    return None


def missing_modules() -> list[str]:
    """What a Python GPU program imports that this interpreter lacks."""
    return [m for m in ("cupy", "cuda.tile") if importlib.util.find_spec(m.split(".")[0]) is None]


def prebuilt_path(root: Path, src: Path, target: str) -> Path:
    """Where a C++ GPU program's binary is kept: named by source digest and target."""
    return root / PREBUILT / f"{src.stem}-{sha256_file(src)[:12]}-{target}"


def _cpp_binary(here: Here, name: str, src: Path,
                target: str) -> tuple[Path | None, list[Step], tuple[ProbeOutcome, str] | None, str | None]:
    """Build (where nvcc exists) or find (where it does not) a C++ GPU program for ``target``.

    Returns the binary, the build step, a problem as (probe outcome, why): ``error`` when the
    build failed, ``unverifiable`` when nothing here can build it; and the nvcc release that
    built it (kept beside a prebuilt binary in ``<binary>.json``).
    """
    out = prebuilt_path(here.root, src, target)
    meta = out.with_name(out.name + ".json")
    if here.tools is None:
        if out.is_file():
            built_by = _built_by(here.root, meta) if meta.is_file() else None
            return out, [], None, built_by
        return None, [], ("unverifiable", f"no nvcc on this machine and no prebuilt {out.relative_to(here.root)} "
                                          f"(build it where nvcc exists: python -m tileproof claims --gpu-arch "
                                          f"{target}; carry build/claims)"), None
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = varied_nvcc_argv(here.tools.tool("nvcc"), src, target, out)
    step, text = _step(here, f"{name}.nvcc", argv, writes=(out.parent,))
    if step.exit_code != 0 or not out.is_file():
        why = _ran(step, text, nvcc=True) or first_error(text, "cpp")
        return None, [step], ("error", f"the build failed: {why}"), None
    store.write_atomic(meta, json.dumps({"nvcc": here.versions.get("nvcc"), "argv": argv, "run_id": here.run_id,
                                         "source_sha256": sha256_file(src)}, indent=1) + "\n")
    return out, [step], None, here.versions.get("nvcc")


def _built_by(root: Path, meta: Path) -> str | None:
    """The nvcc release kept beside a prebuilt binary (build/ is inside the repository: read
    through ``safe_read`` as a build file); None when the file does not say."""
    info = parse_json(decode(read_bytes(root, meta, "build"), store.rel(root, meta)), store.rel(root, meta),
                      "delete it and build again")
    nvcc = info.get("nvcc") if isinstance(info, dict) else None
    return nvcc if isinstance(nvcc, str) else None


def _gpu(here: Here, name, check, expected, folder):
    src = folder / check.program
    not_here = _gpu_ready(here, check.needs)
    steps: list[Step] = []
    if src.suffix == ".cu":
        # _gpu_ready returns None only where here.gpu is set.
        target = sm_of(here.gpu.compute_capability) if not_here is None and here.gpu else here.gpu_arch
        binary, steps, problem, built_by = _cpp_binary(here, name, src, target)
        if problem is not None:
            outcome, why = problem
            return outcome, why, steps, None
        assert binary is not None, "_cpp_binary gives a binary whenever it reports no problem"
        if not_here or here.gpu is None:
            return "unverifiable", f"{not_here} (built {binary.relative_to(here.root)} for {target})", steps, None
        argv = [str(binary), *check.args]
        chain = (f"nvcc {built_by or 'unknown'}{'' if steps else ' (prebuilt)'}, {here.gpu.name} "
                 f"cc {here.gpu.compute_capability}, driver {here.gpu.driver_version}")
    else:
        if not_here:
            return "unverifiable", not_here, [], None
        missing = missing_modules()
        if missing:
            return "unverifiable", f"needs {' and '.join(missing)} installed", [], None
        argv = [sys.executable, str(src), *check.args]
        chain = here.gpu_chain()
    step, text = _step(here, f"{name}.gpu", argv, env=here.gpu_env, timeout=check.timeout_s)
    steps.append(step)
    broken = _ran(step, text)
    if broken:
        return "error", broken, steps, chain
    report = None
    for ln in reversed(_transcript(here.root, step.stdout).splitlines()):
        if ln.startswith("{"):
            try:
                report = json.loads(ln)
                break
            except ValueError:
                continue
    if step.exit_code not in (0, 1) or not isinstance(report, dict) or "observed" not in report:
        return "error", f"exit {step.exit_code}, no report line: {first_error(text, 'python')}", steps, chain
    if bool(report["observed"]) != (step.exit_code == 0):
        return "error", f"exit {step.exit_code} disagrees with its report (observed={report['observed']})", steps, chain
    detail = str(report.get("detail", ""))
    return ("as-stated" if step.exit_code == 0 else "contradicts"), detail or f"exit {step.exit_code}", steps, chain


# --- helpers run as subprocesses (their output is the evidence) ----------------------------------


def declared(header: Path) -> list[tuple[int, str, str]]:
    """Every ``__tile_builtin__`` function the header declares: (line, name, class)."""
    raw = header.read_text(errors="replace")
    text = re.sub(r"//[^\n]*", "", raw)  # newlines kept, so line numbers hold
    api = inventory(header, None)
    classes = {**{n: "matrix" for n in api.matrix}, **{n: "scan" for n in api.scans},
               **{n: "reduction" for n in api.reductions}}
    out = []
    for m in _DECL.finditer(text):
        out.append((text.count("\n", 0, m.start("name")) + 1, m.group("name"), classes.get(m.group("name"), "other")))
    return out


def _default(value) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    if hasattr(value, "name") and type(value).__module__ != "builtins" and hasattr(type(value), "__members__"):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


def api_info(symbol: str) -> dict:
    """The Python API's view of a dotted name: does it exist, its signature, its parameters' defaults."""
    module_name, _, attr = symbol.rpartition(".")
    info: dict = {"symbol": symbol, "found": False, "signature": None, "parameters": {}}
    top = symbol.split(".")[0]
    dist = {"cuda": "cuda-tile"}.get(top, top)
    info["distribution"], info["version"] = dist, _version(dist)
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        return info
    info["found"] = True
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return info
    info["signature"] = str(sig)
    info["parameters"] = {n: _default(p.default) for n, p in sig.parameters.items()}
    return info


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "declared":
        for line, name, cls in declared(Path(argv[1])):
            print(line, name, cls)
        return 0
    if len(argv) == 2 and argv[0] == "api":
        print(json.dumps(api_info(argv[1])))
        return 0
    print("usage: python -m tileproof.claims.checks declared HEADER | api DOTTED.NAME", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
