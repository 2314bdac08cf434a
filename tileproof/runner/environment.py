"""The one environment every child gets: an allowlist, never the caller's whole environment.

A program, compiler or probe sees only the names in ``CHILD_ENV`` (plus the
names its lesson adds in front matter ``env:``), never ``CUDA_HOME``/``CUDA_PATH``
(``toolchain.find.HAZARD_VARS``: tileiras would load that toolkit's libnvvm),
so a token in the caller's environment never reaches a transcript.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from tileproof.records.trust.signing import KEY_ENV
from tileproof.toolchain.find import HAZARD_VARS

CHILD_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
    "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "XDG_CACHE_HOME",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_CACHE_PATH", "CUDA_CACHE_DISABLE",
    "CUDA_TILE_CACHE_DIR", "CUDA_TILE_DISABLE_CACHE", "CUDA_TILE_LOGS", "CUDA_TILE_TEMP_DIR",
    "CUDA_TILE_ENABLE_CRASH_DUMP", "CUDA_TILE_COMPILER_TIMEOUT_SEC",
    "CUPY_CACHE_DIR", "TILEPROOF_SEED", "TILEPROOF_OUTPUT_CAP",
    # Shared GPU hosts switch NVLink multicast off through these; a child must keep them.
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
)
"""Names a child may inherit (docs/running-programs.md, "Environment: an allowlist"); a lesson adds more
with ``env:``."""


def child_env(*, extra: Iterable[str] = (), path_dirs: Iterable[str] = (), device: int | None = None,
              base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted environment: ``path_dirs`` first on PATH, one GPU visible when ``device`` is set (GPU
    ``device`` in nvidia-smi's numbering)."""
    source = os.environ if base is None else base
    names = (set(CHILD_ENV) | set(extra)) - {KEY_ENV}  # a lesson's env: list never hands a program the key's path
    env = {k: v for k, v in source.items() if k in names and k not in HAZARD_VARS}
    dirs = [str(d) for d in path_dirs]
    if dirs:
        env["PATH"] = os.pathsep.join([*dirs, env.get("PATH", "")])
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
        # nvidia-smi's order, so that device N is the GPU nvidia-smi calls N (CUDA's default, FASTEST_FIRST, may
        # order a host's GPUs otherwise): the index, uuid and bus id a record names are those of the GPU it ran on.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env.setdefault("PYTHONUNBUFFERED", "1")
    return env
