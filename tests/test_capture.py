"""Parsers over real transcripts captured on the H200 (tests/data/gpu/), and the Slurm job a session ran in."""

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tileproof.records.errors import TileproofError
from tileproof.records.models import SlurmJob
from tileproof.records.parsers import parse_gpu_query, parse_pip_freeze
from tileproof.runner.capture import env_allowlisted, git_state, slurm_job

DATA = Path(__file__).parent / "data" / "gpu"


def test_parse_real_gpu_query():
    rows = parse_gpu_query((DATA / "nvidia-smi-query.csv").read_text())
    assert rows == [{
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-e38677bf-980e-e26f-594b-2c9764385f1a",
        "compute_capability": "9.0", "driver_version": "580.159.04", "memory_total_mib": 143771,
        "clocks_sm_mhz": 345, "clocks_mem_mhz": 3201, "pci_bus_id": None,  # asked for since: not in this transcript
    }]


def test_a_multi_gpu_query_names_each_gpu_by_its_bus_and_a_broken_one_by_what_it_still_says():
    """Made-up four-GPU transcript (tests/data/gpu/README.md): GPU 2 answers ``[Unknown Error]``."""
    rows = parse_gpu_query((DATA / "nvidia-smi-query-4gpu.csv").read_text())
    assert [(r["index"], r["pci_bus_id"]) for r in rows] == [
        (0, "00000000:18:00.0"), (1, "00000000:2A:00.0"), (2, "00000000:3A:00.0"), (3, "00000000:5D:00.0")]
    assert (rows[2]["compute_capability"], rows[2]["memory_total_mib"]) == ("[Unknown Error]", None)
    assert parse_gpu_query("index, pci.bus_id\n0, [N/A]\n")[0]["pci_bus_id"] is None


def test_every_child_keeps_the_hosts_nvlink_multicast_off_and_its_records_say_so():
    """NCCL_NVLS_ENABLE, TORCH_SYMM_MEM_DISABLE_MULTICAST and NVSHMEM_DISABLE_NVLS (a multi-GPU H200 host's settings)
    pass the child allowlist and are recorded; a GPU given to a child is CUDA's device in nvidia-smi's order."""
    from tileproof.runner.environment import child_env

    host = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "NCCL_SOCKET_IFNAME": "eth0", "CUDA_DEVICE_ORDER": "FASTEST_FIRST", "PATH": "/bin"}
    child = child_env(base=host, device=3)
    assert {k: child[k] for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")} == {
        "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    assert "NCCL_SOCKET_IFNAME" not in child  # the allowlist still passes nothing else
    assert (child["CUDA_VISIBLE_DEVICES"], child["CUDA_DEVICE_ORDER"]) == ("3", "PCI_BUS_ID")
    assert child_env(base=host)["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"  # no device chosen: the caller's own
    assert env_allowlisted(child)["NVSHMEM_DISABLE_NVLS"] == "1"
    assert "NCCL_SOCKET_IFNAME" not in env_allowlisted(host)


def test_parse_gpu_query_without_gpus():
    assert parse_gpu_query("") == []
    assert parse_gpu_query("index, name, uuid, compute_cap\n") == []


def test_parse_real_pip_freeze():
    pk = parse_pip_freeze((DATA / "pip-freeze.txt").read_text())
    assert pk["cuda-tile"] == "1.7.0"
    assert pk["pydantic"]
    assert pk["numpy"]
    assert all("==" not in k for k in pk)


def test_env_allowlist_never_copies_everything():
    env = {"CUDA_HOME": "/usr/local/cuda", "AWS_SECRET_ACCESS_KEY": "x", "PATH": "/bin", "HOME": "/root"}
    assert env_allowlisted(env) == {"CUDA_HOME": "/usr/local/cuda", "PATH": "/bin"}


def test_editable_install_is_read_from_pips_comment():
    text = "# Editable Git install with no remote (tileproof==0.1.0)\n-e /work/main\nnumpy==2.4.6\n"
    assert parse_pip_freeze(text) == {"tileproof": "0.1.0", "numpy": "2.4.6"}


def test_wheel_reference_reads_the_decoded_wheel_version():
    """An offline install's ``name @ file:///...whl``: URL-decoded, version from the wheel's file name."""
    text = ("torch @ file:///tmp/gpu-node/wheels/torch-2.13.0%2Bcpu-cp312-cp312-manylinux_2_28_x86_64.whl"
            "#sha256=0123abcd\n"
            "annotated-types @ file:///w/annotated_types-0.8.0-py3-none-any.whl#sha256=f0\n")
    assert parse_pip_freeze(text) == {"torch": "2.13.0+cpu", "annotated-types": "0.8.0"}


def test_names_are_canonical():
    text = "Typing_Extensions==4.16.0\nzope.interface==7.2\nPyYAML==6.0.4\n"
    assert parse_pip_freeze(text) == {"typing-extensions": "4.16.0", "zope-interface": "7.2", "pyyaml": "6.0.4"}


def test_lines_that_are_not_pins_are_skipped():
    text = ("pkg @ git+https://example.invalid/pkg.git@abc\n-e /work/main\nnot a requirement !!\n"
            "broken @ file:///w/not-a-wheel.tar.gz\nnumpy>=2\nnumpy==2.4.6\n")
    assert parse_pip_freeze(text) == {"numpy": "2.4.6"}


def test_real_freeze_wheel_lines_match_their_wheel_names():
    """Every ``@ file://...whl`` line of the H200 transcript reads the version its wheel file names."""
    text = (DATA / "pip-freeze.txt").read_text()
    pk = parse_pip_freeze(text)
    assert pk["cuda-tile"] == "1.7.0"
    assert pk["annotated-types"] == "0.8.0"
    assert pk["colorlog"] == "6.12.0"
    assert all("%" not in v and "/" not in v for v in pk.values())


def test_installed_packages_are_keyed_by_canonical_name():
    from packaging.utils import canonicalize_name

    from tileproof.runner.capture import installed_packages

    pk = installed_packages()
    assert pk
    assert all(canonicalize_name(name) == name for name in pk)
    assert "pydantic-core" in pk
    assert "typing-extensions" in pk


def test_installed_versions_agree_with_importlib_metadata_for_every_distribution():
    import importlib.metadata as md

    from packaging.utils import canonicalize_name

    from tileproof.runner.capture import installed_packages

    first: dict[str, str] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name and canonicalize_name(name) not in first:
            first[canonicalize_name(name)] = dist.version
    assert installed_packages() == dict(sorted(first.items()))


def _dist(site: Path, folder: str, headers: str) -> None:
    (site / folder).mkdir(parents=True)
    (site / folder / "METADATA").write_text(f"Metadata-Version: 2.1\n{headers}\n\nName: not-a-header\n")


def test_the_first_distribution_on_the_path_is_listed_and_one_without_a_version_is_refused(tmp_path, monkeypatch):
    from tileproof.records.errors import ToolchainError
    from tileproof.runner.capture import installed_packages
    from tileproof.toolchain.find import package_versions

    _dist(tmp_path / "a", "Zz_Shadowed-2.0.dist-info", "Name: Zz_Shadowed\nVersion: 2.0")
    _dist(tmp_path / "b", "zz_shadowed-1.0.dist-info", "Name: zz.shadowed\nVersion: 1.0")
    _dist(tmp_path / "a", "nvidia_zz-13.4.dist-info", "Name: nvidia-zz\nVersion: 13.4")
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    assert installed_packages()["zz-shadowed"] == "2.0"  # the description's "Name:" line is no header
    assert package_versions()["nvidia-zz"] == "13.4"
    _dist(tmp_path / "a", "zz_broken-1.dist-info", "Name: zz-broken")
    with pytest.raises(ToolchainError, match=r"the installed distribution zz-broken has no Version .*fix: reinstall"):
        installed_packages()


def test_a_redacted_direct_reference_is_skipped_not_fatal():
    text = "mypkg @ git+https://[REDACTED:url-userinfo]@github.com/o/mypkg.git@0123abc\nnumpy==2.4.6\n"
    assert parse_pip_freeze(text) == {"numpy": "2.4.6"}


SLURM_TASK_ENV = Path(__file__).parent / "data" / "fleet" / "slurm" / "array-task-env.txt"
"""``env`` in task 1 of a ``--gres=gpu:1`` job array on tests/test_fleet_slurm.py's single-node cluster
(two GPUs backed by harmless devices), filtered to SLURM_*, CUDA_*, GPU_* and LD_* (none)."""


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_the_slurm_job_is_read_from_a_real_array_tasks_environment():
    job = slurm_job(_env_file(SLURM_TASK_ENV))
    assert job == SlurmJob(job_id="3", array_job_id="1", array_task_id=1, cluster="tileproof-node", node="vm",
                           job_gpus=[1], step_gpus=None, cuda_visible_devices="1")


def test_outside_slurm_there_is_no_job_and_a_job_without_gres_has_no_gpus():
    assert slurm_job({"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0"}) is None
    job = slurm_job({"SLURM_JOB_ID": "7", "SLURM_STEP_GPUS": "2,3"})
    assert (job.job_id, job.array_job_id, job.array_task_id, job.job_gpus, job.step_gpus,
            job.cuda_visible_devices) == ("7", None, None, None, [2, 3], None)


@pytest.mark.parametrize("name, value", [("SLURM_JOB_GPUS", "0,x"), ("SLURM_STEP_GPUS", "gpu0"),
                                         ("SLURM_ARRAY_TASK_ID", "1-3")])
def test_a_slurm_variable_that_is_not_what_slurm_writes_is_one_line(name, value):
    with pytest.raises(TileproofError) as e:
        slurm_job({"SLURM_JOB_ID": "7", name: value})
    assert str(e.value).startswith(f"{name}={value!r}: expected")
    assert "\n" not in str(e.value)


def test_the_runtime_is_asked_about_the_gpu_the_programs_get_where_slurm_bound_one(tmp_path, monkeypatch):
    """A task Slurm gave GPU 1 of two (``CUDA_VISIBLE_DEVICES=1``) runs ``--device 1``: nvidia-smi's row 1 and
    the CUDA runtime's device 0 under ``CUDA_VISIBLE_DEVICES=1`` are that GPU (asking the runtime for device 1
    there fails: it sees one GPU). A fake nvidia-smi and cupy that count the visible GPUs as CUDA does."""
    from tileproof.runner.capture import gpu_facts

    header, row = (DATA / "nvidia-smi-query.csv").read_text().splitlines()[:2]
    query = "\n".join([header, row, row.replace("0,", "1,", 1).replace("GPU-e3", "GPU-01", 1)])
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ncase \"$1\" in --query-gpu=*) cat <<'EOF'\n{query}\nEOF\n;; *) echo table;; esac\n")
    fake.chmod(0o755)
    runtime = tmp_path / "py" / "cupy" / "cuda"
    runtime.mkdir(parents=True)
    (runtime.parent / "__init__.py").write_text("from . import cuda\n")
    (runtime / "__init__.py").write_text("from . import runtime\n")
    (runtime / "runtime.py").write_text(
        "import os\n\ndef getDeviceProperties(i):\n"
        "    if i >= len(os.environ.get('CUDA_VISIBLE_DEVICES', '0,1').split(',')):\n"
        "        raise RuntimeError('cudaErrorInvalidDevice')\n"
        "    return {'major': 9, 'minor': 0}\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(fake.parent), os.environ["PATH"]]))
    monkeypatch.setenv("PYTHONPATH", str(runtime.parent.parent))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # as Slurm set it for the task
    probe = gpu_facts(tmp_path, "FIXTURE-session", 1)
    assert probe.no_gpu is None
    assert probe.gpu.uuid.startswith("GPU-01")
    assert probe.gpu.runtime_compute_capability == "9.0"


def _repo(root: Path, ignore: str) -> Callable[..., None]:
    """A git repository at ``root`` whose one commit holds a ``.gitignore`` of ``ignore``; returns its git."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(root), "-c", "user.name=a", "-c", "user.email=a@example.org", *args],
                       check=True, capture_output=True)
    git("init", "-q")
    (root / ".gitignore").write_text(ignore)
    git("add", "-A")
    git("commit", "-qm", "first")
    return git


def test_a_tree_with_untracked_sources_is_dirty_but_not_for_the_stores_own_output(tmp_path):
    """A new lesson's program compiled before its first commit is a source HEAD lacks: the tree is dirty. Records
    and transcripts the store wrote (runs/, evidence/) and ignored files leave it clean."""
    git = _repo(tmp_path, "build/\n")
    for rel in ["runs/20261201T000000Z-run-00000000.json", "evidence/20261201T000000Z-run-00000000/stdout.txt",
                "build/cache/x.cubin"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert git_state(tmp_path).dirty is False
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "new_kernel.py").write_text("print('new')\n")
    assert git_state(tmp_path).dirty is True
    git("add", "-A")
    git("commit", "-qm", "the kernel")
    assert git_state(tmp_path).dirty is False
    (tmp_path / ".gitignore").write_text("build/\nkernels/\n")
    assert git_state(tmp_path).dirty is True  # a tracked file changed


def test_a_fleet_tasks_build_link_leaves_its_worktree_clean(tmp_path):
    """A fleet task's worktree links ``build`` to the checkout's build folder: git's ``/build/`` pattern ignores a
    folder, not a link, and the link is tileproof's own output, so the tree stays clean; a file named like it
    elsewhere (``kernels/build``) does not."""
    _repo(tmp_path, "/build/\n")
    outside = tmp_path.parent / f"{tmp_path.name}-builds"
    outside.mkdir()
    (tmp_path / "build").symlink_to(outside)
    assert git_state(tmp_path).dirty is False
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "build").write_text("x")
    assert git_state(tmp_path).dirty is True
