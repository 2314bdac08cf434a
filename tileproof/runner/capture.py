"""Capturing the environment once per session: host, git, GPU, packages, env, toolchain.

One implementation, used by ``run``, ``bench`` and the claims probes. Raw
transcripts (pip freeze, nvidia-smi) are kept as evidence, pip freeze redacted
for credentials first (``records.redact``); the parsers in ``records.parsers``
turn them into fields, and are what the gate and the audit use to re-read a
record's own transcripts. Every process here goes through ``process.start_and_wait``.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import shutil
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    ENVIRONMENT_VERSION,
    Environment,
    GitState,
    GpuFacts,
    HostFacts,
    SlurmJob,
    Toolchain,
    Transcript,
)
from tileproof.records.parsers import GPU_QUERY_FIELDS, parse_gpu_query
from tileproof.records.redact import RedactionRule, redact
from tileproof.records.store import write_evidence
from tileproof.runner.environment import child_env
from tileproof.runner.process import Finished, start_and_wait
from tileproof.toolchain.find import Tools, discover, runtime_tools

GPU_QUERY_ARGV = ["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY_FIELDS)}", "--format=csv"]
PROBE_TIMEOUT_S = 120.0
"""A capture (git, pip freeze, nvidia-smi, ``--version``) that takes longer is killed."""

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


def probe(argv: list[str], env: dict[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S,
          cwd: Path | None = None) -> Finished:
    """Run a short capture command (allowlisted environment unless ``env`` is given)."""
    return start_and_wait(argv, env=child_env() if env is None else env, cwd=cwd, timeout=timeout)


def output_of(argv: list[str]) -> str:
    """stdout + stderr of argv as text: the ``toolchain.find.VersionText`` tileproof uses."""
    done = probe(argv, timeout=30)
    return (done.stdout + done.stderr).decode(errors="replace")


def tools(system_nvcc: str | None = None, cache_file: Path | None = None) -> Tools:
    """``toolchain.find.discover``, reading versions through this runner."""
    return discover(system_nvcc, cache_file=cache_file, version_text=output_of)


def runtime_toolchain(nvcc_version: str | None) -> Toolchain:
    """``toolchain.find.runtime_tools``, reading versions through this runner."""
    return runtime_tools(nvcc_version, output_of)


def host_facts() -> HostFacts:
    return HostFacts(
        system=platform.system(),
        release=platform.release(),
        machine=platform.machine(),
        python=platform.python_version(),
        cpu_count=os.cpu_count() or 1,
    )


def git_state(root: Path) -> GitState:
    def git(*args: str) -> Finished:
        return probe(["git", "-C", str(root), *args], timeout=60)

    head = git("rev-parse", "HEAD")
    if head.exit_code != 0:
        return GitState(commit=None, dirty=True)
    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = status.exit_code != 0 or bool(status.stdout.strip())
    return GitState(commit=head.stdout.decode(errors="replace").strip(), dirty=dirty)


def env_allowlisted(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables worth recording (``ENV_ALLOWLIST``) out of ``env``."""
    source = os.environ if env is None else env
    return {k: source[k] for k in ENV_ALLOWLIST if k in source}


def slurm_job(env: Mapping[str, str] | None = None) -> SlurmJob | None:
    """The Slurm job this process runs in, from the variables slurmd set (None outside Slurm).

    Read from this process's own environment (``env`` for tests), not from a child's: tileproof
    sets ``CUDA_VISIBLE_DEVICES`` for its children, and this keeps the value Slurm chose."""
    source = os.environ if env is None else env
    job_id = source.get("SLURM_JOB_ID", "").strip()
    if not job_id:
        return None

    def indexes(name: str) -> list[int] | None:
        raw = source.get(name, "").strip()
        if not raw:
            return None
        try:
            return [int(x) for x in raw.split(",")]
        except ValueError:
            raise TileproofError(f"{name}={raw!r}: expected GPU indexes like 0,1 (fix: check the Slurm "
                                 "job's gres; tileproof records what Slurm sets)") from None

    task = source.get("SLURM_ARRAY_TASK_ID", "").strip()
    if task and not task.isdigit():
        raise TileproofError(f"SLURM_ARRAY_TASK_ID={task!r}: expected a task index (fix: run under Slurm's sbatch)")
    return SlurmJob(job_id=job_id, array_job_id=source.get("SLURM_ARRAY_JOB_ID") or None,
                    array_task_id=int(task) if task else None, cluster=source.get("SLURM_CLUSTER_NAME") or None,
                    node=source.get("SLURMD_NODENAME") or None, job_gpus=indexes("SLURM_JOB_GPUS"),
                    step_gpus=indexes("SLURM_STEP_GPUS"),
                    cuda_visible_devices=source.get("CUDA_VISIBLE_DEVICES"))


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


def pip_freeze() -> tuple[bytes, dict[RedactionRule, int]]:
    """``pip freeze --all``, credentials redacted, and the redaction counts."""
    done = probe([sys.executable, "-m", "pip", "freeze", "--all"])
    text = done.stdout
    if done.exit_code != 0:
        text += f"# pip freeze exited {done.exit_code}: {done.stderr.decode(errors='replace').strip()}\n".encode()
    return redact(text)


def versions() -> dict[str, str | None]:
    pk = installed_packages()
    return {
        "cuda-tile": pk.get("cuda-tile"),
        "cupy": next((v for k, v in pk.items() if k.startswith("cupy")), None),
        "numpy": pk.get("numpy"),
        "python": platform.python_version(),
        "os": platform.platform(),
        "kernel": platform.release(),
    }


@dataclass(frozen=True)
class GpuProbe:
    """What nvidia-smi and the CUDA runtime said about the GPU, with the transcripts."""

    gpu: GpuFacts | None
    smi: Transcript | None
    smi_query: Transcript | None
    no_gpu: str | None
    """Why there is no usable GPU (None when there is one)."""


def runtime_capability(device: int, env: dict[str, str]) -> str | None:
    """Compute capability as the CUDA runtime (through cupy) reports it."""
    code = ("import cupy, sys; p = cupy.cuda.runtime.getDeviceProperties(int(sys.argv[1])); "
            "print(f\"{p['major']}.{p['minor']}\")")
    done = probe([sys.executable, "-c", code, str(device)], env=env)
    return (done.stdout.decode(errors="replace").strip() or None) if done.exit_code == 0 else None


def gpu_facts(root: Path, session_id: str, device: int) -> GpuProbe:
    """nvidia-smi raw + query transcripts, parsed; cupy's view of the capability."""
    env = child_env()
    if shutil.which("nvidia-smi", path=env.get("PATH")) is None:
        return GpuProbe(None, None, None, "nvidia-smi not found: no NVIDIA driver on this machine")
    with ThreadPoolExecutor(max_workers=3) as pool:
        # GPU ``device`` as the programs see it (CUDA_VISIBLE_DEVICES=device: their device 0); asking for
        # device N in the caller's environment fails where Slurm already narrowed it to that one GPU.
        runtime = pool.submit(runtime_capability, 0, child_env(device=device))
        raw_f = pool.submit(probe, ["nvidia-smi"], env)
        query_f = pool.submit(probe, GPU_QUERY_ARGV, env)
        raw, query, runtime_cc = raw_f.result(), query_f.result(), runtime.result()
    smi = write_evidence(root, session_id, "nvidia-smi.txt", raw.stdout + raw.stderr)
    smi_q = write_evidence(root, session_id, "nvidia-smi-query.csv", query.stdout + query.stderr)
    rows = parse_gpu_query(query.stdout.decode(errors="replace")) if query.exit_code == 0 else []
    row = next((r for r in rows if r["index"] == device), None)
    if row is None:
        return GpuProbe(None, smi, smi_q, f"nvidia-smi lists no GPU {device} (exit {query.exit_code})")
    return GpuProbe(GpuFacts(runtime_compute_capability=runtime_cc, **row), smi, smi_q, None)


def session_start(root: Path, session_id: str, device: int) -> tuple[GpuProbe, tuple[bytes, dict]]:
    """The GPU probe and pip freeze, run side by side (the start of every run/bench session)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        freeze = pool.submit(pip_freeze)
        gpu = gpu_facts(root, session_id, device)
        return gpu, freeze.result()


def environment(root: Path, session_id: str, gpu: GpuProbe, frozen: tuple[bytes, dict],
                toolchain: Toolchain, env: dict[str, str]) -> Environment:
    """The session's Environment: what ``run`` and ``bench`` records share."""
    text, redactions = frozen
    return Environment(
        environment_version=ENVIRONMENT_VERSION,
        session_id=session_id,
        gpu=gpu.gpu,
        toolchain=toolchain,
        toolchain_env="clean",
        versions=versions(),
        packages=installed_packages(),
        env=env_allowlisted(env),
        pip_freeze=write_evidence(root, session_id, "pip-freeze.txt", text),
        pip_freeze_redactions=redactions,
        nvidia_smi=gpu.smi,
        nvidia_smi_query=gpu.smi_query,
        slurm=slurm_job(),
    )
