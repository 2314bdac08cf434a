"""``tileproof compile``: build every program for every target, no GPU needed."""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tileproof.records.models import BuildResult, CompileRecord
from tileproof.records.safe_read import check_build_dir
from tileproof.records.store import (
    digest,
    header,
    new_run_id,
    sha256_file,
    write_record,
)
from tileproof.runner.capture import git_state, host_facts
from tileproof.toolchain.aot import declared_kernels
from tileproof.toolchain.build import (
    BUILD_DIR,
    DEFAULT_TARGETS,
    cached,
    dependencies,
    execute,
    header_path,
    inventory,
    parse_target,
    plan,
    programs,
)
from tileproof.toolchain.find import discover, require_coherent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", action="append", default=[], metavar="sm_XX",
                        help=f"target (repeatable or comma-separated); default {','.join(DEFAULT_TARGETS)}")
    parser.add_argument("--system-nvcc", metavar="PATH", help="use this nvcc (>= 13.3) instead of the pip toolchain")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds (default: cores)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")


def targets_from(args_arch: list[str]) -> list[str]:
    raw = [a for item in args_arch for a in item.split(",") if a.strip()]
    return list(dict.fromkeys(parse_target(a) for a in raw)) if raw else list(DEFAULT_TARGETS)


def line(result: BuildResult, state: str) -> str:
    what = result.program + (f":{result.kernel}" if result.kernel else "")
    seconds = f"{result.step.duration_s:6.1f}s" if result.step else "       "
    extra = "; ".join(f"{d.id}: {d.fix}" for d in result.diagnoses)
    return f"  {state:8} {what:44} {result.target:7} {result.artifact_kind:10} {seconds}" + (f"  [{extra}]" if extra else "")


def compile_programs(root: Path, tools, targets: list[str], cpp: list[Path], py: dict[Path, list[str]],
                     workers: int) -> CompileRecord | None:
    """Build what is not cached, print one line per artifact, write the record.

    Returns None when everything was cached (no compiler call, no record).
    """
    jobs = plan(root, tools, targets, cpp, py)
    run_id = new_run_id("compile")
    results: dict[int, BuildResult] = {}
    todo = []
    for i, job in enumerate(jobs):
        earlier = cached(root, job)
        if earlier is None:
            todo.append((i, job))
        else:
            results[i] = earlier
            print(line(earlier, "cached"))
    if not todo:
        print(f"compile: up to date ({len(jobs)} artifacts cached, 0 compiler calls)")
        return None
    print(f"compile: {len(todo)} of {len(jobs)} artifacts to build on {workers} workers (record {run_id})", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(execute, root, run_id, job, tools): i for i, job in todo}
        for fut in as_completed(futures):
            result = fut.result()
            results[futures[fut]] = result
            print(line(result, result.verdict), flush=True)
    ordered = [results[i] for i in range(len(jobs))]
    sources = sorted({p for j in jobs for p in dependencies(j.program)})
    header_file = header_path(tools)
    record = CompileRecord(
        **header(run_id, git_state(root), host_facts()),
        kind="compile",
        toolchain=tools.facts,
        targets=targets,
        sources=[digest(root, p) for p in sources],
        builds=ordered,
        api=inventory(header_file, tools.facts.packages.get("nvidia-cuda-crt")) if header_file.is_file() else None,
        passed=all(r.verdict == "built" for r in ordered),
    )
    path = write_record(root, record)
    bad = [r for r in ordered if r.verdict != "built"]
    print(f"compile: {len(ordered) - len(bad)} built, {len(bad)} failed or refused; record {path.relative_to(root)}")
    return record


def kernel_index(root: Path, sources: list[Path]) -> dict[Path, list[str]]:
    """Kernel names each Python program declares, importing only changed programs.

    ``build/kernel-index.json`` maps a program to the digests of its
    dependencies and its declared kernels; a warm rerun imports nothing.
    """
    index_path = root / BUILD_DIR / "kernel-index.json"
    try:
        index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    except ValueError:
        index = {}
    out, fresh = {}, {}
    for src in sources:
        rel = src.relative_to(root).as_posix()
        deps = {p.relative_to(root).as_posix(): sha256_file(p) for p in dependencies(src)}
        entry = index.get(rel)
        if not entry or entry.get("deps") != deps:
            entry = {"deps": deps, "kernels": list(declared_kernels(src))}
        fresh[rel] = entry
        out[src] = entry["kernels"]
    if fresh != index:
        index_path.parent.mkdir(parents=True, exist_ok=True)
        index_path.write_text(json.dumps(fresh, indent=1, sort_keys=True))
    return out


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    check_build_dir(root, BUILD_DIR)  # a build/ link out of the repository: refused before anything is written
    targets = targets_from(args.arch)
    tools = discover(args.system_nvcc, cache_file=root / BUILD_DIR / "tool-versions.json")
    require_coherent(tools)
    cpp = programs(root, "cpp")
    py = kernel_index(root, programs(root, "kernels"))
    record = compile_programs(root, tools, targets, cpp, py, args.jobs)
    return 0 if record is None or record.passed else 1
