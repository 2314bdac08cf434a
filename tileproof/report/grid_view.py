"""The run grid's and the environments' view model: lessons x programs x GPUs, and each session shown.

Pure: ``view(result)`` reads only the audit's result. Per program and GPU (name, compute capability;
largest first, no GPU last): the newest run record and how many ran; per program, its newest build
verdict of every target in one summary (only the lock's cuda-tile exports: ``releases.exports_rest_on``);
the environment of every session a cell's newest run came from, as the reports show it (machine paths
shortened: ``report.shorten``). Both renderers read it (``report.grid_render``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tileproof.judge import releases
from tileproof.judge.audit.result import NO_GPU, AuditResult
from tileproof.records.capability import cc_of, cc_tuple
from tileproof.records.models import CompileRecord, Environment, RunRecord
from tileproof.report.shorten import env_text, plural

NO_LESSON = "(no lesson)"
SHOWN_PACKAGES = ("cuda-tile", "cupy", "numpy", "python", "os", "kernel")


@dataclass(frozen=True)
class Cell:
    newest: RunRecord
    runs: int
    """Runs of this program on this GPU, the newest included."""


@dataclass(frozen=True)
class Row:
    lesson: str
    program: str
    compile: str
    """The newest build verdict of every target in one summary, e.g. ``6 of 6 targets built (sm_80 ... sm_120)``."""
    cells: dict
    """GPU column key → Cell."""


@dataclass(frozen=True)
class View:
    gpus: list
    """Column keys (name, compute capability), largest capability first; no GPU last."""
    rows: list[Row]
    environments: list[Environment]
    other_sessions: int
    counts: Counter
    flagged: frozenset[str] = frozenset()
    """Run ids with a finding against them (marked in the grid)."""


def _cc_order(key: tuple[str, str]):
    cc = cc_tuple(key[1])
    return (0, -cc[0], -cc[1], key[0]) if cc is not None else (1, 0, 0, key[0])


def view(result: AuditResult) -> View:
    table = result.runs
    cells = {key: Cell(rec, table.runs[key]) for key, rec in table.newest.items()}
    builds: dict[tuple[str, str], str] = {}
    for rec in result.records:  # oldest first: later ones replace earlier ones
        if isinstance(rec, CompileRecord):
            axis = not releases.exports_rest_on(rec, result.cuda_tile_lock)  # another cuda-tile's exports
            for b in rec.builds:
                if not (axis and b.artifact_kind == "cubin"):
                    builds[(b.program, b.target)] = b.verdict
    gpus = sorted({g for _, g in cells}, key=_cc_order)
    per_program: dict[str, dict[str, str]] = {}
    for (program, target), verdict in sorted(builds.items(), key=lambda kv: (kv[0][0], _target_order(kv[0][1]))):
        per_program.setdefault(program, {})[target] = verdict
    compiled = {program: compile_summary(targets) for program, targets in per_program.items()}
    programs_seen = {p for p, _ in cells} | set(compiled)
    rows, placed = [], set()
    for lesson in result.lessons:
        for program in lesson.programs:
            rows.append(_row(lesson.id, program, gpus, cells, compiled))
            placed.add(program)
    for program in sorted(programs_seen - placed):
        rows.append(_row(NO_LESSON, program, gpus, cells, compiled))
    shown: dict[str, Environment] = {}
    for row in rows:
        for cell in row.cells.values():
            env = cell.newest.environment
            shown.setdefault(env.session_id, env)
    envs = sorted(shown.values(), key=lambda e: e.session_id, reverse=True)
    return View(gpus, rows, envs, len(table.sessions - set(shown)), Counter(table.verdicts),
                frozenset(result.bad_records))


def _target_order(target: str):
    """sm_80 < sm_90 < sm_100: by compute capability, not by text (an unreadable target sorts first)."""
    try:
        return (cc_tuple(cc_of(target)) or (0, 0), target)
    except ValueError:
        return ((0, 0), target)


def compile_summary(targets: dict[str, str]) -> str:
    """One line for a program's builds (target → newest verdict, in target order):
    ``6 of 6 targets built (sm_80, sm_86, ..., sm_120)``, or what did not build, by verdict."""
    built = [t for t, v in targets.items() if v == "built"]
    head = f"{len(built)} of {plural(len(targets), 'target')} built"
    if len(built) == len(targets):
        return f"{head} ({', '.join(built)})"
    others: dict[str, list[str]] = {}
    for t, v in targets.items():
        if v != "built":
            others.setdefault(v, []).append(t)
    return head + "; " + "; ".join(f"{v}: {', '.join(ts)}" for v, ts in others.items())


def _row(lesson, program, gpus, cells, compiled) -> Row:
    return Row(lesson, program, compiled.get(program, "-"),
               {g: cells[(program, g)] for g in gpus if (program, g) in cells})


def gpu_label(key: tuple[str, str]) -> str:
    return key[0] if key == NO_GPU else f"{key[0]} (cc {key[1]})"


def run_reason(rec: RunRecord) -> str:
    """The run's one line; a passed run's as ``3 checks passed`` (plural right, from its report)."""
    if rec.verdict == "passed" and rec.report is not None:
        return f"{plural(len(rec.report.checks), 'check')} passed"
    return rec.reason


def env_summary(env: Environment) -> dict[str, str]:
    gpu = env.gpu
    tc = env.toolchain
    tools = ", ".join(f"{t.name} {t.version or '?'}" for t in tc.tools)
    nvidia = ", ".join(f"{k} {v}" for k, v in sorted(tc.packages.items()))
    versions = ", ".join(f"{k} {env.versions[k]}" for k in SHOWN_PACKAGES if env.versions.get(k))
    return {
        "GPU": (f"{gpu.name}, cc {gpu.compute_capability} (runtime {gpu.runtime_compute_capability or '?'}), "
                f"{gpu.memory_total_mib or '?'} MiB, {gpu.uuid}") if gpu else "none",
        "driver": gpu.driver_version if gpu else "-",
        "toolchain": f"{tc.source} {tc.major_minor or 'mixed'} ({'coherent' if tc.coherent else 'NOT coherent'}, "
                     f"children's environment {env.toolchain_env}): {tools}",
        "toolchain packages": nvidia or "-",
        "versions": versions or "-",
        "packages": f"{len(env.packages)} installed (full list: pip freeze transcript)",
        "environment": env_text(env.env),
    }


def env_transcripts(env: Environment) -> list[tuple[str, str]]:
    out = [("pip freeze", env.pip_freeze.path)]
    if env.nvidia_smi:
        out.append(("nvidia-smi", env.nvidia_smi.path))
    if env.nvidia_smi_query:
        out.append(("nvidia-smi query", env.nvidia_smi_query.path))
    return out


def run_links(rec: RunRecord) -> list[tuple[str, str]]:
    out = [("record", f"runs/{rec.run_id}.json"), ("stdout", rec.step.stdout.path), ("stderr", rec.step.stderr.path)]
    if rec.report_file:
        out.append(("report", rec.report_file.path))
    return out
