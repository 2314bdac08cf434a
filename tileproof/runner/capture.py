"""Capturing the environment once per session: host, git, GPU, packages, env.

Raw transcripts (pip freeze, nvidia-smi) are kept verbatim as evidence; the
parsers here turn them into fields, and are what the gate and the audit use
to re-read a record's own transcripts.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from tileproof.records.models import GitState, HostFacts
from tileproof.records.parsers import GPU_QUERY_FIELDS

GPU_QUERY_ARGV = ["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY_FIELDS)}", "--format=csv"]

ENV_ALLOWLIST = (
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "LD_LIBRARY_PATH",
    "PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CUDA_TILE_CACHE_DIR",
    "CUDA_TILE_DISABLE_CACHE",
    "CUDA_TILE_LOGS",
    "CUDA_TILE_TEMP_DIR",
    "CUDA_TILE_ENABLE_CRASH_DUMP",
    "CUDA_TILE_COMPILER_TIMEOUT_SEC",
    "TILEPROOF_SEED",
)
"""Environment variables worth recording; nothing else is ever captured."""


def host_facts() -> HostFacts:
    return HostFacts(
        system=platform.system(),
        release=platform.release(),
        machine=platform.machine(),
        python=platform.python_version(),
        cpu_count=os.cpu_count() or 1,
    )


def git_state(root: Path) -> GitState:
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

    try:
        head = git("rev-parse", "HEAD")
    except OSError:
        return GitState(commit=None, dirty=True)
    if head.returncode != 0:
        return GitState(commit=None, dirty=True)
    status = git("status", "--porcelain", "--untracked-files=no")
    return GitState(commit=head.stdout.strip(), dirty=bool(status.stdout.strip()))


def env_allowlisted(env: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {k: env[k] for k in ENV_ALLOWLIST if k in env}


def installed_packages() -> dict[str, str]:
    """Every distribution visible to this interpreter → version, by canonical name.

    Names are canonicalised (PEP 503) with ``packaging``, as ``parse_pip_freeze``
    does, so a record's packages and its pip freeze transcript compare key by key.
    """
    out: dict[str, str] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        key = canonicalize_name(name) if name else None
        if key and key not in out:  # the first on sys.path is the one imported
            out[key] = dist.version
    return dict(sorted(out.items()))


def pip_freeze() -> str:
    proc = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, text=True)
    return proc.stdout + (f"# pip freeze exited {proc.returncode}: {proc.stderr.strip()}\n" if proc.returncode else "")
