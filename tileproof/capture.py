"""Capturing the environment once per session: host, git, GPU, packages, env.

Raw transcripts (pip freeze, nvidia-smi) are kept verbatim as evidence; the
parsers here turn them into fields, and are what the gate and the audit use
to re-read a record's own transcripts.
"""

from __future__ import annotations

import csv
import importlib.metadata as md
import io
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from .models import GitState, HostFacts

GPU_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "compute_cap",
    "driver_version",
    "memory.total",
    "clocks.sm",
    "clocks.mem",
)
"""Fields asked of ``nvidia-smi --query-gpu``; the transcript keeps its header."""

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
    """Every distribution visible to this interpreter → version."""
    out: dict[str, str] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        key = name.lower().replace("_", "-") if name else None
        if key and key not in out:  # the first on sys.path is the one imported
            out[key] = dist.version
    return dict(sorted(out.items()))


def pip_freeze() -> str:
    proc = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, text=True)
    return proc.stdout + (f"# pip freeze exited {proc.returncode}: {proc.stderr.strip()}\n" if proc.returncode else "")


_EDITABLE = re.compile(r"^# Editable .*\((\S+)==(\S+)\)$")


def parse_pip_freeze(text: str) -> dict[str, str]:
    """``pip freeze`` → {name: version}.

    Reads ``name==version`` lines and direct references to a wheel
    (``name @ file:///.../name-1.7.0-cp312-....whl``, as an offline install
    writes them); editable and other direct references are skipped.
    """
    out = {}
    for line in text.splitlines():
        line = line.strip()
        editable = _EDITABLE.match(line)
        if editable:  # "# Editable Git install with no remote (name==version)" above its "-e PATH"
            out[editable.group(1).lower().replace("_", "-")] = editable.group(2)
            continue
        if not line or line.startswith(("#", "-e ")):
            continue
        if "==" in line:
            name, _, version = line.partition("==")
        elif " @ " in line and line.split("#", 1)[0].endswith(".whl"):
            name, _, url = line.partition(" @ ")
            version = url.split("#", 1)[0].rsplit("/", 1)[-1].split("-")[1]
        else:
            continue
        out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def _int(value: str) -> int | None:
    value = value.strip().split(" ")[0]
    try:
        return int(float(value))
    except ValueError:
        return None


def parse_gpu_query(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=... --format=csv`` (header kept).

    Returns one dict per GPU with keys index, name, uuid, compute_capability,
    driver_version, memory_total_mib, clocks_sm_mhz, clocks_mem_mhz.
    """
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows:
        return []
    header = [h.strip().split(" ")[0] for h in rows[0]]
    out = []
    for row in rows[1:]:
        cells = dict(zip(header, (c.strip() for c in row)))
        out.append(
            {
                "index": _int(cells.get("index", "")),
                "name": cells.get("name", ""),
                "uuid": cells.get("uuid", ""),
                "compute_capability": cells.get("compute_cap", ""),
                "driver_version": cells.get("driver_version", ""),
                "memory_total_mib": _int(cells.get("memory.total", "")),
                "clocks_sm_mhz": _int(cells.get("clocks.current.sm", cells.get("clocks.sm", ""))),
                "clocks_mem_mhz": _int(cells.get("clocks.current.memory", cells.get("clocks.mem", ""))),
            }
        )
    return out
