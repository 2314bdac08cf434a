"""Bench programs on this machine's GPU, in one bench session: the session ``tileproof bench`` and
``tileproof reproduce`` both open (the environment captured once, a fresh JIT cache, the signer guarded, a full
disk one line), each program through ``bench.core.bench_one``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from tileproof.bench.core import Session, bench_one
from tileproof.records.models import BenchRecord
from tileproof.records.store import new_run_id, whole
from tileproof.records.trust.signing import signer_from_env
from tileproof.runner import integrity
from tileproof.runner.capture import environment, git_state, host_facts, runtime_toolchain, session_start
from tileproof.runner.environment import child_env
from tileproof.runner.process import output_cap, scratch_dir


def bench(root: Path, programs: list[Path], *, device: int = 0, quick: bool = False, timeout: float = 600.0,
          cap: int | None = None, say: Callable[[str], None] = print) -> list[BenchRecord]:
    """One bench record per program (written under runs/, signed when a key is configured), in order."""
    signer = signer_from_env(root)
    capped = output_cap(cap)
    signer = integrity.start(root, signer, lambda line: say(f"bench: {line}"))
    env_id = new_run_id("bench-env")
    env = child_env(device=device)
    with contextlib.ExitStack() as stack:
        if "CUDA_TILE_CACHE_DIR" not in env:  # a fresh JIT cache, so that compile times are real
            env["CUDA_TILE_CACHE_DIR"] = str(stack.enter_context(scratch_dir()))
        stack.enter_context(whole(root))  # a full disk: one line, and nothing of the bench left behind
        gpu, frozen = session_start(root, env_id, device)
        if gpu.no_gpu:
            say(f"bench: no usable GPU: {gpu.no_gpu}; each program's own gate is recorded and the bench fails")
        session = Session(root=root, environment=environment(root, env_id, gpu, frozen, runtime_toolchain(None), env),
                          gpu=gpu.gpu, git=git_state(root), host=host_facts(), env=env, quick=quick,
                          timeout=timeout, cap=capped, signer=signer)
        return [bench_one(session, program) for program in programs]
