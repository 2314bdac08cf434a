"""``tileproof bench``: time the course kernels against cuBLAS/cupy on this GPU; bench records.

Thin: gathers the session (``runner.capture``), runs each program through
``bench.core.bench_one``, prints one summary line.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from tileproof.bench.core import BENCH_DIR, Session, bench_one, select
from tileproof.records.errors import TileproofError
from tileproof.records.store import new_run_id, whole
from tileproof.records.trust.signing import signer_from_env
from tileproof.runner import integrity
from tileproof.runner.capture import (
    environment,
    git_state,
    host_facts,
    runtime_toolchain,
    session_start,
)
from tileproof.runner.environment import child_env
from tileproof.runner.process import add_output_cap, install_signal_handlers, output_cap, scratch_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--program", action="append", default=[], metavar="NAME",
                        help="a bench program under kernels/bench/ by path, file name or stem (repeatable)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: fewer sizes, tiles and repeats (not for claims)")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="per-program timeout in seconds (default 600)")
    add_output_cap(parser)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")


def run(args: argparse.Namespace) -> int:
    install_signal_handlers()
    root = args.root.resolve()
    signer = signer_from_env(root)
    cap = output_cap(args.output_cap)
    signer = integrity.start(root, signer, lambda line: print(f"bench: {line}"))
    chosen = select(root, args.program)
    if not chosen:
        raise TileproofError(f"no bench programs under {BENCH_DIR.as_posix()}/ (fix: restore kernels/bench/)")
    env_id = new_run_id("bench-env")
    env = child_env(device=args.device)
    with contextlib.ExitStack() as stack:
        if "CUDA_TILE_CACHE_DIR" not in env:  # a fresh JIT cache, so that compile times are real
            env["CUDA_TILE_CACHE_DIR"] = str(stack.enter_context(scratch_dir()))
        stack.enter_context(whole(root))  # a full disk: one line, and nothing of the bench left behind
        gpu, frozen = session_start(root, env_id, args.device)
        if gpu.no_gpu:
            print(f"bench: no usable GPU: {gpu.no_gpu}; each program's own gate is recorded and the bench fails")
        session = Session(root=root, environment=environment(root, env_id, gpu, frozen, runtime_toolchain(None), env),
                          gpu=gpu.gpu, git=git_state(root), host=host_facts(), env=env, quick=args.quick,
                          timeout=args.timeout, cap=cap, signer=signer)
        verdicts = [bench_one(session, program).verdict for program in chosen]
    passed = verdicts.count("passed")
    print(f"bench: {passed}/{len(verdicts)} programs passed")
    return 0 if passed == len(verdicts) else 1
