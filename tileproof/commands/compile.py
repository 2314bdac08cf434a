"""``tileproof compile``: build every program for every target, no GPU needed."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tileproof.authoring.generated import COMMAND, make_current
from tileproof.commands import add_root
from tileproof.records import course
from tileproof.records.errors import TileproofError
from tileproof.records.safe_read import check_build_dir
from tileproof.records.store import whole
from tileproof.records.trust.signing import signer_from_env
from tileproof.runner import integrity
from tileproof.runner.builds import RecordWith, compile_programs, kernel_index
from tileproof.runner.capture import tools as find_tools
from tileproof.runner.process import install_signal_handlers
from tileproof.toolchain import cuda_tile
from tileproof.toolchain.build import (
    BUILD_DIR,
    julia_programs,
    parse_target,
    programs,
)
from tileproof.toolchain.find import require_coherent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", action="append", default=[], metavar="sm_XX",
                        help="target (repeatable or comma-separated); default: the course's targets "
                             "(pyproject.toml [tool.tileproof] targets)")
    parser.add_argument("--system-nvcc", metavar="PATH", help="use this nvcc (>= 13.3) instead of the pip toolchain")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds (default: cores)")
    parser.add_argument("--python-only", action="store_true",
                        help="export the cuTile Python kernels only, no nvcc (a cuda-tile release's share of the "
                             "build: nox -s compile-release)")
    parser.add_argument(cuda_tile.OUTSIDE_FLAG, action="store_true",
                        help="export although tileiras is outside the range the installed cuda-tile release "
                             "declares; the compile record says so (default: refuse, build nothing)")
    add_root(parser)


def targets_from(args_arch: list[str], root: Path) -> list[str]:
    """``--arch`` values, else the course's targets; refused in one line when neither names one."""
    raw = [a for item in args_arch for a in item.split(",") if a.strip()]
    if not raw:
        raw = course.load(root).targets
    if not raw:
        raise TileproofError(f"{course.PYPROJECT}: {course.TABLE} targets: no target to build for (fix: write "
                             f"{course.EXAMPLES['targets']} there, or pass --arch sm_90)")
    return list(dict.fromkeys(parse_target(a) for a in raw))


def run(args: argparse.Namespace) -> int:
    install_signal_handlers()
    root = args.root.resolve()
    check_build_dir(root, BUILD_DIR)  # a build/ link out of the repository: refused before anything is written
    signer = signer_from_env(root)  # before any build: a bad key must not leave builds without a record
    targets = targets_from(args.arch, root)
    for rel in make_current(root, present_only=True):  # before the tools: nvcc reads cpp/tolerances.h
        print(f"compile: regenerated {rel} from its source ({COMMAND} does the same)")
    tools = find_tools(args.system_nvcc, cache_file=root / BUILD_DIR / "tool-versions.json")
    require_coherent(tools)
    cpp = [] if args.python_only else programs(root, "cpp")
    kernels = programs(root, "kernels")
    tileiras = next((t.version for t in tools.facts.tools if t.name == "tileiras"), None)
    # before any program is imported (kernel_index): an out-of-range release is refused first, in one line
    release = cuda_tile.release(tileiras, args.tileiras_outside_range) if kernels else None
    signer = integrity.start(root, signer, lambda line: print(f"compile: {line}"))  # before any program is read
    py = kernel_index(root, kernels)
    for jl in julia_programs(root):  # named, never silently left out: julia compiles them when they run
        print(f"{jl.relative_to(root).as_posix()}: a cuTile.jl program, compiled by julia when tileproof run runs it "
              f"(toolchain-absent where no julia with cuTile.jl is found)")
    with whole(root):  # a full disk, or the key in a build's output: one line, no partial record or transcripts
        record = compile_programs(root, tools, targets, cpp, py, args.jobs, RecordWith(signer, release))
    return 0 if record is None or record.passed else 1
