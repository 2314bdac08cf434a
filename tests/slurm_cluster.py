"""Test helpers for the single-node Slurm of ``scripts/slurm_node``: where its packages come from,
harmless GPU device files, and the GPU query transcripts a CPU cluster is stood up with.

Imported by tests/test_fleet_slurm.py and tests/test_slurm_node.py (``tests/`` is on sys.path when
pytest runs them); not a test module itself.

Slurm comes from, in this order: the folder ``scripts/slurm_node gather`` wrote, named by
``TILEPROOF_SLURM_DEBS`` or at ``build/slurm-node`` (what ``.ci/run`` gathers; the cluster is then
stood up from unpacked packages exactly as on a GPU node without network), else Slurm and munge
installed from the distribution's packages (``/``). Neither: the tests that need it skip, except
in CI, where that is an error.
"""

from __future__ import annotations

import importlib
import os
import shutil
import stat
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))  # the package scripts/slurm_node, as its __main__ finds it
slurm_node = importlib.import_module("slurm_node")

H200_QUERY = REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv"
"""A real ``nvidia-smi --query-gpu`` transcript of the lent H200 (one GPU)."""

DEBS = Path(os.environ.get("TILEPROOF_SLURM_DEBS") or REPO / "build" / "slurm-node")
GATHERED = (DEBS / slurm_node.MANIFEST).is_file()
INSTALLED = all(shutil.which(d) or Path(f"/usr/sbin/{d}").exists() for d in slurm_node.DAEMONS + ("sbatch",))
SOURCE = "gathered" if GATHERED else "installed" if INSTALLED else None
"""Where the tests' Slurm comes from; None: nowhere."""
if SOURCE is None and os.environ.get("CI") == "true":  # .ci/run gathers it: a skip there would hide a broken gather
    raise RuntimeError(f"CI=true but no Slurm: {DEBS / slurm_node.MANIFEST} is missing (.ci/run's fleet block "
                       "runs scripts/slurm_node gather) and Slurm is not installed")
NO_SLURM = (f"no Slurm: gather it with `python scripts/slurm_node gather --out {DEBS}` (needs apt and the "
            "registry; CI does), or apt-get install slurm-wlm munge")
IS_ROOT = os.geteuid() == 0


def where() -> dict:
    """``slurm_node.up``'s arguments for this machine's Slurm."""
    return {"debs": DEBS} if SOURCE == "gathered" else {"system_prefix": Path("/")}


def gpu_query(n: int) -> str:
    """The H200 transcript with ``n`` GPUs: its real row, and for n > 1 copies of it as GPUs 1..n-1 (made up
    here: no multi-GPU host has been captured; only the index and UUID differ)."""
    header, row = H200_QUERY.read_text().splitlines()[:2]
    rows = [row] + [row.replace("0,", f"{i},", 1).replace("GPU-e3", f"GPU-{i:02x}", 1) for i in range(1, n)]
    return "\n".join([header, *rows]) + "\n"


def fake_devices(folder: Path, n: int) -> Path:
    """``nvidia0..n-1`` as character devices with /dev/null's numbers: files slurmd accepts in gres.conf
    (it refuses a regular file) that nothing can harm through. Needs root."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        os.mknod(folder / f"nvidia{i}", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    return folder
