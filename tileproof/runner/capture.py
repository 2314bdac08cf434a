"""Capturing the environment once per session: host, git, GPU, packages, env, toolchain.

One implementation, used by ``run``, ``bench`` and the claims probes. Raw
transcripts (pip freeze, nvidia-smi) are kept as evidence, pip freeze redacted
for credentials first (``records.redact``); the parsers in ``records.parsers``
turn them into fields, and are what the gate and the audit use to re-read a
record's own transcripts. Every process here goes through ``process.start_and_wait``.

tileproof itself is recorded by where it came from (``tileproof_origin``): an installed
distribution (listed by pip freeze like any other), or, on the offline GPU-node path
(``nox --no-venv -s run-gpu`` with the checkout on ``sys.path``), the checkout's commit
and the digest of the package's sources, never as a package version pip freeze lacks.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata as md
import json
import os
import platform
import shutil
import sys
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from tileproof import __version__
from tileproof.records import store
from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    ENVIRONMENT_VERSION,
    Environment,
    GitState,
    GpuFacts,
    HostFacts,
    SlurmJob,
    TileproofOrigin,
    Toolchain,
    Transcript,
)
from tileproof.records.parsers import GPU_QUERY_FIELDS, parse_gpu_query
from tileproof.records.redact import RedactionRule, redact
from tileproof.records.store import write_evidence
from tileproof.runner.environment import child_env
from tileproof.runner.process import Finished, start_and_wait
from tileproof.toolchain.build import BUILD_DIR
from tileproof.toolchain.find import Tools, discover, installed, runtime_tools

GPU_QUERY_ARGV = ["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY_FIELDS)}", "--format=csv"]
GPU_QUERY_TIMEOUT_S = 60.0
"""nvidia-smi lists the GPUs in well under a second; one that takes longer (a hung driver) is stopped."""
NO_DRIVER = "nvidia-smi not found: no NVIDIA driver on this machine"
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
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)
"""Environment variables worth recording; nothing else is ever captured. The last three are how a shared
multi-GPU host keeps NVLink multicast off (runner.environment passes them to every child): a record says
whether its programs ran with it off."""


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


def runtime_toolchain(nvcc_version: str | None, cache: dict | None = None) -> Toolchain:
    """``toolchain.find.runtime_tools``, reading versions through this runner (``cache``: the versions already
    read, kept by path, size and mtime)."""
    return runtime_tools(nvcc_version, output_of, cache=cache)


def host_facts() -> HostFacts:
    return HostFacts(
        system=platform.system(),
        release=platform.release(),
        machine=platform.machine(),
        python=platform.python_version(),
        cpu_count=os.cpu_count() or 1,
    )


OWN_OUTPUT = (store.RUNS, store.EVIDENCE, BUILD_DIR)
"""Untracked paths that leave a tree clean: what tileproof itself writes (records and transcripts; the build's
outputs, a folder or, in a fleet task's worktree, a link to one), never a source a record attests, so the second
program of a run session still records the clean tree the first one saw."""


def _own_output(entry: str) -> bool:
    """Whether a ``git status --porcelain -z`` entry is an untracked path under :data:`OWN_OUTPUT`."""
    path = entry.removeprefix("?? ")
    return entry.startswith("?? ") and any(path == f or path.startswith(f"{f}/") for f in OWN_OUTPUT)


def git_state(root: Path, ignored: Iterable[str] = ()) -> GitState:
    """HEAD, and whether the tree differs from it: a tracked file changed, or an untracked file that git does not
    ignore (a new lesson's programs compiled before their first commit attest sources HEAD lacks), outside what
    tileproof itself writes (:data:`OWN_OUTPUT`); ``ignored``: repo-relative paths left out of that comparison (the
    audit's own reports, which it rewrites on purpose)."""
    def git(*args: str) -> Finished:
        return probe(["git", "-C", str(root), *args], timeout=60)

    head = git("rev-parse", "HEAD")
    if head.exit_code != 0:
        return GitState(commit=None, dirty=True)
    left_out = [f":(exclude,top,literal){p}" for p in sorted(ignored)]
    status = git("status", "--porcelain", "-z", "--untracked-files=all",
                 *(["--", ":/", *left_out] if left_out else []))
    entries = [e for e in status.stdout.decode(errors="replace").split("\0") if e]
    dirty = status.exit_code != 0 or any(not _own_output(e) for e in entries)
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
    return installed(canonicalize_name)


PACKAGE = "tileproof"
"""The distribution (and package) name of tileproof itself."""


def package_digest(package: Path) -> str:
    """sha256 over every ``.py`` file under ``package``: each file's path (relative, POSIX) and sha256, sorted,
    one per line: the source identity of the tileproof that ran."""
    lines = sorted(f"{p.relative_to(package).as_posix()} {store.sha256_file(p)}\n" for p in package.rglob("*.py"))
    return store.sha256_bytes("".join(lines).encode())


def _installed(package: Path) -> md.Distribution | None:
    """The installed ``tileproof`` distribution the imported ``package`` belongs to, or None.

    Installed means an installer recorded it (``INSTALLER``, as pip, uv and every PEP 376 installer write):
    setuptools leaves a ``tileproof.egg-info`` beside the sources of a checkout it built, which
    ``importlib.metadata`` finds when the checkout is on ``sys.path`` but pip freeze, which drops the
    working directory from its path, never lists. The distribution must also hold the imported files (a
    wheel) or be an editable install of the folder holding them (``direct_url.json``)."""
    for dist in md.distributions(name=PACKAGE):
        if dist.read_text("INSTALLER") is None:
            continue
        try:
            if Path(str(dist.locate_file(f"{PACKAGE}/__init__.py"))).resolve() == package / "__init__.py":
                return dist
        except OSError:
            pass
        url = json.loads(dist.read_text("direct_url.json") or "{}")
        if url.get("dir_info", {}).get("editable") and url.get("url") == package.parent.as_uri():
            return dist
    return None


def tileproof_origin() -> TileproofOrigin:
    """Where the running tileproof came from: an installed distribution, or a checkout's sources (the offline
    GPU-node path, ``nox --no-venv``), named by the checkout's commit and the digest of the sources."""
    package = Path(__file__).resolve().parents[1]
    digest = package_digest(package)
    dist = _installed(package)
    if dist is not None:
        return TileproofOrigin(kind="distribution", version=dist.version, commit=None, sources_sha256=digest)
    head = probe(["git", "-C", str(package.parent), "rev-parse", "HEAD"], timeout=60)
    commit = head.stdout.decode(errors="replace").strip() if head.exit_code == 0 else None
    return TileproofOrigin(kind="checkout", version=__version__, commit=commit or None, sources_sha256=digest)


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
    topology: Transcript | None = None
    """``nvidia-smi topo -m`` of the host (a run or bench session's; ``session_start`` asks it)."""


def runtime_capability(device: int, env: dict[str, str]) -> str | None:
    """Compute capability as the CUDA runtime (through cupy) reports it."""
    code = ("import cupy, sys; p = cupy.cuda.runtime.getDeviceProperties(int(sys.argv[1])); "
            "print(f\"{p['major']}.{p['minor']}\")")
    done = probe([sys.executable, "-c", code, str(device)], env=env)
    return (done.stdout.decode(errors="replace").strip() or None) if done.exit_code == 0 else None


@dataclass(frozen=True)
class GpuQuery:
    """One ``nvidia-smi --query-gpu``, the one way tileproof asks which GPUs this machine has: the process
    (None: no nvidia-smi on PATH) and its rows (None unless it answered)."""

    done: Finished | None
    rows: list[dict] | None

    def row(self, device: int) -> dict | None:
        return next((r for r in self.rows or [] if r["index"] == device), None)

    def why_not(self, device: int) -> str | None:
        """Why GPU ``device`` is not usable by what nvidia-smi said, or None when it is listed."""
        if self.done is None:
            return NO_DRIVER
        if self.done.timed_out:
            return f"nvidia-smi did not answer in {GPU_QUERY_TIMEOUT_S:g} s"
        if self.row(device) is None:
            return f"nvidia-smi lists no GPU {device} (exit {self.done.exit_code})"
        return None


def gpu_query(env: dict[str, str] | None = None) -> GpuQuery:
    """Ask nvidia-smi for every GPU (allowlisted environment unless ``env`` is given), with its deadline."""
    env = child_env() if env is None else env
    if shutil.which("nvidia-smi", path=env.get("PATH")) is None:
        return GpuQuery(None, None)
    done = probe(GPU_QUERY_ARGV, env, timeout=GPU_QUERY_TIMEOUT_S)
    return GpuQuery(done, parse_gpu_query(done.stdout.decode(errors="replace")) if done.exit_code == 0 else None)


def gpu_facts(root: Path, session_id: str, device: int, query: GpuQuery | None = None) -> GpuProbe:
    """nvidia-smi raw + query transcripts, parsed; cupy's view of the capability. ``query``: the GPU query
    already made for this session (its transcript is the one kept), else it is made here."""
    env = child_env()
    if (query is not None and query.done is None) or shutil.which("nvidia-smi", path=env.get("PATH")) is None:
        return GpuProbe(None, None, None, NO_DRIVER)
    with ThreadPoolExecutor(max_workers=3) as pool:
        # GPU ``device`` as the programs see it (CUDA_VISIBLE_DEVICES=device: their device 0); asking for
        # device N in the caller's environment fails where Slurm already narrowed it to that one GPU.
        runtime = pool.submit(runtime_capability, 0, child_env(device=device))
        raw_f = pool.submit(probe, ["nvidia-smi"], env)
        query_f = pool.submit(lambda: query or gpu_query(env))
        raw, listed, runtime_cc = raw_f.result(), query_f.result(), runtime.result()
    smi = write_evidence(root, session_id, "nvidia-smi.txt", raw.stdout + raw.stderr)
    answer = listed.done.stdout + listed.done.stderr if listed.done is not None else b""
    smi_q = write_evidence(root, session_id, "nvidia-smi-query.csv", answer)
    row = listed.row(device)
    if row is None:
        return GpuProbe(None, smi, smi_q, listed.why_not(device))
    return GpuProbe(GpuFacts(runtime_compute_capability=runtime_cc, **row), smi, smi_q, None)


TOPOLOGY_ARGV = ["nvidia-smi", "topo", "-m"]
"""How the host's GPUs, NICs and CPUs connect (NVLink, PCIe switches, NUMA nodes): one matrix per host."""


def gpu_topology(root: Path, session_id: str) -> Transcript | None:
    """``nvidia-smi topo -m`` as the session's evidence (what it said, even when it failed); None without
    nvidia-smi."""
    env = child_env()
    if shutil.which("nvidia-smi", path=env.get("PATH")) is None:
        return None
    done = probe(TOPOLOGY_ARGV, env, timeout=GPU_QUERY_TIMEOUT_S)
    said = done.stdout + done.stderr
    if done.exit_code != 0:
        said += f"# nvidia-smi topo -m exited {done.exit_code}{' (its deadline)' if done.timed_out else ''}\n".encode()
    return write_evidence(root, session_id, "nvidia-smi-topo.txt", said)


def session_start(root: Path, session_id: str, device: int,
                  query: GpuQuery | None = None) -> tuple[GpuProbe, tuple[bytes, dict]]:
    """The GPU probe, the host's GPU topology and pip freeze, run side by side (the start of every run/bench
    session)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        freeze = pool.submit(pip_freeze)
        topology = pool.submit(gpu_topology, root, session_id)
        gpu = gpu_facts(root, session_id, device, query)
        return dataclasses.replace(gpu, topology=topology.result()), freeze.result()


def environment(root: Path, session_id: str, gpu: GpuProbe, frozen: tuple[bytes, dict],
                toolchain: Toolchain, env: dict[str, str]) -> Environment:
    """The session's Environment: what ``run`` and ``bench`` records share."""
    text, redactions = frozen
    origin = tileproof_origin()
    packages = installed_packages()
    if origin.kind == "checkout":  # not an installed distribution: recorded as its source identity instead
        packages.pop(PACKAGE, None)
    return Environment(
        environment_version=ENVIRONMENT_VERSION,
        tileproof=origin,
        session_id=session_id,
        gpu=gpu.gpu,
        toolchain=toolchain,
        toolchain_env="clean",
        versions=versions(),
        packages=packages,
        env=env_allowlisted(env),
        pip_freeze=write_evidence(root, session_id, "pip-freeze.txt", text),
        pip_freeze_redactions=redactions,
        nvidia_smi=gpu.smi,
        nvidia_smi_query=gpu.smi_query,
        slurm=slurm_job(),
        nvidia_smi_topo=gpu.topology,
    )
